//! Hellos: how peers are discovered and how configurations spread.
//!
//! Sentinel's rules (`sentinelProcessHelloMessage`), by master *name*:
//! a new run id is a new peer (`+sentinel`); a known run id at a new
//! address moves (`+sentinel-address-switch`); a new run id at an address
//! another peer held replaces it everywhere (`+sentinel-invalid-addr`). A
//! higher current epoch is adopted (`+new-epoch`); a strictly higher config
//! epoch is adopted too — but, unlike Sentinel, the master it names is
//! adopted only once that address is seen reporting the master role
//! ([`Group::try_adopt`]): a crafted or stale hello cannot point us at a
//! replica or at nothing.
//!
//! Also unlike Sentinel: epochs must be plain decimal and within
//! [`MAX_EPOCH_JUMP`](super::MAX_EPOCH_JUMP) of ours, a hello with an
//! unusable address is logged and ignored without dropping the known peer,
//! and a hello carrying our own run id through our Sentinel port is logged
//! as a duplicate identity.

use super::election::PendingConfig;
use super::{Hello, HelloVia, Peer, within_reach};
use crate::core::events;
use crate::core::{Channel, Core, Millis, Out, Output};

impl Core {
    /// Processes one hello.
    pub(in crate::core) fn hello(
        &mut self,
        now: Millis,
        payload: &str,
        via: HelloVia,
        out: &mut Out,
    ) {
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
        let hello = match Hello::parse(payload) {
            Ok(h) => h,
            Err(e) => {
                log(out, format!("hello ignored ({e}): {payload:?}"));
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
            match g.peers.get_mut(&hello.runid) {
                Some(p) if p.addr == hello.addr => {}
                Some(p) => {
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
                None => {
                    if let Some(other) = g.peers.values().find(|p| p.addr == hello.addr) {
                        announce.push((
                            Channel::SentinelInvalidAddr,
                            events::sentinel(&other.runid, &other.addr, &name, &g.master),
                        ));
                        forget = Some(other.runid.clone());
                    }
                    let peer = Peer::new(hello.runid.clone(), hello.addr.clone(), now);
                    announce.push((
                        Channel::Sentinel,
                        events::sentinel(&peer.runid, &peer.addr, &name, &g.master),
                    ));
                    g.peers.insert(peer.runid.clone(), peer);
                    g.peered = true;
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
        let mut persist = peers_changed;
        let new_epoch = hello.current_epoch > self.daemon.current_epoch;
        if new_epoch {
            self.daemon.current_epoch = hello.current_epoch;
            persist = true;
        }
        let Some(g) = self.groups.get_mut(&name) else {
            return;
        };
        if let Some(p) = g.peers.get_mut(&hello.runid) {
            p.last_hello = now;
        }
        if hello.config_epoch > g.config_epoch {
            if hello.master == g.master {
                g.config_epoch = hello.config_epoch;
                persist = true;
            } else {
                match g.pending_config.as_mut() {
                    Some(c) if c.config_epoch == hello.config_epoch && c.master == hello.master => {
                        c.heard_at = now;
                    }
                    Some(c) if c.config_epoch >= hello.config_epoch => {}
                    _ => {
                        g.pending_config = Some(PendingConfig {
                            master: hello.master.clone(),
                            config_epoch: hello.config_epoch,
                            from: hello.runid.clone(),
                            from_addr: hello.addr.clone(),
                            first_heard: now,
                            heard_at: now,
                        });
                    }
                }
            }
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
