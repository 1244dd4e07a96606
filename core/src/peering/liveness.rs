//! Peer liveness: PING replies from the shell's peer links, peer SDOWN
//! (`+sdown sentinel …` after `down-after` without a valid reply), and the
//! ageing of peers' answers (five `ask-period`s,
//! [`Timers::answer_ttl`](crate::Timers::answer_ttl)).
//!
//! A peer in SDOWN still counts as a voter (the majority is of every
//! sentinel ever known, as in Sentinel); only `SENTINEL CKQUORUM` leaves it
//! out of the usable ones. Peer SDOWN never leads to any action.

use super::Peer;
use crate::events;
use crate::{Channel, Core, Group, Millis, Out, Output, Step};

impl Core {
    /// A peer answered a PING (every group sharing it hears of it). A
    /// valid answer on its announced address verifies a peer learnt from
    /// a data node's hello: it votes from now on, is saved, puts the group
    /// in peer mode, and replaces a peer that held its address before
    /// (`+sentinel-invalid-addr`).
    pub(crate) fn peer_ping(&mut self, now: Millis, runid: &str, valid: bool, out: &mut Out) {
        for (name, g) in self.groups.iter_mut() {
            let Some(p) = g.peers.get_mut(runid) else {
                continue;
            };
            p.link_up = true;
            p.last_ping_reply = now;
            if !valid {
                continue;
            }
            p.last_ok_ping = now;
            if p.verified {
                continue;
            }
            p.verified = true;
            let addr = p.addr.clone();
            out.within(Some(name));
            let replaced: Vec<Peer> = g
                .peers
                .values()
                .filter(|o| o.addr == addr && o.runid != runid)
                .cloned()
                .collect();
            g.peered = true;
            for old in &replaced {
                g.peers.remove(&old.runid);
            }
            // Durable before it is announced.
            g.persist(out);
            for old in replaced {
                out.event(
                    Channel::SentinelInvalidAddr,
                    events::sentinel(&old.runid, &old.addr, name, &g.master),
                );
            }
            out.push(Output::Topology {
                group: name.clone(),
            });
        }
    }

    /// A peer's link went down.
    pub(crate) fn peer_link_down(&mut self, runid: &str) {
        for g in self.groups.values_mut() {
            if let Some(p) = g.peers.get_mut(runid) {
                p.link_up = false;
            }
        }
    }
}

impl Group {
    /// Peer SDOWN transitions and the ageing of their answers.
    pub(crate) fn detect_peers(&mut self, cx: &mut Step<'_>) {
        let down_after = self.spec.down_after;
        let answer_ttl = cx.daemon.timers.answer_ttl();
        let mut changes = Vec::new();
        for p in self.peers.values_mut() {
            if p.answered_at > 0 && cx.now.saturating_sub(p.answered_at) > answer_ttl {
                p.master_down = false;
                p.leader = None;
            }
            let down = cx.now.saturating_sub(p.last_ok_ping) > down_after;
            if down != p.sdown {
                p.sdown = down;
                if down {
                    p.sdown_since = cx.now;
                }
                changes.push((p.runid.clone(), p.addr.clone(), down));
            }
        }
        for (runid, addr, down) in changes {
            let payload = events::sentinel(&runid, &addr, &self.spec.name, &self.master);
            let channel = if down {
                Channel::Sdown
            } else {
                Channel::SdownCleared
            };
            cx.out.event(channel, payload);
        }
    }

    /// The master changed: what peers said about the old one ("down", and
    /// the vote that came with it) says nothing about the new one.
    pub(crate) fn forget_answers(&mut self) {
        for p in self.peers.values_mut() {
            p.master_down = false;
            p.answered_at = 0;
            p.leader = None;
        }
    }

    /// `SENTINEL CKQUORUM`: (usable sentinels, voters), ourselves included.
    pub fn quorum_counts(&self) -> (usize, usize) {
        let usable = 1 + self.voters().filter(|p| !p.sdown).count();
        (usable, self.voters().count() + 1)
    }
}
