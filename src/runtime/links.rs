//! The shell's second part: the links to instances and peers, the
//! urgent-INFO flags they poll by, and the TLS material they speak with.

use std::collections::BTreeMap;

use tokio::sync::{mpsc, watch};
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::core::{Addr, Command, Core, Timers};
use crate::link::{self, Job, LinkSpec};
use crate::peer::PeerJob;

/// Every link the daemon runs.
pub(super) struct Links {
    /// Instance links, by group and address.
    pub(super) instances: BTreeMap<(String, Addr), mpsc::UnboundedSender<Job>>,
    /// Per group: whether its links should poll INFO fast.
    pub(super) urgent: BTreeMap<String, watch::Sender<bool>>,
    /// The `SENTINEL DEBUG` timers every link reads (`SENTINEL DEBUG`
    /// without arguments reads them through the handle).
    pub(super) timers: watch::Sender<Timers>,
    /// Where the links send what they hear.
    pub(super) input_tx: link::InputSender,
    /// The link tasks.
    pub(super) tasks: TaskTracker,
    /// Peer links, by run id.
    pub(super) peers: PeerLinks,
    /// `tls-replication yes`: links to instances and peers speak TLS.
    pub(super) tls: Option<crate::tls::Outbound>,
    /// The TLS of the groups with their own (a CR's `spec.tls`), by
    /// group: one context per group, shared by its links.
    pub(super) group_tls: BTreeMap<String, crate::tls::Outbound>,
    /// The last INFO text of each instance (`SENTINEL INFO-CACHE`).
    pub(super) texts: link::InfoTexts,
    /// Where each host name was reached (`announce-hostnames no`).
    pub(super) resolved: link::Resolved,
}

impl Links {
    /// Starts a link to `addr` of `group`, unless one runs.
    pub(super) fn watch(&mut self, config: &Config, myid: &str, group: String, addr: Addr) {
        let key = (group.clone(), addr.clone());
        if self.instances.contains_key(&key) {
            return;
        }
        let tls = self.tls_of(config, &group);
        let Some(g) = config.group(&group) else {
            return;
        };
        let urgent = self
            .urgent
            .entry(group.clone())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe();
        let spec = LinkSpec {
            group,
            addr,
            down_after: g.down_after,
            auth_user: g.auth_user.clone(),
            auth_pass: g.auth_pass.clone(),
            renamed: link::client::renamed(&g.renamed_commands),
            urgent,
            timers: self.timers.subscribe(),
            myid: myid.to_string(),
            tls,
            texts: self.texts.clone(),
            resolved: self.resolved.clone(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        self.tasks.spawn(link::run(spec, rx, self.input_tx.clone()));
        self.instances.insert(key, tx);
    }

    /// The TLS a new link of `group` speaks: the group's own (a CR's
    /// `spec.tls`), else the daemon's `tls-replication`.
    pub(super) fn tls_of(&mut self, config: &Config, group: &str) -> Option<crate::tls::Outbound> {
        let Some(own) = config.group(group).and_then(|g| g.tls.as_ref()) else {
            return self.tls.clone();
        };
        if let Some(outbound) = self.group_tls.get(group) {
            return Some(outbound.clone());
        }
        let outbound = crate::tls::group::outbound(&config.tls, group, own);
        self.group_tls.insert(group.to_string(), outbound.clone());
        Some(outbound)
    }

    /// Hands a command to the instance's link.
    pub(super) fn send(&self, group: String, to: Addr, token: u64, command: Command) {
        let key = (group, to);
        match self.instances.get(&key) {
            Some(link) => {
                let _ = link.send(Job::Command { token, command });
            }
            None => tracing::warn!(group = %key.0, instance = %key.1, "no link"),
        }
    }

    /// A removed group: its links and flags go.
    pub(super) fn forget(&mut self, group: &str) {
        self.instances.retain(|(g, _), _| g != group);
        self.urgent.remove(group);
        self.texts.forget_group(group);
    }

    /// Polls INFO fast in the groups in trouble (a failover, or a master
    /// down or unknown), at the normal pace elsewhere.
    pub(super) fn set_urgent(&self, core: &Core) {
        for (name, g) in core.groups() {
            let trouble = g.failover.is_some() || g.master_instance().is_none_or(|m| m.sdown);
            if let Some(tx) = self.urgent.get(name) {
                tx.send_if_modified(|u| std::mem::replace(u, trouble) != trouble);
            }
        }
    }

    /// Ends every link (dropping their job senders) and waits for them a
    /// little.
    pub(super) async fn close(&mut self) {
        self.instances.clear();
        self.peers.clear();
        self.tasks.close();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.tasks.wait()).await;
    }
}

/// A running peer link.
#[derive(Debug)]
pub(super) struct PeerLink {
    /// Where it connects.
    pub(super) addr: Addr,
    /// Its jobs.
    pub(super) jobs: mpsc::UnboundedSender<PeerJob>,
}

/// The peer links, by run id.
pub(super) type PeerLinks = BTreeMap<String, PeerLink>;
