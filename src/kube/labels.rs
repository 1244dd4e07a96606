//! The roles that follow the failover: the `-master` Service's selector,
//! which names the pod Valkyrie advertises as the master, and the role
//! labels, `valkyrie.io/role=master` on that pod and `replica` on the
//! others (the `-replicas` Service selects those).
//!
//! The Service goes first, in one write: kube-proxy programs a change at
//! most once per `minSyncPeriod` (1 s by default, measured from its last
//! sync), so a Service that lost its old endpoint in one change and got
//! the new one in another would refuse connections for that second. One
//! write moves it from the old master to the new, never through no pod or
//! two. The labels follow; the old master's is taken first, so the label
//! too is never on two pods.
//!
//! Every write is fenced by the configuration epoch: the Service and each
//! pod carry the epoch of their last role change in
//! [`ANNOTATION_CONFIG_EPOCH`], an object whose annotation is already at or
//! above the new epoch is left alone, and the patch carries the
//! `resourceVersion` it was decided on, so a concurrent writer (another
//! Valkyrie, the reconciler) makes it fail with 409 rather than be
//! overwritten; it is then decided again on a fresh read. A lower epoch
//! therefore never overwrites a higher one, whoever writes and in
//! whatever order.
//!
//! [`RoleLabels`] is the runtime's [`RoleHook`]: the failover step runs it
//! before `+switch-master` is published.

use std::collections::BTreeMap;

use ::kube::api::{Api, ListParams, Patch, PatchParams};
use ::kube::{Client, ResourceExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::json;

use super::render::names::{
    LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_ROLE, Names, ROLE_MASTER, ROLE_REPLICA,
};
use crate::config::GroupOwner;
use crate::runtime::{HookFuture, MasterSwitch, RoleHook, RouteFuture, RouteTo};

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
    /// other pod a replica, in `config_epoch`: the `-master` Service first,
    /// then the labels. What was changed.
    pub async fn converge(
        &self,
        namespace: &str,
        name: &str,
        master_pod: &str,
        config_epoch: u64,
    ) -> Result<Moved, LabelError> {
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
        let services: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        let service = select_master(
            &services,
            &Names::new(namespace, name),
            master_pod,
            config_epoch,
        )
        .await?;
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
        Ok(Moved {
            service,
            pods: changed,
        })
    }
}

/// What [`RoleLabels::converge`] changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// The `-master` Service was pointed at the master's pod.
    pub service: bool,
    /// The pods whose role label was written.
    pub pods: Vec<String>,
}

impl Moved {
    /// Whether anything was written.
    pub fn any(&self) -> bool {
        self.service || !self.pods.is_empty()
    }
}

/// The epoch an object's role was last written in (0: never).
fn written_epoch(annotations: &BTreeMap<String, String>) -> u64 {
    annotations
        .get(ANNOTATION_CONFIG_EPOCH)
        .and_then(|e| e.parse().ok())
        .unwrap_or(0)
}

/// Points the `-master` Service at `pod` in `epoch`, unless it already
/// names a master written in `epoch` or later. A Service not created yet
/// is left to the apply that creates it (selectorless) and the repair
/// after it. Whether it was changed.
async fn select_master(
    services: &Api<Service>,
    names: &Names,
    pod: &str,
    epoch: u64,
) -> Result<bool, LabelError> {
    Ok(point_master(services, names, pod, epoch, Stamp::Epoch)
        .await?
        .changed)
}

/// Whether a write of the `-master` Service's selector stamps it with
/// its epoch (a role change) or keeps the epoch it has (a route moved
/// ahead of a switchover, or back).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stamp {
    Epoch,
    Keep,
}

/// What [`point_master`] did, and where the Service is reached.
struct Pointed {
    changed: bool,
    /// Its cluster IP and first port, if it has them.
    reached: Option<(String, u16)>,
}

/// Points the `-master` Service at `pod`, unless its role was written in
/// a later epoch than `epoch`, or it names `pod` already (stamped with
/// `epoch`, when `stamp` asks for it). The patch carries the
/// `resourceVersion` it was decided on; a concurrent writer makes it
/// decide again.
async fn point_master(
    services: &Api<Service>,
    names: &Names,
    pod: &str,
    epoch: u64,
    stamp: Stamp,
) -> Result<Pointed, LabelError> {
    let name = names.master_service();
    let wanted = names.master_selector(pod);
    for _ in 0..CONFLICT_RETRIES {
        let Some(current) = services.get_opt(&name).await? else {
            return Ok(Pointed {
                changed: false,
                reached: None,
            });
        };
        let spec = current.spec.as_ref();
        let reached = spec.and_then(|s| {
            let ip = s.cluster_ip.clone().filter(|ip| ip != "None")?;
            let port = s.ports.as_ref()?.first()?.port;
            Some((ip, u16::try_from(port).ok()?))
        });
        let selector = spec.and_then(|s| s.selector.as_ref());
        let written = written_epoch(current.annotations());
        let stamped = stamp == Stamp::Keep || written == epoch;
        if written > epoch || (stamped && selector == Some(&wanted)) {
            return Ok(Pointed {
                changed: false,
                reached,
            });
        }
        let mut metadata = json!({ "resourceVersion": current.resource_version() });
        if stamp == Stamp::Epoch {
            metadata["annotations"] = json!({ ANNOTATION_CONFIG_EPOCH: epoch.to_string() });
        }
        let patch = json!({
            "metadata": metadata,
            "spec": { "selector": selector_patch(selector, &wanted) },
        });
        match services
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                return Ok(Pointed {
                    changed: true,
                    reached,
                });
            }
            Err(::kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(LabelError::Contended(name))
}

/// A merge patch's selector: a merge patch merges maps key by key, so
/// every key of the current selector that `wanted` lacks is removed
/// (null), or the Service would select by both.
fn selector_patch(
    current: Option<&BTreeMap<String, String>>,
    wanted: &BTreeMap<String, String>,
) -> serde_json::Value {
    let mut patch = serde_json::Map::new();
    for key in current.into_iter().flatten().map(|(k, _)| k) {
        if !wanted.contains_key(key) {
            patch.insert(key.clone(), serde_json::Value::Null);
        }
    }
    for (k, v) in wanted {
        patch.insert(k.clone(), serde_json::Value::String(v.clone()));
    }
    serde_json::Value::Object(patch)
}

/// Gives `pod` the `role` of `epoch`, unless it already carries a role
/// written in `epoch` or later. Whether it was changed.
async fn set_role(pods: &Api<Pod>, pod: &str, role: &str, epoch: u64) -> Result<bool, LabelError> {
    for _ in 0..CONFLICT_RETRIES {
        let current = pods.get(pod).await?;
        let labels: &BTreeMap<String, String> = current.labels();
        let written = written_epoch(current.annotations());
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
    fn route(&self, route: RouteTo) -> RouteFuture {
        let client = self.client.clone();
        Box::pin(async move {
            let GroupOwner::Kubernetes {
                namespace, name, ..
            } = &route.owner
            else {
                return Ok(None);
            };
            let services: Api<Service> = Api::namespaced(client, namespace);
            let names = Names::new(namespace, name);
            // Without a new epoch: the promotion's write stamps it.
            let pointed = point_master(
                &services,
                &names,
                pod_of(&route.to.host),
                route.config_epoch,
                Stamp::Keep,
            )
            .await
            .map_err(|e| e.to_string())?;
            Ok(pointed
                .reached
                .map(|(ip, port)| crate::core::Addr::new(ip, port)))
        })
    }

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
                .map(drop)
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

    #[test]
    fn a_selector_patch_removes_the_keys_the_new_selector_lacks() {
        let names = Names::new("shop", "cache");
        let old = names.role_selector(ROLE_MASTER);
        let wanted = names.master_selector("cache-1");
        let patch = selector_patch(Some(&old), &wanted);
        assert_eq!(patch[LABEL_ROLE], serde_json::Value::Null);
        assert_eq!(patch["statefulset.kubernetes.io/pod-name"], "cache-1");
        assert_eq!(patch[LABEL_INSTANCE], "cache");
        let plain: serde_json::Map<String, serde_json::Value> = wanted
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        assert_eq!(
            selector_patch(None, &wanted),
            serde_json::Value::Object(plain)
        );
    }
}
