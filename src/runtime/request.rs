//! How the shell carries out the requests from the ports ([`Request`]:
//! an operator's [`OperatorRequest`], a peer's [`PeerRequest`], a custom
//! resource's, a role hook; the types are `requests.rs`', the
//! [`Handle`](super::Handle) methods that send them `handle.rs`').
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

use tokio::sync::oneshot;

use super::requests::{OperatorRequest, PeerRequest, Refusal, Request, SetChange};
use super::shell::Shell;
use super::spec::spec;
use crate::config::Config;
use crate::core::{Addr, AdminError, HelloVia, Input, Output, Reason, Refusal as Why};
use crate::state::RuntimeConfig;

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
            OperatorRequest::Failover { group, from, reply } => match match &from {
                None => self.core.failover(now, &group),
                Some(from) => self.core.switch_over(now, &group, from),
            } {
                Ok(outputs) => {
                    self.execute(outputs).await;
                    // The failover's epoch could not be written: it does
                    // not act, and the client hears so.
                    let result = if self.persistence.unsaved.contains(&group) {
                        let unsaved = Why::Hold(Reason::StateUnwritable);
                        let said = self.refused_request(&group, unsaved);
                        self.execute(said).await;
                        Err(Refusal::NotSaved)
                    } else {
                        Ok(())
                    };
                    let _ = reply.send(result);
                }
                Err(e) => {
                    // Said (log, counter, event) before the client hears it.
                    let why = self.core.groups().get(&group).and_then(|g| e.refusal(g));
                    if let Some(why) = why {
                        let said = self.refused_request(&group, why);
                        self.execute(said).await;
                    }
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
                // Its `-monitor` runs its notification script, which the
                // configuration no longer names by then.
                let script = self
                    .config
                    .group(&group)
                    .and_then(|g| g.notification_script.clone());
                let mut config = self.config.clone();
                config.groups.retain(|g| g.name != group);
                if let Err(e) = self.save_config_as(config, "SENTINEL REMOVE").await {
                    let _ = reply.send(Err(e));
                    return;
                }
                tracing::info!(group = %group, "monitoring stopped (SENTINEL REMOVE)");
                let result = self.core.remove(&group);
                if let (Ok(outputs), Some(path)) = (&result, &script) {
                    self.notify_removed(path, outputs);
                }
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
            OperatorRequest::Pause {
                groups,
                paused,
                reply,
            } => {
                let mut outputs = Vec::new();
                let mut changed = Vec::new();
                for group in groups {
                    if let Ok((true, out)) = self.core.pause(&group, paused) {
                        outputs.extend(out);
                        changed.push(group);
                    }
                }
                self.execute(outputs).await;
                let unsaved = changed.iter().any(|g| self.persistence.unsaved.contains(g));
                let _ = reply.send(if unsaved {
                    Err(Refusal::NotSaved)
                } else {
                    Ok(())
                });
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
                    self.publication.announce_hostnames.store(
                        self.config.announce_hostnames,
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    if relink {
                        // As Sentinel: new peer credentials drop every peer
                        // link; they reconnect with them at once.
                        tracing::info!("sentinel-user/sentinel-pass changed: peer links redialled");
                        self.redial_peers();
                    }
                }
                let _ = reply.send(result);
            }
            OperatorRequest::Debug { changes, reply } => {
                self.set_timers(&changes);
                let _ = reply.send(());
            }
            OperatorRequest::SimulateFailure { bits, reply } => {
                self.core.set_crash_points(bits);
                let _ = reply.send(());
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
