//! Whether a CR's pods, as its Services' endpoints see them, have been
//! still long enough for a master move to reach kube-proxy at once.
//!
//! kube-proxy programs endpoint changes at most once per its
//! `minSyncPeriod` (1 s by default), counted from its last sync. A
//! switchover moves the `-master` Service in one write (`kube/labels.rs`),
//! but when one of the CR's own pods changed just before (a replica that
//! became Ready in a roll, the master's pod set terminating by a deletion
//! or an eviction), kube-proxy has just synced for that change, and the
//! move waits out the rest of the period while clients of the Service are
//! answered `READONLY` by the demoted master.
//!
//! So the switchovers the reconciler asks for (a roll, a scale-down, a
//! master pod being deleted) wait until the pods have been still for
//! [`Settings::endpoints_quiet`](super::Settings). Writes go on to the old
//! master meanwhile: the wait costs time, not writes. A change of another
//! workload's endpoints can still take kube-proxy's sync first; only the
//! CR's own are waited out.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use ::kube::ResourceExt;
use ::kube::runtime::reflector::ObjectRef;
use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

use super::super::crd::ValkeyCluster;
use super::super::render::names::LABEL_ROLE;

/// The pods' endpoint state last seen per CR, and since when.
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    seen: Mutex<HashMap<ObjectRef<ValkeyCluster>, (u64, Instant)>>,
}

impl Quiet {
    /// Notes `pods` of `cr` as seen at `now`; how long until they will
    /// have been still for `quiet` (zero: they have). A CR seen for the
    /// first time (a new Lease holder, a restart) counts as changed now.
    pub(crate) fn remaining(
        &self,
        cr: &ObjectRef<ValkeyCluster>,
        pods: &[Pod],
        quiet: Duration,
        now: Instant,
    ) -> Duration {
        let print = fingerprint(pods);
        let Ok(mut seen) = self.seen.lock() else {
            return Duration::ZERO;
        };
        let since = match seen.get(cr) {
            Some((p, since)) if *p == print => *since,
            _ => {
                seen.insert(cr.clone(), (print, now));
                now
            }
        };
        quiet.saturating_sub(now.saturating_duration_since(since))
    }

    /// Forgets `cr` (deleted).
    pub(crate) fn forget(&self, cr: &ObjectRef<ValkeyCluster>) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.remove(cr);
        }
    }
}

/// What an EndpointSlice of the CR's Services holds of each pod: its
/// name, address, readiness, whether it is terminating, and its role.
fn fingerprint(pods: &[Pod]) -> u64 {
    let mut states: Vec<_> = pods
        .iter()
        .map(|p| {
            let status = p.status.as_ref();
            let ready = status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (
                p.name_any(),
                status.and_then(|s| s.pod_ip.clone()),
                ready,
                p.metadata.deletion_timestamp.is_some(),
                p.labels().get(LABEL_ROLE).cloned(),
            )
        })
        .collect();
    states.sort();
    let mut h = DefaultHasher::new();
    states.hash(&mut h);
    h.finish()
}
