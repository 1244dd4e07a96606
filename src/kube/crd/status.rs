//! The status of a `ValkeyCluster`: what the reconciler observed (phase,
//! conditions, counts, the scale subresource's selector) and the group's
//! current master with the config epoch it was adopted in.
//!
//! Every field is optional and left out when unset, so that a server-side
//! apply of part of the status claims only the fields it names.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The status of a `ValkeyCluster`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ValkeyClusterStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A one-word summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Ready, Available, Progressing, Degraded, FailoverInProgress and
    /// Valid, each with the generation it was computed for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Pods that exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods that are Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Replicas whose link to the advertised master is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_replicas: Option<i32>,
    /// The label selector of the pods (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The master Valkyrie advertises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_master: Option<CurrentMaster>,
    /// The config epoch the current master was adopted in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_epoch: Option<i64>,
    /// The pods on their way out (`<name>-N`): being deleted, or removed
    /// by a scale-down. Written by the reconciler before it deletes or
    /// switches over, read by every Valkyrie: none promotes them, and
    /// none counts them in the write fence, so a planned departure stops
    /// no write. Written under a field manager of its own,
    /// `valkyrie-retiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    pub retiring_pods: Option<Vec<String>>,
}

/// The master Valkyrie advertises.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct CurrentMaster {
    /// Its pod, `<name>-N`.
    pub pod: String,
    /// Its address, `<pod>.<name>-headless.<namespace>.svc.<domain>:6379`.
    pub address: String,
}

/// A one-word summary of a `ValkeyCluster`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Children being created.
    Pending,
    /// Pods starting, no master advertised yet.
    Bootstrapping,
    /// A master and every replica in sync.
    Running,
    /// A master, but replicas missing or out of sync.
    Degraded,
    /// A failover in progress.
    FailingOver,
    /// A rolling update or a scale in progress.
    Updating,
    /// The spec cannot be served (see the Valid condition).
    Failed,
    /// Being deleted.
    Deleting,
}
