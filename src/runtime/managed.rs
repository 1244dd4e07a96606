//! Groups owned by custom resources: the Kubernetes input adds, updates
//! and removes them here, and only here. They are saved in the state file
//! like any group (a restart keeps their votes and epochs), marked with
//! their owner; `SENTINEL REMOVE` and `SENTINEL SET` on them are refused
//! ([`Refusal::Managed`]), and a resource never takes over a group that
//! sentinel.conf or `SENTINEL MONITOR` defined ([`Refusal::NotManaged`]).
//!
//! An update changes the settings a resource carries (quorum, timers,
//! parallel syncs, credentials) with the same `+set` events as `SENTINEL
//! SET`, and its labels (saved, and shown on the group's view for label
//! selectors; no event). The master's address in the request matters
//! only when the group is created: from then on failovers decide it.

use std::collections::BTreeSet;

use super::requests::{ManagedRequest, Refusal, SetChange};
use super::shell::Shell;
use super::spec::spec;
use crate::config::{GroupConfig, GroupOwner, GroupTls};
use crate::core::Millis;

/// The `SENTINEL SET` changes that turn `old`'s settings into `new`'s.
fn changes(old: &GroupConfig, new: &GroupConfig) -> Vec<SetChange> {
    let mut out = Vec::new();
    if old.quorum != new.quorum {
        out.push(SetChange::Quorum(new.quorum));
    }
    if old.down_after != new.down_after {
        out.push(SetChange::DownAfter(new.down_after));
    }
    if old.failover_timeout != new.failover_timeout {
        out.push(SetChange::FailoverTimeout(new.failover_timeout));
    }
    if old.parallel_syncs != new.parallel_syncs {
        out.push(SetChange::ParallelSyncs(new.parallel_syncs));
    }
    if old.auth_user != new.auth_user {
        out.push(SetChange::AuthUser(new.auth_user.clone()));
    }
    if old.auth_pass != new.auth_pass {
        out.push(SetChange::AuthPass(new.auth_pass.clone()));
    }
    if old.write_fence.mode != new.write_fence.mode {
        out.push(SetChange::WriteFence(new.write_fence.mode));
    }
    if old.write_fence.lag_secs != new.write_fence.lag_secs {
        out.push(SetChange::WriteFenceLag(new.write_fence.lag_secs));
    }
    out
}

impl Shell {
    /// Puts a group's new TLS in use: new material for new connections
    /// (connections already up keep theirs); TLS turned on or off, or
    /// another Secret, reconnects the links. Whether the links reconnect.
    fn retls(&mut self, group: &str, old: Option<&GroupTls>, new: Option<&GroupTls>) -> bool {
        match (old, new, self.links.group_tls.get(group)) {
            (Some(o), Some(n), Some(outbound)) if o.source == n.source => {
                if let Err(e) = crate::tls::group::update(group, outbound, n) {
                    crate::metrics::tls_reloaded(false);
                    tracing::warn!(group, source = %n.source, "TLS material refused, the one in use stays: {e}");
                }
                false
            }
            _ => {
                self.links.group_tls.remove(group);
                true
            }
        }
    }

    /// The owner of `group` when a custom resource owns it.
    pub(super) fn managed_by(&self, group: &str) -> Option<GroupOwner> {
        self.config
            .group(group)
            .map(|g| g.owner.clone())
            .filter(|o| *o != GroupOwner::Config)
    }

    pub(super) async fn managed(&mut self, now: Millis, req: ManagedRequest) {
        match req {
            ManagedRequest::Apply { group, reply } => {
                let result = self.apply_managed(now, *group).await;
                let _ = reply.send(result);
            }
            ManagedRequest::Retain { keep, reply } => {
                let result = self.retain_managed(&keep).await;
                let _ = reply.send(result);
            }
            ManagedRequest::Retire {
                group,
                retiring,
                reply,
            } => {
                let now = self.now();
                let result = match self.core.retire(now, &group, &retiring) {
                    Ok(outputs) => {
                        self.execute(outputs).await;
                        Ok(())
                    }
                    Err(e) => Err(Refusal::from(e)),
                };
                let _ = reply.send(result);
            }
        }
    }

    async fn apply_managed(&mut self, now: Millis, group: GroupConfig) -> Result<(), Refusal> {
        if group.owner == GroupOwner::Config {
            return Err(Refusal::NotManaged(group.name));
        }
        let Some(old) = self.config.group(&group.name).cloned() else {
            let mut config = self.config.clone();
            config.groups.push(group.clone());
            self.save_config_as(config, "a ValkeyCluster's new group")
                .await?;
            tracing::info!(group = %group.name, owner = %group.owner, "monitoring started");
            let outputs = self.core.monitor(now, spec(&group))?;
            self.publication
                .advertiser
                .set_labels(&group.name, group.owner.labels().cloned());
            self.execute(outputs).await;
            return Ok(());
        };
        if !old.owner.same_resource(&group.owner) {
            return Err(match old.owner {
                GroupOwner::Config => Refusal::NotManaged(group.name),
                owner => Refusal::Managed(owner),
            });
        }
        let changes = changes(&old, &group);
        // The same resource: only its labels may differ.
        let relabeled = old.owner != group.owner;
        if changes.is_empty() && old.tls == group.tls && !relabeled {
            return Ok(());
        }
        let mut updated = old.clone();
        for c in &changes {
            c.apply(&mut updated);
        }
        updated.tls.clone_from(&group.tls);
        updated.owner.clone_from(&group.owner);
        let mut config = self.config.clone();
        if let Some(slot) = config.groups.iter_mut().find(|g| g.name == group.name) {
            *slot = updated.clone();
        }
        self.save_config_as(config, "a ValkeyCluster's change")
            .await?;
        if relabeled {
            tracing::info!(group = %group.name, labels = ?group.owner.labels(), "labels changed");
            self.publication
                .advertiser
                .set_labels(&group.name, group.owner.labels().cloned());
            self.refresh(&crate::topology::Changed::default());
        }
        let relink_tls =
            old.tls != group.tls && self.retls(&group.name, old.tls.as_ref(), group.tls.as_ref());
        if changes.is_empty() {
            if relink_tls {
                self.relink(&group.name);
            }
            return Ok(());
        }
        let texts: Vec<String> = changes.iter().map(SetChange::event_text).collect();
        let outputs = self.core.set(&group.name, &spec(&updated), &texts)?;
        if relink_tls || changes.iter().any(SetChange::relinks) {
            self.relink(&group.name);
        }
        self.execute(outputs).await;
        Ok(())
    }

    async fn retain_managed(&mut self, keep: &BTreeSet<String>) -> Result<Vec<String>, Refusal> {
        let gone: Vec<String> = self
            .config
            .groups
            .iter()
            .filter(|g| g.owner != GroupOwner::Config && !keep.contains(&g.name))
            .map(|g| g.name.clone())
            .collect();
        if gone.is_empty() {
            return Ok(gone);
        }
        let mut config = self.config.clone();
        config.groups.retain(|g| !gone.contains(&g.name));
        self.save_config_as(config, "removing groups of deleted ValkeyClusters")
            .await?;
        for name in &gone {
            self.links.group_tls.remove(name);
            self.publication.advertiser.set_labels(name, None);
            tracing::info!(group = %name, "monitoring stopped (its ValkeyCluster is gone)");
            if let Ok(outputs) = self.core.remove(name) {
                self.execute(outputs).await;
            }
        }
        Ok(gone)
    }
}
