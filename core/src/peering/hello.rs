//! Hellos: how peers are discovered and how configurations spread.
//!
//! Sentinel's rules (`sentinelProcessHelloMessage`), by master *name*:
//! a new run id is a new peer (`+sentinel`); a known run id at a new
//! address moves (`+sentinel-address-switch`); a new run id at an address
//! another peer held replaces it everywhere (`+sentinel-invalid-addr`). A
//! higher current epoch is adopted (`+new-epoch`); a strictly higher config
//! epoch is adopted too.
//!
//! Unlike Sentinel, a hello is trusted no further than its sender has
//! proven itself (`docs/security.md`, "Peers"):
//!
//! - a peer is learnt only from a hello on a data node's channel, and
//!   only moves there; a hello on our Sentinel port is heard only from a
//!   known peer at its known address;
//! - a new peer is unverified until it answers a PING on its announced
//!   address ([`Peer::verified`]); only then does it vote, get persisted,
//!   replace another peer at its address, or move our epochs;
//! - a higher configuration is taken only from a verified peer and only
//!   for a node with a history in the group (one we monitor: configured,
//!   listed by a master, followed by a replica, or persisted), and adopted
//!   once that node is seen reporting the master role
//!   ([`Group::try_adopt`]); an unknown address is never dialled;
//! - epochs must be plain decimal, within
//!   [`MAX_EPOCH_JUMP`](super::MAX_EPOCH_JUMP) of ours, and the config
//!   epoch may not exceed the sender's current epoch;
//! - every address is printable ASCII, and an IP address unless
//!   `resolve-hostnames yes`;
//! - a group keeps at most [`MAX_PEERS`] peers;
//! - a hello carrying our own run id through our Sentinel port is logged
//!   as a duplicate identity.

use super::election::PendingConfig;
use super::{Hello, HelloVia, MAX_PEERS, Peer, within_reach};
use crate::events;
use crate::{Channel, Core, Daemon, Group, Millis, Out, Output};

impl Core {
    /// Processes one hello.
    pub(crate) fn hello(&mut self, now: Millis, payload: &str, via: HelloVia, out: &mut Out) {
        let name = payload.split(',').nth(4).unwrap_or_default().to_string();
        if !self.groups.contains_key(&name) {
            // Unknown master: nothing at all happens (not even the epoch).
            return;
        }
        out.within(Some(&name));
        let log = |out: &mut Out, message: String| {
            out.push(Output::Log {
                group: name.clone(),
                message,
            });
        };
        // Host names only with `resolve-hostnames yes`, or for a group
        // monitored by name (a Kubernetes resource's pods are).
        let names = self.daemon.resolve_hostnames
            || self
                .groups
                .get(&name)
                .is_some_and(|g| g.spec.master.host.parse::<std::net::IpAddr>().is_err());
        let hello = match Hello::parse(payload, names) {
            Ok(h) => h,
            Err(e) => {
                let shown: String = payload.chars().take(160).collect();
                log(out, format!("hello ignored ({e}): {shown:?}"));
                return;
            }
        };
        if hello.runid == self.daemon.myid.to_ascii_lowercase() {
            if via == HelloVia::SentinelPort {
                log(
                    out,
                    format!(
                        "a hello from {} carries our own run id: another sentinel uses it \
                         (a copied configuration?); give it an id of its own",
                        hello.addr
                    ),
                );
            }
            return;
        }
        let current = self.daemon.current_epoch;
        if let Err(e) = within_reach(hello.current_epoch, current)
            .and_then(|_| within_reach(hello.config_epoch, current))
        {
            log(out, format!("hello from {} ignored: {e}", hello.runid));
            return;
        }
        let mut peers_changed = false;
        let mut forget = None;
        let mut moved = None;
        // Announced once durable.
        let mut announce: Vec<(Channel, String)> = Vec::new();
        {
            let Some(g) = self.groups.get_mut(&name) else {
                return;
            };
            match (g.peers.get_mut(&hello.runid), via) {
                (Some(p), _) if p.addr == hello.addr => {}
                // Our port is anyone's: a known run id at another address
                // there is a forgery or a peer that moved, which its hellos
                // on the data nodes will tell.
                (Some(_) | None, HelloVia::SentinelPort) => return,
                (Some(p), HelloVia::Channel) => {
                    p.addr = hello.addr.clone();
                    p.link_up = false;
                    peers_changed = true;
                    moved = Some(hello.addr.clone());
                    announce.push((
                        Channel::SentinelAddressSwitch,
                        format!(
                            "{} ip {} port {} for {}",
                            events::master(&name, &g.master),
                            hello.addr.host,
                            hello.addr.port,
                            hello.runid
                        ),
                    ));
                }
                (None, HelloVia::Channel) => {
                    // An unverified peer at the same address is replaced at
                    // once; a verified one only once the newcomer answers
                    // there itself (`Core::peer_ping`).
                    if let Some(other) = g
                        .peers
                        .values()
                        .find(|p| p.addr == hello.addr && !p.verified)
                    {
                        announce.push((
                            Channel::SentinelInvalidAddr,
                            events::sentinel(&other.runid, &other.addr, &name, &g.master),
                        ));
                        forget = Some(other.runid.clone());
                    }
                    if forget.is_none() && !g.make_room(out) {
                        return;
                    }
                    let peer = Peer::new(hello.runid.clone(), hello.addr.clone(), now);
                    announce.push((
                        Channel::Sentinel,
                        events::sentinel(&peer.runid, &peer.addr, &name, &g.master),
                    ));
                    g.peers.insert(peer.runid.clone(), peer);
                    peers_changed = true;
                }
            }
        }
        // The same peer under other masters follows, and a replaced one is
        // forgotten everywhere; those groups are saved too.
        for (other, g) in self.groups.iter_mut() {
            let mut changed = false;
            if let Some(old) = &forget {
                changed |= g.peers.remove(old).is_some();
            }
            if let (Some(addr), Some(p)) = (&moved, g.peers.get_mut(&hello.runid)) {
                changed |= p.addr != *addr;
                p.addr = addr.clone();
            }
            if changed && *other != name {
                out.within(Some(other));
                g.persist(out);
            }
        }
        out.within(Some(&name));
        let Some(g) = self.groups.get_mut(&name) else {
            return;
        };
        let verified = match g.peers.get_mut(&hello.runid) {
            Some(p) => {
                p.last_hello = now;
                p.verified
            }
            None => false,
        };
        // A peer that moved is saved at its new address.
        let mut persist = peers_changed && verified;
        // Epochs and configurations only from a peer that has proven
        // itself.
        // Not while we run an election of our own: a hello's epoch would
        // make us give it up, and anyone on a data node's channel can
        // write one in a peer's name. A peer running a newer election
        // asks for our vote, which moves the epoch (`vote`).
        let new_epoch =
            verified && g.election.is_none() && hello.current_epoch > self.daemon.current_epoch;
        if new_epoch {
            self.daemon.current_epoch = hello.current_epoch;
            persist = true;
        }
        if verified && hello.config_epoch > g.config_epoch {
            persist |= g.hear_config(now, &hello, &mut self.daemon, out);
        }
        if persist {
            // Durable before it is announced.
            g.persist(out);
        }
        for (channel, payload) in announce {
            out.event(channel, payload);
        }
        if new_epoch {
            out.event(Channel::NewEpoch, hello.current_epoch.to_string());
        }
        if peers_changed {
            out.push(Output::Peers);
            out.push(Output::Topology { group: name });
        }
    }
}

impl Group {
    /// A verified peer's hello carries a higher config epoch than ours:
    /// the same master takes the epoch at once; another master is held
    /// as pending until it is seen reporting the role
    /// ([`Group::try_adopt`]), but only when it has a history in the
    /// group. Returns whether the group must be persisted.
    fn hear_config(
        &mut self,
        now: Millis,
        hello: &Hello,
        daemon: &mut Daemon,
        out: &mut Out,
    ) -> bool {
        if hello.master == self.master {
            self.raise_config_epoch(daemon, hello.config_epoch);
            return true;
        }
        if !self.instances.contains_key(&hello.master) {
            out.push(Output::Log {
                group: self.spec.name.clone(),
                message: format!(
                    "configuration of epoch {} from {} ignored: {} has no history in this group",
                    hello.config_epoch, hello.runid, hello.master
                ),
            });
            return false;
        }
        let refuted = self
            .pending_config
            .as_ref()
            .is_some_and(|c| self.refuted(c));
        match &mut self.pending_config {
            Some(c) if c.config_epoch == hello.config_epoch && c.master == hello.master => {
                c.heard_at = now;
            }
            // A refuted configuration (its node says it is a replica) keeps
            // no lower one out: a forger repeating ever higher epochs in a
            // peer's name must not block that peer's real configuration.
            Some(c) if c.config_epoch >= hello.config_epoch && !refuted => {}
            pending => {
                // A newer configuration replaces the one held, but the
                // hold still counts from the first: ever higher epochs
                // cannot renew it.
                let first_heard = pending.as_ref().map_or(now, |c| c.first_heard);
                *pending = Some(PendingConfig {
                    master: hello.master.clone(),
                    config_epoch: hello.config_epoch,
                    from: hello.runid.clone(),
                    from_addr: hello.addr.clone(),
                    first_heard,
                    heard_at: now,
                    asked: false,
                });
            }
        }
        false
    }

    /// Room for one more peer: at [`MAX_PEERS`], the unverified peer heard
    /// from least recently goes; with none, the newcomer is refused.
    /// Either is counted.
    fn make_room(&mut self, out: &mut Out) -> bool {
        if self.peers.len() < MAX_PEERS {
            return true;
        }
        let oldest = self
            .peers
            .values()
            .filter(|p| !p.verified)
            .min_by_key(|p| p.last_hello)
            .map(|p| p.runid.clone());
        let group = self.spec.name.clone();
        match oldest {
            Some(runid) => {
                self.peers.remove(&runid);
                out.push(Output::PeerRefused {
                    group,
                    reason: "evicted",
                });
                true
            }
            None => {
                out.push(Output::PeerRefused {
                    group,
                    reason: "full",
                });
                false
            }
        }
    }
}
