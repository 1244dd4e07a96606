//! The `ValkeyCluster` custom resource (`valkeyclusters.valkyrie.io`,
//! `v1alpha1`): its spec and status types, the CEL rules the API server
//! enforces on them, the names derived from a CR (its Sentinel master name),
//! and the CRD document that `valkyrie crd` prints and `deploy/05-crd.yaml`
//! holds.
//!
//! One CR is one failover group: a master and its replicas, `spec.replicas`
//! pods in all. The spec's sub-objects live in [`types`], the status in
//! [`status`], and the YAML writer for the CRD document in [`yaml`].

use std::collections::BTreeMap;

use ::kube::CustomResource;
use ::kube::CustomResourceExt;
use ::kube::KubeSchema;
use k8s_openapi::api::core::v1::{
    LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext,
};
use serde::{Deserialize, Serialize};

pub mod status;
pub mod types;
pub mod yaml;

pub use status::{Condition, CurrentMaster, Phase, ValkeyClusterStatus};
pub use types::{
    AntiAffinity, AuthSpec, MonitoringSpec, PdbSpec, PullPolicy, RetentionPolicy, SchedulingSpec,
    SecretKeyRef, ServiceSpec, ServiceType, StorageSpec, TlsSpec, WriteFenceMode,
};
pub use types::{MAX_MAP_ENTRIES, MAX_MASTER_NAME};

/// The API group of Valkyrie's resources.
pub const GROUP: &str = "valkyrie.io";
/// The version of `ValkeyCluster` served and stored.
pub const VERSION: &str = "v1alpha1";
/// The longest `metadata.name` a `ValkeyCluster` may have (CEL): the
/// StatefulSet's pods add `-N` and its revision label a hash, and
/// `<name>-headless` must stay a DNS label.
pub const MAX_NAME: usize = 52;
/// `valkey.conf` directives that Valkyrie writes itself (or that would cut
/// it off from the servers): `spec.config` may not set them.
pub const MANAGED_CONFIG: &[&str] = &[
    "aclfile",
    "daemonize",
    "dir",
    "include",
    "masterauth",
    "masteruser",
    "port",
    "rename-command",
    "replica-announce-ip",
    "replica-announce-port",
    "replicaof",
    "requirepass",
    "slave-announce-ip",
    "slave-announce-port",
    "slaveof",
    "tls-ca-cert-dir",
    "tls-ca-cert-file",
    "tls-cert-file",
    "tls-key-file",
    "tls-port",
    "tls-replication",
    "user",
];

/// A Valkey master and its replicas, monitored and failed over by
/// Valkyrie. Sentinel clients find it under `spec.monitoring.masterName`,
/// by default `<namespace>.<name>`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "valkyrie.io",
    version = "v1alpha1",
    kind = "ValkeyCluster",
    namespaced,
    status = "ValkeyClusterStatus",
    derive = "PartialEq",
    shortname = "vkc",
    category = "valkyrie",
    doc = "A Valkey master and its replicas, failed over by Valkyrie.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Master", type_ = "string", json_path = ".status.currentMaster.pod"),
    printcolumn(name = "Epoch", type_ = "integer", json_path = ".status.configEpoch"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image", priority = 1),
    validation = Rule::new("self.metadata.name.size() <= 52")
        .message("metadata.name must be at most 52 characters (the StatefulSet's pods and revisions add to it)"),
    validation = Rule::new("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')")
        .message("metadata.name must be a DNS label that starts with a letter (the Services are named after it)")
)]
#[x_kube(
    validation = Rule::new("has(self.storage) == has(oldSelf.storage)")
        .message("storage cannot be added or removed after creation"),
    validation = Rule::new(
        "(has(self.monitoring) && has(self.monitoring.masterName) ? self.monitoring.masterName : '') == (has(oldSelf.monitoring) && has(oldSelf.monitoring.masterName) ? oldSelf.monitoring.masterName : '')"
    )
    .message("monitoring.masterName is immutable (clients know the group by it)")
)]
#[serde(rename_all = "camelCase")]
pub struct ValkeyClusterSpec {
    /// Pods in all: one master plus `replicas - 1` replicas. With 1 no
    /// failover is possible.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 15))]
    pub replicas: i32,
    /// The Valkey image (7.2 or later: replicas announce DNS names).
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// When the kubelet pulls the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<PullPolicy>,
    /// Secrets for pulling the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The Valkey container's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// A volume per pod for the data; absent, the data lives in an
    /// emptyDir and is lost with the pod. Cannot be added or removed later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,
    /// Passwords and ACLs, as references to Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,
    /// TLS on the Valkey port, between the pods and from Valkyrie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// The PodDisruptionBudget over the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PdbSpec>,
    /// The client Services: `<name>-master` and `<name>-replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
    /// Where the pods run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<SchedulingSpec>,
    /// The Sentinel parameters of the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
    /// Extra `valkey.conf` directives (name in lower case, then the
    /// arguments as one line). Directives Valkyrie manages are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "types::config_schema")]
    #[x_kube(
        validation = Rule::new("self.all(k, k.matches('^[a-z][a-z0-9-]*$'))")
            .message("config names are valkey.conf directives in lower case"),
        validation = Rule::new(managed_config_rule()).message(::kube::core::Message::Message(format!(
            "config may not set a directive Valkyrie manages ({})",
            MANAGED_CONFIG.join(", ")
        )))
    )]
    pub config: BTreeMap<String, String>,
    /// Labels added to the pods (`app.kubernetes.io/*` and `valkyrie.io/*`
    /// are Valkyrie's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_MAP_ENTRIES))]
    #[x_kube(
        validation = Rule::new("self.all(k, !k.startsWith('app.kubernetes.io/') && !k.startsWith('valkyrie.io/'))")
            .message("podLabels may not use the app.kubernetes.io/ and valkyrie.io/ prefixes: Valkyrie selects pods by them")
    )]
    pub pod_labels: BTreeMap<String, String>,
    /// Annotations added to the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_MAP_ENTRIES))]
    pub pod_annotations: BTreeMap<String, String>,
    /// The pods' security context (default: non-root uid 999, the
    /// official image's `valkey` user, with the RuntimeDefault seccomp
    /// profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// The Valkey container's security context (default: the restricted
    /// profile with a read-only root filesystem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// Seconds a stopping Valkey has to finish (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub termination_grace_period_seconds: Option<i64>,
}

fn default_replicas() -> i32 {
    3
}

/// The CEL rule refusing [`MANAGED_CONFIG`] in `spec.config`.
fn managed_config_rule() -> String {
    let names: Vec<String> = MANAGED_CONFIG.iter().map(|k| format!("'{k}'")).collect();
    format!("self.all(k, !(k in [{}]))", names.join(", "))
}

/// The Sentinel master name of a CR: `spec.monitoring.masterName`, else
/// `<namespace>.<name>`. A namespace is a DNS label (no dot), so the first
/// dot splits the default form unambiguously; and a dot, unlike a slash,
/// survives the URL forms clients take Sentinel settings in
/// (`redis+sentinel://host:26379/<master>/0`). `None` without a namespace.
pub fn master_name(vc: &ValkeyCluster) -> Option<String> {
    if let Some(name) = vc
        .spec
        .monitoring
        .as_ref()
        .and_then(|m| m.master_name.clone())
    {
        return Some(name);
    }
    let ns = vc.metadata.namespace.as_deref()?;
    let name = vc.metadata.name.as_deref()?;
    Some(format!("{ns}.{name}"))
}

/// The CRD document as `kubectl apply` takes it: YAML, with a header that
/// says where it comes from. `deploy/05-crd.yaml` is exactly this text.
pub fn crd_yaml() -> Result<String, serde_json::Error> {
    let value = serde_json::to_value(ValkeyCluster::crd())?;
    let header = "Generated by `valkyrie crd` from src/kube/crd/mod.rs: do not edit.\n\
                  Regenerate with: cargo run -q -- crd > deploy/05-crd.yaml";
    Ok(yaml::to_yaml(&value, Some(header)))
}
