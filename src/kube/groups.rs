//! From `ValkeyCluster`s to failover groups: what group a CR is
//! ([`group_config`], pure), and the registry ([`Groups`]) through which
//! every Valkyrie — the Lease holder or not — creates, updates and removes
//! the groups of the CRs it sees, with the runtime's managed-group seam
//! ([`Handle::apply_managed`], [`Handle::retain_managed`]).
//!
//! Every Valkyrie monitors every CR's group, because failover decisions
//! come from peering: each peer must watch the same masters and vote. Only
//! the reconciler (the Lease holder) writes to the API server; this module
//! only reads (the password Secret, the ConfigMap's last master).
//!
//! A group is:
//! - named [`master_name`] (`<namespace>.<name>` unless
//!   `spec.monitoring.masterName`), owned by the CR;
//! - first monitored at the master the CR's status names, else the one its
//!   ConfigMap names, else pod 0 — always by the pod's stable DNS name on
//!   port 6379, never by a pod IP; the other pods are its known replicas.
//!   From then on the failovers decide the master, not the CR;
//! - given the quorum of the input's settings (a majority of the peering
//!   Valkyries) and the CR's timers;
//! - logged in to with `spec.auth.monitorUser` and the password of the
//!   monitor Secret, else the `default` user's Secret, else the generated
//!   `<name>-auth`. The password is never logged.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ::kube::api::Api;
use ::kube::runtime::reflector::ObjectRef;
use ::kube::{Client, ResourceExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret as KubeSecret};
use tokio::sync::Mutex;

use super::crd::{SecretKeyRef, ValkeyCluster, master_name};
use super::error::Error;
use super::render::names::{CONFIG_KEY_MASTER, Names, SECRET_KEY_PASSWORD, VALKEY_PORT};
use crate::config::{GroupConfig, GroupOwner, Secret};
use crate::runtime::Handle;

/// What a CR does not say about its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// The quorum of every CR group: a majority of the Valkyries that peer
    /// (2 for the three of `deploy/`, 1 for a lone Valkyrie).
    pub quorum: u32,
    /// The cluster's DNS domain, in the pods' names.
    pub cluster_domain: String,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            quorum: 2,
            cluster_domain: "cluster.local".to_owned(),
        }
    }
}

/// Why a CR is not monitored: the CR asks for what this release does not
/// do. The reconciler reports it in the Valid condition.
pub fn validate(vc: &ValkeyCluster) -> Result<String, Error> {
    if vc.spec.tls.as_ref().is_some_and(|t| t.enabled) {
        return Err(Error::Invalid {
            reason: "TLSNotSupported",
            message: "tls.enabled: this release of Valkyrie monitors Valkey without TLS".into(),
        });
    }
    master_name(vc).ok_or_else(|| Error::Invalid {
        reason: "NoMasterName",
        message: "the ValkeyCluster has no namespace".into(),
    })
}

/// The Secret key holding the password Valkyrie logs in with.
pub fn password_ref(vc: &ValkeyCluster) -> SecretKeyRef {
    let auth = vc.spec.auth.as_ref();
    auth.and_then(|a| a.monitor_password_secret_ref.clone())
        .or_else(|| auth.and_then(|a| a.password_secret_ref.clone()))
        .unwrap_or_else(|| SecretKeyRef {
            name: format!("{}-auth", vc.name_any()),
            key: SECRET_KEY_PASSWORD.to_owned(),
        })
}

/// `host:port` as the core takes it.
fn parse_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let port = port.parse().ok().filter(|p| *p != 0)?;
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The group of `vc`. `master` is the address to start from when the
/// status names none (the ConfigMap's); `auth_pass` the password read.
pub fn group_config(
    vc: &ValkeyCluster,
    settings: &GroupSettings,
    master: Option<&str>,
    auth_pass: Option<Secret>,
) -> Result<GroupConfig, Error> {
    let name = validate(vc)?;
    let namespace = vc.namespace().unwrap_or_default();
    let names = Names::new(&namespace, &vc.name_any());
    let domain = settings.cluster_domain.as_str();
    let (host, port) = vc
        .status
        .as_ref()
        .and_then(|s| s.current_master.as_ref())
        .and_then(|m| parse_addr(&m.address))
        .or_else(|| master.and_then(parse_addr))
        .unwrap_or_else(|| (names.pod_fqdn(0, domain), VALKEY_PORT as u16));
    let monitoring = vc.spec.monitoring.clone().unwrap_or_default();
    let pods = u32::try_from(vc.spec.replicas).unwrap_or(1);
    let mut group = GroupConfig::new(name, host.clone(), port, settings.quorum.max(1));
    group.down_after = millis(monitoring.down_after_milliseconds);
    group.failover_timeout = millis(monitoring.failover_timeout_milliseconds);
    group.parallel_syncs = u32::try_from(monitoring.parallel_syncs).unwrap_or(1).max(1);
    group.auth_user = vc.spec.auth.as_ref().and_then(|a| a.monitor_user.clone());
    group.auth_pass = auth_pass;
    group.known_replicas = (0..pods)
        .map(|i| (names.pod_fqdn(i, domain), VALKEY_PORT as u16))
        .filter(|(h, p)| !(*h == host && *p == port))
        .collect();
    group.owner = GroupOwner::Kubernetes {
        namespace,
        name: names.name,
    };
    Ok(group)
}

/// Reads the password `key` of Secret `name` in `namespace`.
pub async fn read_password(
    client: &Client,
    namespace: &str,
    key: &SecretKeyRef,
) -> Result<Secret, Error> {
    let api: Api<KubeSecret> = Api::namespaced(client.clone(), namespace);
    let missing = || Error::SecretMissing {
        namespace: namespace.to_owned(),
        name: key.name.clone(),
        key: key.key.clone(),
    };
    let secret = api
        .get_opt(&key.name)
        .await
        .map_err(|e| Error::api(format!("get Secret {namespace}/{}", key.name), e))?
        .ok_or_else(missing)?;
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&key.key))
        .map(|b| b.0.clone())
        .or_else(|| {
            let s = secret.string_data.as_ref()?.get(&key.key)?;
            Some(s.clone().into_bytes())
        })
        .ok_or_else(missing)?;
    let text = String::from_utf8(bytes).map_err(|_| missing())?;
    Ok(Secret::new(text.trim_end_matches(['\r', '\n'])))
}

/// The master the CR's ConfigMap names (`None` when it does not exist).
async fn configured_master(client: &Client, vc: &ValkeyCluster) -> Result<Option<String>, Error> {
    let namespace = vc.namespace().unwrap_or_default();
    let names = Names::new(&namespace, &vc.name_any());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let cm = api.get_opt(&names.config_map()).await.map_err(|e| {
        Error::api(
            format!("get ConfigMap {namespace}/{}", names.config_map()),
            e,
        )
    })?;
    Ok(cm.and_then(|c| c.data?.get(CONFIG_KEY_MASTER).cloned()))
}

/// How the last attempt at a CR's group went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Monitored as the CR's generation says.
    Applied {
        /// The generation applied.
        generation: Option<i64>,
    },
    /// Monitored, or to be, but not up to date: retried soon (a Secret
    /// not readable yet). The text is for the log and the status.
    Pending(String),
    /// Not monitored: the CR asks for what this release does not do.
    Invalid {
        /// The condition reason.
        reason: &'static str,
        /// For humans.
        message: String,
    },
    /// Not monitored: the runtime refused the group (its name belongs to
    /// sentinel.conf or to another CR).
    Refused(String),
}

impl Outcome {
    /// Whether the group stays monitored.
    fn kept(&self) -> bool {
        matches!(self, Outcome::Applied { .. } | Outcome::Pending(_))
    }
}

/// What the registry knows of one CR.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The CR as last seen.
    pub vc: Arc<ValkeyCluster>,
    /// Its group's name (empty when it has none).
    pub group: String,
    /// How the last attempt went.
    pub outcome: Outcome,
}

#[derive(Debug, Default)]
struct Registry {
    entries: HashMap<ObjectRef<ValkeyCluster>, Entry>,
    /// A full list has been seen: removing groups not in it is safe.
    synced: bool,
}

impl Registry {
    fn keep(&self) -> BTreeSet<String> {
        self.entries
            .values()
            .filter(|e| e.outcome.kept())
            .map(|e| e.group.clone())
            .collect()
    }
}

/// The groups of the CRs this Valkyrie sees, kept in step with the
/// runtime. Shared by the CR watcher and the reconciler (which removes a
/// deleted CR's group before its finalizer goes).
pub struct Groups {
    handle: Handle,
    client: Client,
    settings: GroupSettings,
    registry: Mutex<Registry>,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Groups {
    /// A registry applying groups to `handle`, reading Secrets with `client`.
    pub fn new(handle: Handle, client: Client, settings: GroupSettings) -> Groups {
        Groups {
            handle,
            client,
            settings,
            registry: Mutex::new(Registry::default()),
        }
    }

    /// The settings groups are made with.
    pub fn settings(&self) -> &GroupSettings {
        &self.settings
    }

    /// Monitors `vc`'s group, or updates it; removes it when `vc` is being
    /// deleted or cannot be monitored. Unless `force`, a generation already
    /// applied is not applied again.
    pub async fn apply(&self, vc: Arc<ValkeyCluster>, force: bool) {
        let key = ObjectRef::from_obj(&*vc);
        if vc.metadata.deletion_timestamp.is_some() {
            self.forget(&key).await;
            return;
        }
        let generation = vc.metadata.generation;
        if !force {
            let mut registry = self.registry.lock().await;
            if let Some(e) = registry.entries.get_mut(&key)
                && e.outcome == (Outcome::Applied { generation })
            {
                e.vc = vc;
                return;
            }
        }
        let group = master_name(&vc).unwrap_or_default();
        let outcome = match self.config_of(&vc, &group).await {
            Ok((config, pending)) => match self.handle.apply_managed(config).await {
                Ok(()) => pending.map_or(Outcome::Applied { generation }, Outcome::Pending),
                Err(refusal) => Outcome::Refused(refusal.to_string()),
            },
            Err(Error::Invalid { reason, message }) => Outcome::Invalid { reason, message },
            Err(e) => Outcome::Pending(e.to_string()),
        };
        match &outcome {
            Outcome::Applied { .. } => tracing::debug!(group, cr = %key, "group applied"),
            Outcome::Pending(why) => tracing::info!(group, cr = %key, "group pending: {why}"),
            Outcome::Invalid { message, .. } => {
                tracing::warn!(group, cr = %key, "not monitored: {message}");
            }
            Outcome::Refused(why) => tracing::warn!(group, cr = %key, "not monitored: {why}"),
        }
        let mut registry = self.registry.lock().await;
        let removed = !outcome.kept();
        registry.entries.insert(key, Entry { vc, group, outcome });
        if removed {
            self.retain(&registry).await;
        }
    }

    /// The group of `vc`, with the password read, and why it is not up to
    /// date yet, if it is not. A new group whose Secret cannot be read yet
    /// (the reconciler creates the generated one) starts without a
    /// password and gets it at the next try; an existing group keeps the
    /// one it has until the Secret can be read.
    async fn config_of(
        &self,
        vc: &ValkeyCluster,
        group: &str,
    ) -> Result<(GroupConfig, Option<String>), Error> {
        validate(vc)?;
        let namespace = vc.namespace().unwrap_or_default();
        let exists = self.handle.topology.borrow().groups.contains_key(group);
        let (auth_pass, pending) =
            match read_password(&self.client, &namespace, &password_ref(vc)).await {
                Ok(p) => (Some(p), None),
                Err(e) if exists => return Err(e),
                Err(e) => (None, Some(e.to_string())),
            };
        let has_status = vc
            .status
            .as_ref()
            .is_some_and(|s| s.current_master.is_some());
        let master = if exists || has_status {
            None
        } else {
            configured_master(&self.client, vc).await?
        };
        let config = group_config(vc, &self.settings, master.as_deref(), auth_pass)?;
        Ok((config, pending))
    }

    /// Stops monitoring `key`'s group (its CR is deleted or being deleted).
    pub async fn forget(&self, key: &ObjectRef<ValkeyCluster>) {
        let mut registry = self.registry.lock().await;
        if registry.entries.remove(key).is_some() {
            self.retain(&registry).await;
        }
    }

    /// A full list was seen: the CRs not in it are gone. From now on
    /// removals reach the runtime.
    pub async fn relisted(&self, seen: &HashSet<ObjectRef<ValkeyCluster>>) {
        let mut registry = self.registry.lock().await;
        registry.entries.retain(|k, _| seen.contains(k));
        registry.synced = true;
        self.retain(&registry).await;
    }

    /// Applies every CR again (`pending_only`: those not up to date): a
    /// rotated password is picked up, a refused group retried.
    pub async fn resync(&self, pending_only: bool) {
        let todo: Vec<Arc<ValkeyCluster>> = {
            let registry = self.registry.lock().await;
            registry
                .entries
                .values()
                .filter(|e| !pending_only || matches!(e.outcome, Outcome::Pending(_)))
                .map(|e| e.vc.clone())
                .collect()
        };
        for vc in todo {
            self.apply(vc, true).await;
        }
    }

    /// What the registry knows of `key`.
    pub async fn entry(&self, key: &ObjectRef<ValkeyCluster>) -> Option<Entry> {
        self.registry.lock().await.entries.get(key).cloned()
    }

    /// The CR owning group `group`, if a monitored CR does.
    pub async fn owner_of(&self, group: &str) -> Option<ObjectRef<ValkeyCluster>> {
        let registry = self.registry.lock().await;
        registry
            .entries
            .iter()
            .find(|(_, e)| e.group == group && e.outcome.kept())
            .map(|(k, _)| k.clone())
    }

    /// Removes from the runtime the managed groups no kept CR names, once
    /// a full list has been seen (before, a group restored from the state
    /// file may just not have been seen yet).
    async fn retain(&self, registry: &Registry) {
        if !registry.synced {
            return;
        }
        match self.handle.retain_managed(registry.keep()).await {
            Ok(gone) if !gone.is_empty() => {
                tracing::info!(?gone, "groups of ValkeyClusters removed")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("groups of deleted ValkeyClusters not removed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests;
