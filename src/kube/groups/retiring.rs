//! The pods a CR's status names as retiring (`status.retiringPods`,
//! written by the Lease holder's reconciler before it deletes a pod or
//! switches over), as the addresses of the CR's group. Every Valkyrie
//! marks them in its runtime, so that none promotes them and none counts
//! them in the write fence it governs.
//!
//! The list is read as hostile input: only `<name>-<ordinal>` names of
//! this CR count, with a plain decimal ordinal below [`MAX_ORDINAL`], and
//! at most [`MAX_RETIRING`] of them.

use std::collections::BTreeSet;

use ::kube::ResourceExt;

use crate::core::Addr;
use crate::kube::crd::ValkeyCluster;
use crate::kube::render::Names;
use crate::kube::render::names::VALKEY_PORT;

/// The most names read (the CRD allows no more pods).
pub const MAX_RETIRING: usize = 15;

/// No pod of a CR has an ordinal this high (the CRD allows 15 pods).
pub const MAX_ORDINAL: u32 = 64;

/// The ordinal of pod `pod` of the CR `name`, if it is one.
fn ordinal(name: &str, pod: &str) -> Option<u32> {
    let digits = pod.strip_prefix(name)?.strip_prefix('-')?;
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    digits.parse().ok().filter(|n| plain && *n < MAX_ORDINAL)
}

/// The addresses of the pods `vc`'s status names as retiring, in the
/// cluster's DNS domain `domain`; names that are not this CR's pods are
/// left out.
pub fn retiring(vc: &ValkeyCluster, domain: &str) -> BTreeSet<Addr> {
    let names = Names::new(&vc.namespace().unwrap_or_default(), &vc.name_any());
    let pods = vc
        .status
        .as_ref()
        .and_then(|s| s.retiring_pods.as_deref())
        .unwrap_or_default();
    pods.iter()
        .take(MAX_RETIRING)
        .filter_map(|p| ordinal(&names.name, p))
        .map(|n| pod_addr(&names, n, domain))
        .collect()
}

/// Where Valkyrie reaches pod `ordinal` of `names`' CR: its stable DNS
/// name in `domain`, Valkey's port.
pub fn pod_addr(names: &Names, ordinal: u32, domain: &str) -> Addr {
    Addr {
        host: names.pod_fqdn(ordinal, domain),
        port: u16::try_from(VALKEY_PORT).unwrap_or(6379),
    }
}
