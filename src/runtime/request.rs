//! Requests from the ports to the shell: [`Request`] — an operator's
//! ([`OperatorRequest`]), a peer's ([`PeerRequest`]), a custom resource's
//! or a role hook — and [`SetChange`], the typed [`Handle`] methods that
//! send them and wait for the answer, and how the shell carries them out.
//!
//! A configuration change (`MONITOR`, `REMOVE`, `SET`, `FLUSHCONFIG`,
//! `CONFIG SET`, `ACL SETUSER`/`DELUSER`) is saved in the state file first
//! and made only if it was saved; otherwise it is refused with
//! [`Refusal::NotSaved`] and nothing changes. A failover whose epoch could
//! not be saved gets the same refusal and does not act. When the runtime
//! is gone every request gets [`Refusal::ShuttingDown`].
//!
//! Peers' requests ([`PeerRequest`]) go the same way: `SENTINEL is-master-down-by-addr`
//! (a vote is saved before it is announced; a vote that could not be
//! saved is answered as no vote) and hellos `PUBLISH`ed on the Sentinel
//! port.

use std::time::Duration;

use tokio::sync::oneshot;

use super::shell::Shell;
use super::{Handle, millis, spec};
use crate::config::{Config, GroupConfig, GroupOwner, Secret};
use crate::core::{Addr, AdminError, DownAnswer, EpochError, HelloVia, Input, Output};
use crate::state::RuntimeConfig;

/// Why an administrative request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The core's verdict (Sentinel's texts).
    #[error(transparent)]
    Core(#[from] AdminError),
    /// The change could not be saved in the state file, so it was not
    /// made: Sentinel's exact reply when it cannot rewrite its file.
    #[error("ERR Failed to save config file. Check server logs.")]
    NotSaved,
    /// The runtime is gone (the daemon is stopping): nothing was done.
    #[error("ERR shutting down")]
    ShuttingDown,
    /// A peer's epoch was refused (`SENTINEL is-master-down-by-addr`):
    /// Sentinel's reply for an epoch that is not an integer.
    #[error("ERR value is not an integer or out of range")]
    Epoch(#[from] EpochError),
    /// `SENTINEL REMOVE`/`SET` on a group a custom resource owns: only
    /// the resource changes it.
    #[error("ERR group is managed by Kubernetes ({0}): change the resource instead")]
    Managed(GroupOwner),
    /// A custom resource names a group that sentinel.conf or `SENTINEL
    /// MONITOR` already defines: the two sources never share a group.
    #[error("ERR group {0} is defined by the configuration, not by a ValkeyCluster")]
    NotManaged(String),
}

/// Requests from the ports to the shell.
#[derive(Debug)]
pub enum Request {
    /// An operator's, on the Sentinel port.
    Operator(OperatorRequest),
    /// A peer sentinel's, on the Sentinel port.
    Peer(PeerRequest),
    /// Groups owned by custom resources ([`super::managed`]).
    Managed(super::managed::ManagedRequest),
    /// Installs the hook run on a managed group's master change.
    RoleHook {
        /// The hook.
        hook: std::sync::Arc<dyn super::hooks::RoleHook>,
        /// Installed.
        reply: oneshot::Sender<()>,
    },
}

/// What an operator asks on the Sentinel port.
#[derive(Debug)]
pub enum OperatorRequest {
    /// `SENTINEL FAILOVER <name>`.
    Failover {
        /// The group.
        group: String,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL MONITOR`: the new group, already validated.
    Monitor {
        /// The group.
        group: Box<GroupConfig>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL REMOVE <name>`.
    Remove {
        /// The group.
        group: String,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL SET <name> …`, already validated; applied all or nothing.
    Set {
        /// The group.
        group: String,
        /// The changes, in order.
        changes: Vec<SetChange>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL RESET`: the groups whose names matched.
    Reset {
        /// The groups.
        groups: Vec<String>,
        /// How many were reset.
        reply: oneshot::Sender<usize>,
    },
    /// `SENTINEL FLUSHCONFIG`: save the runtime configuration now.
    FlushConfig {
        /// Done, or not saved.
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `SENTINEL CONFIG GET`: the current Sentinel settings.
    ConfigGet {
        /// Where the answer goes.
        reply: oneshot::Sender<RuntimeConfig>,
    },
    /// `SENTINEL CONFIG SET`, already validated.
    ConfigSet {
        /// The new settings (groups are ignored).
        settings: RuntimeConfig,
        /// Done, or not saved (then nothing changed).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
    /// `ACL SETUSER`/`DELUSER`: the Sentinel port's users, to save.
    AclSet {
        /// Every user, as `user` lines with digests.
        users: Vec<crate::config::UserRule>,
        /// Saved, or not saved (then the change must not be made).
        reply: oneshot::Sender<Result<(), Refusal>>,
    },
}

/// What a peer sentinel asks on the Sentinel port.
#[derive(Debug)]
pub enum PeerRequest {
    /// `SENTINEL is-master-down-by-addr`: the master's address, the
    /// asker's epoch (already parsed) and its candidate (`None`: `*`).
    IsMasterDownByAddr {
        /// The master, by address.
        master: Addr,
        /// The asker's current epoch.
        epoch: u64,
        /// Whom to vote for; `None` asks only whether the master is down.
        candidate: Option<String>,
        /// The answer, once any vote is saved.
        reply: oneshot::Sender<Result<DownAnswer, Refusal>>,
    },
    /// `PUBLISH __sentinel__:hello <payload>` on the Sentinel port.
    Hello {
        /// The hello as received.
        payload: String,
        /// Processed.
        reply: oneshot::Sender<()>,
    },
}

impl From<OperatorRequest> for Request {
    fn from(r: OperatorRequest) -> Request {
        Request::Operator(r)
    }
}

impl From<PeerRequest> for Request {
    fn from(r: PeerRequest) -> Request {
        Request::Peer(r)
    }
}

/// One validated `SENTINEL SET` option.
#[derive(Clone, Debug, PartialEq)]
pub enum SetChange {
    /// `down-after-milliseconds`.
    DownAfter(Duration),
    /// `failover-timeout`.
    FailoverTimeout(Duration),
    /// `parallel-syncs`.
    ParallelSyncs(u32),
    /// `quorum`.
    Quorum(u32),
    /// `auth-pass` (empty: none).
    AuthPass(Option<Secret>),
    /// `auth-user` (empty: none).
    AuthUser(Option<String>),
    /// `rename-command <old> <new>`.
    RenameCommand(String, String),
    /// `master-reboot-down-after-period`.
    RebootDownAfter(Duration),
    /// `write-fence` (Valkyrie's).
    WriteFence(crate::core::FenceMode),
    /// `write-fence-lag` in seconds (Valkyrie's).
    WriteFenceLag(u64),
}

impl SetChange {
    /// The `<option> <value>` text of its `+set` event; passwords redacted
    /// as Sentinel does.
    pub fn event_text(&self) -> String {
        match self {
            SetChange::DownAfter(d) => format!("down-after-milliseconds {}", millis(*d)),
            SetChange::FailoverTimeout(d) => format!("failover-timeout {}", millis(*d)),
            SetChange::ParallelSyncs(n) => format!("parallel-syncs {n}"),
            SetChange::Quorum(n) => format!("quorum {n}"),
            SetChange::AuthPass(_) => "auth-pass ******".to_string(),
            SetChange::AuthUser(u) => format!("auth-user {}", u.as_deref().unwrap_or("")),
            SetChange::RenameCommand(a, b) => format!("rename-command {a} {b}"),
            SetChange::RebootDownAfter(d) => {
                format!("master-reboot-down-after-period {}", millis(*d))
            }
            SetChange::WriteFence(m) => format!("write-fence {}", m.as_str()),
            SetChange::WriteFenceLag(s) => format!("write-fence-lag {s}"),
        }
    }

    /// Whether links must reconnect to take it into account.
    pub(super) fn relinks(&self) -> bool {
        matches!(
            self,
            SetChange::DownAfter(_)
                | SetChange::AuthPass(_)
                | SetChange::AuthUser(_)
                | SetChange::RenameCommand(..)
        )
    }

    pub(super) fn apply(&self, g: &mut GroupConfig) {
        match self {
            SetChange::DownAfter(d) => g.down_after = *d,
            SetChange::FailoverTimeout(d) => g.failover_timeout = *d,
            SetChange::ParallelSyncs(n) => g.parallel_syncs = *n,
            SetChange::Quorum(n) => g.quorum = *n,
            SetChange::AuthPass(p) => g.auth_pass.clone_from(p),
            SetChange::AuthUser(u) => g.auth_user.clone_from(u),
            SetChange::RenameCommand(old, new) => {
                g.renamed_commands
                    .retain(|(o, _)| !o.eq_ignore_ascii_case(old));
                if !old.eq_ignore_ascii_case(new) {
                    g.renamed_commands.push((old.clone(), new.clone()));
                }
            }
            SetChange::RebootDownAfter(d) => g.master_reboot_down_after_period = *d,
            SetChange::WriteFence(m) => g.write_fence.mode = *m,
            SetChange::WriteFenceLag(s) => g.write_fence.lag_secs = *s,
        }
    }
}

/// The typed requests the protocol servers make. Each sends one
/// [`Request`] and waits for the shell's answer; when the runtime is
/// gone (the daemon is stopping) the answer is [`Refusal::ShuttingDown`].
impl Handle {
    /// Sends a request built around its reply channel, and waits.
    pub(super) async fn ask<T, R: Into<Request>>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> R,
    ) -> Result<T, Refusal> {
        let (tx, rx) = oneshot::channel();
        if self.requests.send(make(tx).into()).await.is_err() {
            return Err(Refusal::ShuttingDown);
        }
        rx.await.map_err(|_| Refusal::ShuttingDown)
    }

    /// `SENTINEL FAILOVER <name>`.
    pub async fn failover(&self, group: String) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Failover { group, reply })
            .await?
    }

    /// `SENTINEL MONITOR`: `group` already validated.
    pub async fn monitor(&self, group: GroupConfig) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Monitor {
            group: Box::new(group),
            reply,
        })
        .await?
    }

    /// `SENTINEL REMOVE <name>`.
    pub async fn remove(&self, group: String) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Remove { group, reply })
            .await?
    }

    /// `SENTINEL SET <name> …`: `changes` already validated, applied all
    /// or nothing.
    pub async fn set(&self, group: String, changes: Vec<SetChange>) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::Set {
            group,
            changes,
            reply,
        })
        .await?
    }

    /// `SENTINEL RESET`: resets `groups` (the names the pattern matched);
    /// how many were reset.
    pub async fn reset(&self, groups: Vec<String>) -> Result<usize, Refusal> {
        self.ask(|reply| OperatorRequest::Reset { groups, reply })
            .await
    }

    /// `SENTINEL FLUSHCONFIG`: saves the runtime configuration now.
    pub async fn flush_config(&self) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::FlushConfig { reply })
            .await?
    }

    /// `SENTINEL CONFIG GET`: the current Sentinel settings.
    pub async fn config_get(&self) -> Result<RuntimeConfig, Refusal> {
        self.ask(|reply| OperatorRequest::ConfigGet { reply }).await
    }

    /// `SENTINEL CONFIG SET`: `settings` already validated (their groups
    /// are ignored); saved, or nothing changed.
    pub async fn config_set(&self, settings: RuntimeConfig) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::ConfigSet { settings, reply })
            .await?
    }

    /// `ACL SETUSER`/`DELUSER`: saves every user of the Sentinel port;
    /// when they are not saved the change must not be made.
    pub async fn acl_set(&self, users: Vec<crate::config::UserRule>) -> Result<(), Refusal> {
        self.ask(|reply| OperatorRequest::AclSet { users, reply })
            .await?
    }

    /// `SENTINEL is-master-down-by-addr <ip> <port> <epoch> <runid>`:
    /// whether we see `master` down, and our vote in `epoch` (granted to
    /// `candidate` if we have none yet). The vote is saved before the
    /// answer; when it could not be saved the answer names no vote.
    pub async fn is_master_down_by_addr(
        &self,
        master: Addr,
        epoch: u64,
        candidate: Option<String>,
    ) -> Result<DownAnswer, Refusal> {
        self.ask(|reply| PeerRequest::IsMasterDownByAddr {
            master,
            epoch,
            candidate,
            reply,
        })
        .await?
    }

    /// `PUBLISH __sentinel__:hello <payload>`: processes a peer's hello.
    pub async fn hello(&self, payload: String) -> Result<(), Refusal> {
        self.ask(|reply| PeerRequest::Hello { payload, reply })
            .await
    }

    /// `SHUTDOWN`: asks the daemon to exit, as SIGTERM does.
    pub fn request_shutdown(&self) {
        self.shutdown.cancel();
    }
}

impl Shell {
    /// Carries out a request from a port; the reply follows.
    pub(super) async fn serve(&mut self, req: Request) {
        match req {
            Request::Operator(r) => self.operator(r).await,
            Request::Peer(r) => self.peer(r).await,
            Request::Managed(req) => {
                let now = self.now();
                self.managed(now, req).await;
            }
            Request::RoleHook { hook, reply } => {
                self.publication.role_hook = Some(hook);
                let _ = reply.send(());
            }
        }
    }

    /// Carries out an operator's request. A configuration change is
    /// saved first and made only if it was saved; the reply follows.
    async fn operator(&mut self, req: OperatorRequest) {
        let now = self.now();
        match req {
            OperatorRequest::Failover { group, reply } => match self.core.failover(now, &group) {
                Ok(outputs) => {
                    self.execute(outputs).await;
                    // The failover's epoch could not be written: it does
                    // not act, and the client hears so.
                    let result = if self.persistence.unsaved.contains(&group) {
                        Err(Refusal::NotSaved)
                    } else {
                        Ok(())
                    };
                    let _ = reply.send(result);
                }
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                }
            },
            OperatorRequest::Monitor { group, reply } => {
                if self.core.groups().contains_key(&group.name) {
                    let _ = reply.send(Err(AdminError::DuplicateMaster.into()));
                    return;
                }
                let mut config = self.config.clone();
                config.groups.push((*group).clone());
                if let Err(e) = self.save_config_as(config, "SENTINEL MONITOR").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                tracing::info!(group = %group.name, "monitoring started (SENTINEL MONITOR)");
                let result = self.core.monitor(now, spec(&group));
                self.answer(reply, result).await;
            }
            OperatorRequest::Remove { group, reply } => {
                if !self.core.groups().contains_key(&group) {
                    let _ = reply.send(Err(AdminError::NoSuchMaster.into()));
                    return;
                }
                if let Some(owner) = self.managed_by(&group) {
                    let _ = reply.send(Err(Refusal::Managed(owner)));
                    return;
                }
                let mut config = self.config.clone();
                config.groups.retain(|g| g.name != group);
                if let Err(e) = self.save_config_as(config, "SENTINEL REMOVE").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                tracing::info!(group = %group, "monitoring stopped (SENTINEL REMOVE)");
                let result = self.core.remove(&group);
                self.answer(reply, result).await;
            }
            OperatorRequest::Set {
                group,
                changes,
                reply,
            } => {
                let (Some(mut g), true) = (
                    self.config.group(&group).cloned(),
                    self.core.groups().contains_key(&group),
                ) else {
                    let _ = reply.send(Err(AdminError::NoSuchMaster.into()));
                    return;
                };
                if let Some(owner) = self.managed_by(&group) {
                    let _ = reply.send(Err(Refusal::Managed(owner)));
                    return;
                }
                for c in &changes {
                    c.apply(&mut g);
                }
                let mut config = self.config.clone();
                if let Some(slot) = config.groups.iter_mut().find(|x| x.name == group) {
                    *slot = g.clone();
                }
                if let Err(e) = self.save_config_as(config, "SENTINEL SET").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                let texts: Vec<String> = changes.iter().map(SetChange::event_text).collect();
                let result = self.core.set(&group, &spec(&g), &texts);
                if changes.iter().any(SetChange::relinks) {
                    self.relink(&group);
                }
                self.answer(reply, result).await;
            }
            OperatorRequest::Reset { groups, reply } => {
                let (count, outputs) = self.core.reset(&groups);
                let _ = reply.send(count);
                self.execute(outputs).await;
            }
            OperatorRequest::FlushConfig { reply } => {
                let config = self.config.clone();
                let _ = reply.send(self.save_config_as(config, "SENTINEL FLUSHCONFIG").await);
            }
            OperatorRequest::ConfigGet { reply } => {
                let _ = reply.send(RuntimeConfig::of(&self.config));
            }
            OperatorRequest::ConfigSet { settings, reply } => {
                let mut config = self.config.clone();
                let acl = config.acl.take();
                settings.apply(&mut config);
                config.groups.clone_from(&self.config.groups);
                config.acl = acl;
                let credentials = |c: &Config| (c.sentinel_user.clone(), c.sentinel_pass.clone());
                let relink = credentials(&config) != credentials(&self.config);
                let result = self.save_config_as(config, "SENTINEL CONFIG SET").await;
                if result.is_ok() {
                    crate::telemetry::apply_loglevel(&self.config.loglevel);
                    if relink {
                        // As Sentinel: new peer credentials drop every peer
                        // link; they reconnect with them at once.
                        tracing::info!("sentinel-user/sentinel-pass changed: peer links redialled");
                        self.redial_peers();
                    }
                }
                let _ = reply.send(result);
            }
            OperatorRequest::AclSet { users, reply } => {
                let mut config = self.config.clone();
                config.acl = Some(users);
                let _ = reply.send(self.save_config_as(config, "ACL SETUSER/DELUSER").await);
            }
        }
    }

    /// Carries out a peer's request: a vote is saved before it is
    /// announced.
    async fn peer(&mut self, req: PeerRequest) {
        let now = self.now();
        match req {
            PeerRequest::IsMasterDownByAddr {
                master,
                epoch,
                candidate,
                reply,
            } => {
                let group = self
                    .core
                    .groups()
                    .iter()
                    .find(|(_, g)| g.master == master)
                    .map(|(name, _)| name.clone());
                self.core
                    .set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
                match self
                    .core
                    .is_master_down_by_addr(now, &master, epoch, candidate.as_deref())
                {
                    Ok((mut answer, outputs)) => {
                        // The vote is saved (or not) before anyone hears it.
                        self.execute(outputs).await;
                        if group.is_some_and(|g| self.persistence.unsaved.contains(&g)) {
                            // Never announce a vote that is not durable:
                            // after a crash we could vote again in that
                            // epoch.
                            answer.leader = None;
                            answer.leader_epoch = 0;
                        }
                        let _ = reply.send(Ok(answer));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            PeerRequest::Hello { payload, reply } => {
                self.core
                    .set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
                let outputs = self.core.handle(
                    now,
                    Input::Hello {
                        payload,
                        via: HelloVia::SentinelPort,
                    },
                );
                self.execute(outputs).await;
                let _ = reply.send(());
            }
        }
    }

    /// Answers an administrative request with the core's verdict, after
    /// carrying out what it decided.
    pub(super) async fn answer(
        &mut self,
        reply: oneshot::Sender<Result<(), Refusal>>,
        result: Result<Vec<Output>, AdminError>,
    ) {
        match result {
            Ok(outputs) => {
                self.execute(outputs).await;
                let _ = reply.send(Ok(()));
            }
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
        }
    }

    /// Saves `config` as the monitoring configuration, with the state, and
    /// adopts it only if that worked: from then on it is what the daemon
    /// starts with. When it cannot be written nothing changes, the failure
    /// is logged and counted, and `what` is refused with Sentinel's reply.
    pub(super) async fn save_config_as(
        &mut self,
        config: Config,
        what: &str,
    ) -> Result<(), Refusal> {
        let before = self
            .persistence
            .runtime_config
            .replace(RuntimeConfig::of(&config));
        match self.persistence.save().await {
            Ok(()) => {
                self.config = config;
                self.persistence.saved();
                Ok(())
            }
            Err(e) => {
                self.persistence.runtime_config = before;
                crate::metrics::state_write_failed();
                tracing::error!(
                    "{what} refused, nothing changed: cannot write the state file: {e}"
                );
                Err(Refusal::NotSaved)
            }
        }
    }

    /// Restarts every link of `group` with its current settings.
    pub(super) fn relink(&mut self, group: &str) {
        let addrs: Vec<Addr> = self
            .links
            .instances
            .keys()
            .filter(|(g, _)| g == group)
            .map(|(_, a)| a.clone())
            .collect();
        for addr in addrs {
            // Dropping the sender ends the old link.
            self.links
                .instances
                .remove(&(group.to_string(), addr.clone()));
            self.watch(group.to_string(), addr);
        }
    }
}
