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
//!   `<name>-auth`. The password is never logged;
//! - labelled with the CR's `metadata.labels`, which a label selector
//!   matches (`VALKYRIE PAUSE SELECTOR`); a label change is applied
//!   though it leaves the generation alone.

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
use crate::config::{GroupConfig, GroupOwner, GroupTls, Secret};
use crate::runtime::Handle;

/// What a CR does not say about its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// The quorum of every CR group: a majority of the Valkyries that peer
    /// (2 for the three of `deploy/`, 1 for a lone Valkyrie).
    pub quorum: u32,
    /// The cluster's DNS domain, in the pods' names.
    pub cluster_domain: String,
    /// How long a switchover waits for the `-master` Service to reach the
    /// chosen replica before it pauses writes (`runtime/route.rs`).
    pub route_wait: Duration,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            quorum: 2,
            cluster_domain: "cluster.local".to_owned(),
            route_wait: Duration::from_millis(2000),
        }
    }
}

/// Why a CR is not monitored: the CR asks for what this release does not
/// do. The reconciler reports it in the Valid condition.
pub fn validate(vc: &ValkeyCluster) -> Result<String, Error> {
    if let Some(tls) = vc.spec.tls.as_ref().filter(|t| t.enabled) {
        if !tls.replication {
            return Err(Error::Invalid {
                reason: "TLSReplicationRequired",
                message: "tls.replication: false would leave replication on a plain-text port \
                          beside the TLS one; Valkyrie monitors each pod on one port and sends \
                          REPLICAOF to it, so with TLS the replication is TLS too"
                    .into(),
            });
        }
        if tls.secret_name.is_none() {
            return Err(Error::Invalid {
                reason: "TLSSecretRequired",
                message: "tls.secretName is required when tls.enabled".into(),
            });
        }
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

/// The Secrets `vc`'s group reads, in its namespace: the password's, and
/// the TLS Secret when TLS is on.
pub fn secrets_of(vc: &ValkeyCluster) -> Vec<String> {
    let mut names = vec![password_ref(vc).name];
    if let Some(tls) = vc.spec.tls.as_ref().filter(|t| t.enabled)
        && let Some(secret) = &tls.secret_name
    {
        names.push(secret.clone());
    }
    names
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
    group.write_fence = crate::core::WriteFence {
        mode: monitoring.write_fence.mode(),
        lag_secs: u64::try_from(monitoring.write_fence_lag_seconds)
            .unwrap_or(1)
            .clamp(1, 3600),
    };
    group.route_wait = settings.route_wait;
    group.auth_user = vc.spec.auth.as_ref().and_then(|a| a.monitor_user.clone());
    group.auth_pass = auth_pass;
    group.known_replicas = (0..pods)
        .map(|i| (names.pod_fqdn(i, domain), VALKEY_PORT as u16))
        .filter(|(h, p)| !(*h == host && *p == port))
        .collect();
    group.owner = GroupOwner::Kubernetes {
        namespace,
        name: names.name,
        labels: vc.labels().clone(),
    };
    Ok(group)
}

/// The retiring pods `vc`'s status names, as written.
fn retiring_pods(vc: &ValkeyCluster) -> &[String] {
    vc.status
        .as_ref()
        .and_then(|s| s.retiring_pods.as_deref())
        .unwrap_or_default()
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

/// The Secret keys of a CR's TLS Secret (`kubernetes.io/tls` and
/// cert-manager's `ca.crt`).
pub const TLS_SECRET_KEYS: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

/// Where a CR's TLS material comes from, as logs and metrics name it.
pub fn tls_source(namespace: &str, secret: &str) -> String {
    format!("secret:{namespace}/{secret}")
}

/// Reads the CR's TLS Secret `name` (`ca.crt`, `tls.crt`, `tls.key`) and
/// checks that it builds; the key is never logged.
pub async fn read_tls(client: &Client, namespace: &str, name: &str) -> Result<GroupTls, Error> {
    let api: Api<KubeSecret> = Api::namespaced(client.clone(), namespace);
    let secret = api
        .get_opt(name)
        .await
        .map_err(|e| Error::api(format!("get Secret {namespace}/{name}"), e))?;
    let [ca, cert, key] = TLS_SECRET_KEYS.map(|key| {
        let secret = secret.as_ref()?;
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .or_else(|| Some(secret.string_data.as_ref()?.get(key)?.clone().into_bytes()))
            .filter(|b| !b.is_empty())
            .ok_or(key)
            .ok()
    });
    let missing = |key: &str| Error::SecretMissing {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        key: key.to_owned(),
    };
    let ca = ca.ok_or_else(|| missing("ca.crt"))?;
    let cert = cert.ok_or_else(|| missing("tls.crt"))?;
    let key = key.ok_or_else(|| missing("tls.key"))?;
    let key = String::from_utf8(key).map_err(|_| Error::TlsSecret {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        message: "tls.key is not PEM text".into(),
    })?;
    let tls = GroupTls {
        source: tls_source(namespace, name),
        ca,
        cert,
        key: Secret::new(key),
    };
    crate::tls::group::check(&crate::config::TlsSettings::new(), &tls).map_err(|e| {
        Error::TlsSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            message: e.to_string(),
        }
    })?;
    Ok(tls)
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
                && e.vc.labels() == vc.labels()
            {
                // A status change: only the retiring pods matter here (a
                // label change leaves the generation alone, and is
                // applied).
                let previous = std::mem::replace(&mut e.vc, vc.clone());
                let group = e.group.clone();
                drop(registry);
                if retiring_pods(&previous) != retiring_pods(&vc) {
                    self.mark_retiring(&vc, &group).await;
                }
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
            Err(e @ Error::TlsSecret { .. }) => {
                // Counted as the daemon's own files are: once per broken
                // content, the material in use staying.
                let text = e.to_string();
                let again =
                    self.registry.lock().await.entries.get(&key).is_some_and(
                        |prev| matches!(&prev.outcome, Outcome::Pending(p) if *p == text),
                    );
                if !again {
                    crate::metrics::tls_reloaded(false);
                }
                Outcome::Pending(text)
            }
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
        let kept = outcome.kept();
        if kept {
            self.mark_retiring(&vc, &group).await;
        }
        let mut registry = self.registry.lock().await;
        registry.entries.insert(key, Entry { vc, group, outcome });
        if !kept {
            self.retain(&registry).await;
        }
    }

    /// Marks the pods `vc`'s status names as retiring in `group` (and
    /// every other one not), as the reconciler published them.
    async fn mark_retiring(&self, vc: &ValkeyCluster, group: &str) {
        let addrs = retiring::retiring(vc, &self.settings.cluster_domain);
        tracing::debug!(group, pods = ?retiring_pods(vc), "retiring pods");
        if let Err(e) = self.handle.retire(group.to_owned(), addrs).await {
            tracing::debug!(group, "retiring pods not marked: {e}");
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
        let mut config = group_config(vc, &self.settings, master.as_deref(), auth_pass)?;
        let mut pending = pending;
        if let Some(secret) = vc
            .spec
            .tls
            .as_ref()
            .filter(|t| t.enabled)
            .and_then(|t| t.secret_name.as_deref())
        {
            config.tls = match read_tls(&self.client, &namespace, secret).await {
                Ok(tls) => Some(tls),
                // The group in use keeps its material until the Secret
                // builds again.
                Err(e) if exists => return Err(e),
                // A new group waits for its material: its links never
                // speak plain text to a TLS port.
                Err(e) => {
                    pending.get_or_insert_with(|| e.to_string());
                    Some(GroupTls::pending(tls_source(&namespace, secret)))
                }
            };
        }
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

    /// Secret `name` in `namespace` changed or went: the CRs whose group
    /// reads it are applied again at once, so a rotated password or TLS
    /// certificate reaches their links without waiting for the resync.
    pub async fn secret_changed(&self, namespace: &str, name: &str) {
        let todo: Vec<Arc<ValkeyCluster>> = {
            let registry = self.registry.lock().await;
            registry
                .entries
                .values()
                .filter(|e| e.vc.namespace().as_deref() == Some(namespace))
                .filter(|e| secrets_of(&e.vc).iter().any(|s| s == name))
                .map(|e| e.vc.clone())
                .collect()
        };
        for vc in todo {
            tracing::debug!(namespace, secret = name, cr = %vc.name_any(), "Secret changed");
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

pub mod retiring;

#[cfg(test)]
mod tests;
