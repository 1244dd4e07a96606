//! The sub-objects of a `ValkeyCluster`'s spec: storage, auth, TLS, the
//! PodDisruptionBudget, the client Services, scheduling and the Sentinel
//! parameters, each with its defaults and CEL rules.

use std::collections::BTreeMap;

use ::kube::KubeSchema;
use k8s_openapi::api::core::v1::{Affinity, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest master name Valkyrie accepts on the Sentinel port.
pub const MAX_MASTER_NAME: usize = 1024;
/// How many `spec.config` entries, `spec.podLabels` and
/// `spec.podAnnotations` a CR may hold: a bound keeps the API server's
/// estimated cost of the CEL rules over them within its budget.
pub const MAX_MAP_ENTRIES: u32 = 64;

/// `imagePullPolicy`, as for any container.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull at every start.
    Always,
    /// Pull when the node lacks the image.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The value Kubernetes takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// What happens to the pods' volumes when the CR is deleted or scaled
/// down (`persistentVolumeClaimRetentionPolicy` of the StatefulSet).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RetentionPolicy {
    /// Keep the volumes.
    #[default]
    Retain,
    /// Delete the volumes.
    Delete,
}

impl RetentionPolicy {
    /// The value Kubernetes takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retain => "Retain",
            Self::Delete => "Delete",
        }
    }
}

/// A volume per pod.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(
    validation = Rule::new("self.size == oldSelf.size")
        .message("storage.size is immutable in this release"),
    validation = Rule::new(
        "(has(self.storageClassName) ? self.storageClassName : '') == (has(oldSelf.storageClassName) ? oldSelf.storageClassName : '')"
    )
    .message("storage.storageClassName is immutable")
)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// The size of each pod's volume (immutable).
    pub size: Quantity,
    /// The StorageClass (immutable; absent: the cluster's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// The volumes when the CR is deleted.
    #[serde(default)]
    pub when_deleted: RetentionPolicy,
    /// The volumes of the pods removed by a scale-down.
    #[serde(default)]
    pub when_scaled: RetentionPolicy,
}

/// A key in a Secret of the CR's namespace.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key in the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// Passwords and ACLs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(
    validation = Rule::new("!has(self.monitorPasswordSecretRef) || has(self.monitorUser)")
        .message("auth.monitorPasswordSecretRef needs auth.monitorUser")
)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// The password of the `default` user (`requirepass`, and `masterauth`
    /// for replication). Absent: Valkyrie generates one in the Secret
    /// `<name>-auth`, key `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeyRef>,
    /// An ACL file (user lines), mounted and named by `aclfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl_secret_ref: Option<SecretKeyRef>,
    /// The ACL user Valkyrie logs in as (default: `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub monitor_user: Option<String>,
    /// That user's password (default: the `default` user's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor_password_secret_ref: Option<SecretKeyRef>,
}

/// TLS to and between the Valkey servers.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("!self.enabled || has(self.secretName)")
        .message("tls.secretName is required when tls.enabled")
)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Serve TLS only: `tls-port 6379` and `port 0`; Valkyrie's links
    /// present the Secret's certificate and check the pods' against its
    /// CA.
    #[serde(default)]
    pub enabled: bool,
    /// A Secret with `tls.crt`, `tls.key` and `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// Replicate over TLS too (`tls-replication yes`). Must stay true
    /// when enabled: replication and monitoring share the one port.
    #[serde(default = "yes")]
    pub replication: bool,
}

/// The PodDisruptionBudget: at most one of `minAvailable` and
/// `maxUnavailable` (neither: `maxUnavailable: 1`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(
    validation = Rule::new("!(has(self.minAvailable) && has(self.maxUnavailable))")
        .message("podDisruptionBudget takes minAvailable or maxUnavailable, not both")
)]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec {
    /// Create the PodDisruptionBudget.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Pods that must stay available (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// Pods that may be disrupted at once (a number or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// The type of the `<name>-master` Service.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ServiceType {
    /// A cluster-internal address.
    #[default]
    ClusterIP,
    /// A port on every node as well.
    NodePort,
    /// A load balancer as well.
    LoadBalancer,
}

impl ServiceType {
    /// The value Kubernetes takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterIP => "ClusterIP",
            Self::NodePort => "NodePort",
            Self::LoadBalancer => "LoadBalancer",
        }
    }
}

/// The client Services.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// The type of `<name>-master` (`<name>-replicas` is always ClusterIP).
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// Annotations on `<name>-master`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_MAP_ENTRIES))]
    pub annotations: BTreeMap<String, String>,
    /// Also create `<name>-replicas`, selecting the replicas.
    #[serde(default = "yes")]
    pub replicas_service: bool,
}

/// The anti-affinity preset, on `kubernetes.io/hostname`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AntiAffinity {
    /// Spread the pods over nodes when possible.
    #[default]
    Preferred,
    /// Never two pods on one node.
    Required,
    /// No preset.
    Disabled,
}

/// Where the pods run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingSpec {
    /// The anti-affinity preset, ignored when `affinity` is set.
    #[serde(default)]
    pub anti_affinity: AntiAffinity,
    /// The pods' whole affinity; replaces the preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// The pods' node selector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// The pods' tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// The pods' topology spread constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// The pods' PriorityClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

/// The Sentinel parameters of the group.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(
    validation = Rule::new("self.failoverTimeoutMilliseconds >= self.downAfterMilliseconds")
        .message("monitoring.failoverTimeoutMilliseconds must be at least downAfterMilliseconds")
)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// The name Sentinel clients ask for (default `<namespace>.<name>`;
    /// printable ASCII without spaces; immutable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_MASTER_NAME), regex(pattern = r"^[!-~]+$"))]
    pub master_name: Option<String>,
    /// How long the master may not answer before it is down.
    #[serde(default = "default_down_after")]
    #[schemars(range(min = 100, max = 3_600_000))]
    pub down_after_milliseconds: i64,
    /// The failover timeout.
    #[serde(default = "default_failover_timeout")]
    #[schemars(range(min = 100, max = 86_400_000))]
    pub failover_timeout_milliseconds: i64,
    /// Replicas re-pointed at a new master at once.
    #[serde(default = "default_parallel_syncs")]
    #[schemars(range(min = 1, max = 14))]
    pub parallel_syncs: i32,
    /// The write fence: a master cut off from its replicas stops
    /// acknowledging writes a failover would lose (`auto`, the default;
    /// `strict` never relaxes; `off` leaves the master's settings alone).
    #[serde(default)]
    pub write_fence: WriteFenceMode,
    /// `min-replicas-max-lag` while the fence is on.
    #[serde(default = "default_fence_lag")]
    #[schemars(range(min = 1, max = 3600))]
    pub write_fence_lag_seconds: i64,
}

/// `monitoring.writeFence`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WriteFenceMode {
    /// Settings left alone.
    Off,
    /// A majority of the replicas online now.
    #[default]
    Auto,
    /// A majority of every replica; never relaxed.
    Strict,
}

impl WriteFenceMode {
    /// The core's mode.
    pub fn mode(self) -> crate::core::FenceMode {
        match self {
            Self::Off => crate::core::FenceMode::Off,
            Self::Auto => crate::core::FenceMode::Auto,
            Self::Strict => crate::core::FenceMode::Strict,
        }
    }
}

fn default_fence_lag() -> i64 {
    crate::core::group::write_fence::DEFAULT_FENCE_LAG_SECS as i64
}

impl Default for MonitoringSpec {
    fn default() -> Self {
        Self {
            master_name: None,
            down_after_milliseconds: default_down_after(),
            failover_timeout_milliseconds: default_failover_timeout(),
            parallel_syncs: default_parallel_syncs(),
            write_fence: WriteFenceMode::default(),
            write_fence_lag_seconds: default_fence_lag(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_down_after() -> i64 {
    5_000
}

fn default_failover_timeout() -> i64 {
    60_000
}

fn default_parallel_syncs() -> i32 {
    1
}

/// The schema of `spec.config`: at most [`MAX_MAP_ENTRIES`] directives,
/// each one line (a newline would smuggle in another directive).
pub fn config_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": MAX_MAP_ENTRIES,
        "additionalProperties": {
            "type": "string",
            "maxLength": 4096,
            "pattern": "^[^\\r\\n]*$"
        }
    })
}
