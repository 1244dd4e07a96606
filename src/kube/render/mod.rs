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

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::kube::crd::ValkeyCluster;

pub mod config;
mod context;
pub mod names;
pub mod pod;
pub mod services;

pub use context::{Observed, RenderError};
pub use names::Names;

use context::Ctx;

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
