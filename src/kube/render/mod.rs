//! The children of a `ValkeyCluster`, rendered by pure functions: the CR
//! and what the caller observed in, the desired objects out, ready for a
//! server-side apply. No I/O, no clock, no randomness (a password to
//! generate is passed in), so the same input gives the same bytes, which
//! the golden tests under `src/kube/testdata/` pin.
//!
//! The children: the Valkey StatefulSet ([`pod`]), its headless Service,
//! the `-master` and `-replicas` Services and the PodDisruptionBudget
//! ([`services`]), the ConfigMap with `valkey.conf` and `start.sh`, and
//! the generated Secret ([`config`]). Every one carries the labels of
//! [`Names::labels`] and a controller owner reference to the CR.

use std::collections::BTreeMap;

use ::kube::Resource;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::kube::crd::ValkeyCluster;

pub mod config;
pub mod names;
pub mod pod;
pub mod services;

pub use names::Names;

/// What a render needs that the CR does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed<'a> {
    /// The cluster's DNS domain (`cluster.local` unless configured).
    pub cluster_domain: &'a str,
    /// A fresh password for the generated Secret, passed only when that
    /// Secret does not exist yet and the CR names none: an existing
    /// Secret is never rewritten.
    pub generated_password: Option<&'a str>,
}

/// The children of one CR.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The Valkey pods.
    pub stateful_set: StatefulSet,
    /// The headless Service that names the pods.
    pub headless_service: Service,
    /// The Service selecting the master pod.
    pub master_service: Service,
    /// The Service selecting the replica pods, unless turned off.
    pub replicas_service: Option<Service>,
    /// `valkey.conf`, `start.sh` and the master to start from.
    pub config_map: ConfigMap,
    /// The generated password, when one was passed in.
    pub secret: Option<Secret>,
    /// The PodDisruptionBudget, unless turned off.
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
}

impl Desired {
    /// Every child as JSON (with its `apiVersion` and `kind`), in a fixed
    /// order: StatefulSet, Services, ConfigMap, Secret, PDB.
    pub fn to_values(&self) -> Result<Vec<serde_json::Value>, serde_json::Error> {
        let mut out = vec![
            serde_json::to_value(&self.stateful_set)?,
            serde_json::to_value(&self.headless_service)?,
            serde_json::to_value(&self.master_service)?,
        ];
        if let Some(s) = &self.replicas_service {
            out.push(serde_json::to_value(s)?);
        }
        out.push(serde_json::to_value(&self.config_map)?);
        if let Some(s) = &self.secret {
            out.push(serde_json::to_value(s)?);
        }
        if let Some(p) = &self.pod_disruption_budget {
            out.push(serde_json::to_value(p)?);
        }
        Ok(out)
    }
}

/// Why a CR cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    /// The CR lacks a name, a namespace or a uid (one read from the API
    /// server has all three).
    #[error("the ValkeyCluster has no metadata.{0}")]
    MissingMetadata(&'static str),
    /// A `spec.config` entry the CRD's rules should have refused.
    #[error("spec.config: {0}")]
    Config(String),
}

/// The children of `vc`.
pub fn render(vc: &ValkeyCluster, observed: &Observed<'_>) -> Result<Desired, RenderError> {
    let ctx = Ctx::new(vc, observed)?;
    let config_map = config::config_map(&ctx)?;
    Ok(Desired {
        stateful_set: pod::stateful_set(&ctx, &config_map),
        headless_service: services::headless(&ctx),
        master_service: services::master(&ctx),
        replicas_service: services::replicas(&ctx),
        secret: config::generated_secret(&ctx),
        pod_disruption_budget: services::pod_disruption_budget(&ctx),
        config_map,
    })
}

/// What every renderer reads: the CR, its names, the owner reference.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) vc: &'a ValkeyCluster,
    pub(crate) names: Names,
    pub(crate) owner: OwnerReference,
    pub(crate) observed: &'a Observed<'a>,
}

impl<'a> Ctx<'a> {
    fn new(vc: &'a ValkeyCluster, observed: &'a Observed<'a>) -> Result<Self, RenderError> {
        let name = vc
            .metadata
            .name
            .as_deref()
            .ok_or(RenderError::MissingMetadata("name"))?;
        let namespace = vc
            .metadata
            .namespace
            .as_deref()
            .ok_or(RenderError::MissingMetadata("namespace"))?;
        let mut owner = vc
            .controller_owner_ref(&())
            .ok_or(RenderError::MissingMetadata("uid"))?;
        // As every controller's children: garbage collection in the
        // foreground waits for them.
        owner.block_owner_deletion = Some(true);
        Ok(Self {
            vc,
            names: Names::new(namespace, name),
            owner,
            observed,
        })
    }

    /// The metadata of child `name`: namespace, labels, owner.
    pub(crate) fn meta(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.names.namespace.clone()),
            labels: Some(self.names.labels()),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// `None` for an empty map, so that it is left out of the object.
pub(crate) fn non_empty<K, V>(map: BTreeMap<K, V>) -> Option<BTreeMap<K, V>> {
    (!map.is_empty()).then_some(map)
}
