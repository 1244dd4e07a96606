//! Connections counted per client address, so that one host cannot hold
//! a port's whole [`super::ConnectionLimit`].
//!
//! Why the index port needs it: a subscriber that never reads is
//! indistinguishable from one that does until its receive window closes
//! (a few hundred pushes on Linux), and until then each costs a socket
//! write per change, like a reader. The total limit bounds that work; the
//! per-address limit keeps one host from spending it on stalled sockets.
//!
//! IPv6 clients are counted per /64, the smallest prefix a site is given:
//! one host can use any address inside its /64. IPv4-mapped addresses
//! count as their IPv4 address. The map holds only addresses with a live
//! connection, so it never outgrows the total limit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Live connections per client address (or IPv6 /64), capped at `max`.
#[derive(Debug)]
pub struct AddressLimit {
    max: usize,
    live: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against its address until dropped.
#[derive(Debug)]
pub struct AddressPermit {
    limit: Arc<AddressLimit>,
    key: IpAddr,
}

impl AddressLimit {
    /// At most `max` connections per address; 0 counts none (no limit).
    pub fn new(max: usize) -> Arc<AddressLimit> {
        Arc::new(AddressLimit {
            max,
            live: Mutex::new(HashMap::new()),
        })
    }

    /// A permit for a connection from `ip`, or `None` when that address
    /// already holds `max`.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<AddressPermit> {
        let key = key(ip);
        if self.max > 0 {
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            let n = live.entry(key).or_insert(0);
            if *n >= self.max {
                return None;
            }
            *n += 1;
        }
        Some(AddressPermit {
            limit: self.clone(),
            key,
        })
    }

    /// Connections from `ip` (its /64 for IPv6) now.
    pub fn live(&self, ip: IpAddr) -> usize {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get(&key(ip)).copied().unwrap_or(0)
    }

    /// Addresses with a live connection.
    pub fn addresses(&self) -> usize {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for AddressPermit {
    fn drop(&mut self) {
        if self.limit.max == 0 {
            return;
        }
        let mut live = self.limit.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = live.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.key);
            }
        }
    }
}

/// What a client address is counted as.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::V6(octets.into())
            }
        },
    }
}
