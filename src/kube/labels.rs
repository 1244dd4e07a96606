//! The role labels that follow the failover: `valkyrie.io/role=master` on
//! the pod Valkyrie advertises as the master, `replica` on the others, so
//! that the `-master` Service (which selects the label) follows at once.
//!
//! Every write is fenced by the configuration epoch: each pod carries the
//! epoch of its last role change in [`ANNOTATION_CONFIG_EPOCH`], a pod
//! whose annotation is already at or above the new epoch is left alone,
//! and the patch carries the `resourceVersion` it was decided on, so a
//! concurrent writer (another Valkyrie, the reconciler) makes it fail with
//! 409 rather than be overwritten; it is then decided again on a fresh
//! read. A lower epoch therefore never overwrites a higher one, whoever
//! writes and in whatever order.
//!
//! The old master is demoted before the new one is promoted: for a moment
//! the Service may select no pod, never two.
//!
//! [`RoleLabels`] is the runtime's [`RoleHook`]: the failover step runs it
//! before `+switch-master` is published.

use std::collections::BTreeMap;

use ::kube::api::{Api, ListParams, Patch, PatchParams};
use ::kube::{Client, ResourceExt};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::render::names::{
    LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_ROLE, ROLE_MASTER, ROLE_REPLICA,
};
use crate::config::GroupOwner;
use crate::runtime::{HookFuture, MasterSwitch, RoleHook};

/// The configuration epoch of a pod's last role change.
pub const ANNOTATION_CONFIG_EPOCH: &str = "valkyrie.io/config-epoch";

/// How many times a write that lost a race (409) is decided again.
const CONFLICT_RETRIES: usize = 5;

/// Why the labels could not be moved.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// The API server refused or failed.
    #[error("API: {0}")]
    Api(#[from] ::kube::Error),
    /// No pod of the resource is named by the new master's address.
    #[error("no pod of {namespace}/{name} is {host}")]
    NoSuchPod {
        /// The resource's namespace.
        namespace: String,
        /// The resource's name.
        name: String,
        /// The new master's host.
        host: String,
    },
    /// Other writers kept winning.
    #[error("pod {0}: still conflicting after {CONFLICT_RETRIES} attempts")]
    Contended(String),
}

/// The pod an address names: pods are addressed by their stable DNS
/// names, `<pod>.<headless service>.<namespace>.svc…`, or by the bare
/// pod name.
pub fn pod_of(host: &str) -> &str {
    host.split('.').next().unwrap_or(host)
}

/// Moves the role labels of `ValkeyCluster` pods.
#[derive(Clone)]
pub struct RoleLabels {
    client: Client,
}

impl std::fmt::Debug for RoleLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleLabels").finish_non_exhaustive()
    }
}

impl RoleLabels {
    /// Labels written through `client`.
    pub fn new(client: Client) -> RoleLabels {
        RoleLabels { client }
    }

    /// Makes `master_pod` the master of `namespace/name`'s pods, and every
    /// other pod a replica, in `config_epoch`. Returns the pods changed.
    pub async fn converge(
        &self,
        namespace: &str,
        name: &str,
        master_pod: &str,
        config_epoch: u64,
    ) -> Result<Vec<String>, LabelError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let selector = format!("{LABEL_INSTANCE}={name},{LABEL_MANAGED_BY}=valkyrie");
        let listed = pods.list(&ListParams::default().labels(&selector)).await?;
        let names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
        if !names.iter().any(|n| n == master_pod) {
            return Err(LabelError::NoSuchPod {
                namespace: namespace.to_string(),
                name: name.to_string(),
                host: master_pod.to_string(),
            });
        }
        // Demotions first: never two pods labelled master.
        let mut order: Vec<&String> = names.iter().filter(|n| *n != master_pod).collect();
        order.extend(names.iter().filter(|n| *n == master_pod));
        let mut changed = Vec::new();
        for pod in order {
            let role = if pod == master_pod {
                ROLE_MASTER
            } else {
                ROLE_REPLICA
            };
            if set_role(&pods, pod, role, config_epoch).await? {
                changed.push(pod.clone());
            }
        }
        Ok(changed)
    }
}

/// The epoch a pod's role was last written in (0: never).
fn written_epoch(pod: &Pod) -> u64 {
    pod.annotations()
        .get(ANNOTATION_CONFIG_EPOCH)
        .and_then(|e| e.parse().ok())
        .unwrap_or(0)
}

/// Gives `pod` the `role` of `epoch`, unless it already carries a role
/// written in `epoch` or later. Whether it was changed.
async fn set_role(pods: &Api<Pod>, pod: &str, role: &str, epoch: u64) -> Result<bool, LabelError> {
    for _ in 0..CONFLICT_RETRIES {
        let current = pods.get(pod).await?;
        let labels: &BTreeMap<String, String> = current.labels();
        let written = written_epoch(&current);
        if written > epoch
            || (written == epoch && labels.get(LABEL_ROLE).map(String::as_str) == Some(role))
        {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {
                "resourceVersion": current.resource_version(),
                "labels": { LABEL_ROLE: role },
                "annotations": { ANNOTATION_CONFIG_EPOCH: epoch.to_string() },
            }
        });
        match pods
            .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(::kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(LabelError::Contended(pod.to_string()))
}

impl RoleHook for RoleLabels {
    fn master_switched(&self, switch: MasterSwitch) -> HookFuture {
        let labels = self.clone();
        Box::pin(async move {
            let GroupOwner::Kubernetes {
                namespace, name, ..
            } = &switch.owner
            else {
                return Ok(());
            };
            labels
                .converge(
                    namespace,
                    name,
                    pod_of(&switch.new.host),
                    switch.config_epoch,
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_named_by_the_first_label_of_their_address() {
        assert_eq!(
            pod_of("cache-1.cache-headless.shop.svc.cluster.local"),
            "cache-1"
        );
        assert_eq!(pod_of("cache-0"), "cache-0");
    }
}
