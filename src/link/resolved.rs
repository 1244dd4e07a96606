//! The IP address each monitored host name was last reached at, written
//! by the links as they connect, read by the Sentinel port: with
//! `announce-hostnames no` it shows these addresses where the
//! configuration or a replica's announcement gave a name, as Sentinel
//! shows the address it resolved. Bounded by what is monitored: one
//! entry per host name a link dialled.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

/// The addresses, by host name; clones share them.
#[derive(Clone, Debug, Default)]
pub struct Resolved(Arc<RwLock<HashMap<String, IpAddr>>>);

impl Resolved {
    /// A link to `host` reached `ip`. An address given as an IP is not
    /// kept: it shows as itself.
    pub fn put(&self, host: &str, ip: IpAddr) {
        if host.parse::<IpAddr>().is_ok() {
            return;
        }
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if map.get(host) != Some(&ip) {
            map.insert(host.to_string(), ip);
        }
    }

    /// Where `host` was last reached, if a link reached it.
    pub fn ip(&self, host: &str) -> Option<IpAddr> {
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        map.get(host).copied()
    }
}
