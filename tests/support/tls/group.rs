//! The monitored group `mymaster` of the failover tests: its monitoring
//! lines, and the waits on what the daemon and the data nodes report
//! about it over TLS (both replicas known, a failover done).

use std::time::Duration;

use valkyrie_protocol::Frame;

use super::conn::{tls_call, tls_info_field, tls_master_addr};
use super::pki::{Pki, Who};
use crate::support::wait_until;

/// `SENTINEL MASTER mymaster`'s field `name`, over TLS.
pub fn master_field_tls(port: u16, pki: &Pki, name: &str) -> Option<String> {
    match tls_call(
        port,
        pki.client_config(Who::Client),
        &["SENTINEL", "MASTER", "mymaster"],
    )
    .ok()?
    {
        Frame::Array(kv) => kv
            .chunks(2)
            .find(|p| p[0].as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
            .and_then(|p| p[1].as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// The monitoring lines of `mymaster` at `master` (down after 1 s,
/// failover bounded by 10 s).
pub fn monitor(master: u16, quorum: u32) -> String {
    format!(
        "sentinel monitor mymaster 127.0.0.1 {master} {quorum}\n\
         sentinel down-after-milliseconds mymaster 1000\n\
         sentinel failover-timeout mymaster 10000\n"
    )
}

/// Waits until the daemon on `sp` knows both replicas of `mymaster`.
pub fn wait_replicas_known(sp: u16, pki: &Pki) {
    wait_until(Duration::from_secs(20), || {
        master_field_tls(sp, pki, "num-slaves").as_deref() == Some("2")
            && master_field_tls(sp, pki, "flags").as_deref() == Some("master")
    });
}

/// After the master was killed: waits until the daemon on `sp` advertises
/// one of `replicas`, that one is a master, and the other replica
/// replicates from it with its link up (all over TLS); the new master.
pub fn wait_failover(sp: u16, pki: &Pki, replicas: [u16; 2], limit: Duration) -> u16 {
    let cfg = pki.client_config(Who::Client);
    let mut new = 0;
    wait_until(limit, || {
        match tls_master_addr(sp, cfg.clone(), "mymaster") {
            Some((ip, p)) if replicas.contains(&p) => {
                assert_eq!(ip, "127.0.0.1");
                new = p;
                true
            }
            _ => false,
        }
    });
    let other = if new == replicas[0] {
        replicas[1]
    } else {
        replicas[0]
    };
    wait_until(Duration::from_secs(30), || {
        tls_info_field(new, cfg.clone(), "replication", "role").as_deref() == Some("master")
            && tls_info_field(other, cfg.clone(), "replication", "master_port")
                == Some(new.to_string())
            && tls_info_field(other, cfg.clone(), "replication", "master_link_status").as_deref()
                == Some("up")
    });
    new
}
