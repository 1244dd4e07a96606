//! The shell's half of peering: one peer link per peer run id (opened,
//! moved and closed to match [`Core::peer_links`](crate::core::Core::peer_links)),
//! the hello schedule (every [`HELLO_PERIOD`] ms, per group, to every
//! instance and every peer of that group, and at once on
//! [`Output::HelloNow`]), and the `is-master-down-by-addr` questions the
//! core asks.

use std::time::Duration;

use tokio::sync::mpsc;

use super::links::PeerLink;
use super::shell::Shell;
use crate::core::{Addr, Output};
use crate::link::{HelloJob, Job};
use crate::peer::{self, PeerJob, PeerSpec};

impl Shell {
    /// Carries out a peering output.
    pub(super) fn peering(&mut self, output: Output) {
        match output {
            Output::AskPeer {
                group,
                runid,
                master,
                epoch,
                candidate,
            } => {
                if let Some(link) = self.links.peers.get(&runid) {
                    let _ = link.jobs.send(PeerJob::Ask {
                        group,
                        master,
                        epoch,
                        candidate,
                    });
                }
            }
            Output::Peers => self.reconcile_peers(),
            Output::HelloNow { group } => self.publish_hellos(Some(&group)),
            _ => {}
        }
    }

    /// Opens, moves and closes peer links to match the core's peer table.
    pub(super) fn reconcile_peers(&mut self) {
        let wanted = self.core.peer_links();
        self.links.peers.retain(|runid, link| {
            let keep = wanted.get(runid).is_some_and(|a| *a == link.addr);
            if !keep {
                tracing::info!(peer = %runid, addr = %link.addr, "peer link closed");
            }
            keep
        });
        for (runid, addr) in wanted {
            if self.links.peers.contains_key(&runid) {
                continue;
            }
            let spec = self.peer_spec(&runid, &addr);
            let (tx, rx) = mpsc::unbounded_channel();
            tracing::info!(peer = %runid, %addr, "peer link opened");
            self.links
                .tasks
                .spawn(peer::run(spec, rx, self.links.input_tx.clone()));
            self.links.peers.insert(runid, PeerLink { addr, jobs: tx });
        }
    }

    /// Closes every peer link (they reopen with new credentials at once:
    /// `SENTINEL CONFIG SET sentinel-user|sentinel-pass`).
    pub(super) fn redial_peers(&mut self) {
        self.links.peers.clear();
        self.reconcile_peers();
    }

    fn peer_spec(&self, runid: &str, addr: &Addr) -> PeerSpec {
        // Sentinel's rule: sentinel-user/sentinel-pass, else our own
        // requirepass for the default user, else nothing.
        let (auth_user, auth_pass) = match &self.config.sentinel_pass {
            Some(pass) => (self.config.sentinel_user.clone(), Some(pass.clone())),
            None => (None, self.config.requirepass.clone()),
        };
        let down_after = self
            .core
            .groups()
            .values()
            .filter(|g| g.peers.contains_key(runid))
            .map(|g| g.spec.down_after)
            .min()
            .unwrap_or(1_000);
        // A quarter of down-after (at most `ping-period`, a second by
        // default): a peer is SDOWN only after several PINGs in a row went
        // unanswered, never because the next PING was simply not due yet.
        let ping_period = self.core.timers().ping_period;
        let ping = Duration::from_millis((down_after / 4).min(ping_period).max(10));
        PeerSpec {
            runid: runid.to_string(),
            addr: addr.clone(),
            myid: self.core.myid().to_string(),
            auth_user,
            auth_pass,
            ping_period: ping,
            reply_timeout: Duration::from_millis((down_after / 2).clamp(100, 5_000)),
            tls: self.links.tls.clone(),
        }
    }

    /// Publishes hellos of `only` (or of every group): to every instance
    /// of the group and to every peer of it.
    pub(super) fn publish_hellos(&mut self, only: Option<&str>) {
        // As Sentinel: with TLS links, peers reach us on the TLS port.
        let port = if self.config.announce_port != 0 {
            self.config.announce_port
        } else if let (true, Some(tls_port)) = (self.links.tls.is_some(), self.config.tls.port) {
            tls_port
        } else {
            self.config.port
        };
        // `CONFIG SET announce-ip ""` means unset here (Sentinel would
        // announce an empty address and vanish from its peers).
        let announce_ip = self.config.announce_ip.clone().filter(|ip| !ip.is_empty());
        for (name, g) in self.core.groups() {
            if only.is_some_and(|o| o != name) {
                continue;
            }
            let Some(tail) = self.core.hello_tail(name) else {
                continue;
            };
            let hello = HelloJob {
                rest: format!("{port},{tail}"),
                announce_ip: announce_ip.clone(),
            };
            // A master whose writes a switchover paused would hold the
            // PUBLISH (and every command queued behind it on its link, its
            // demotion included) until the pause ends.
            let paused = g.paused_master();
            for addr in g.instances.keys().filter(|a| Some(*a) != paused) {
                if let Some(link) = self.links.instances.get(&(name.clone(), addr.clone())) {
                    let _ = link.send(Job::Hello(hello.clone()));
                }
            }
            for runid in g.peers.keys() {
                if let Some(link) = self.links.peers.get(runid) {
                    let _ = link.jobs.send(PeerJob::Hello(hello.clone()));
                }
            }
        }
    }
}
