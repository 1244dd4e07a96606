//! `announce-hostnames`, side by side with a real `valkey-sentinel`
//! 8.0.1: a master and a replica monitored as `localhost` (with
//! `resolve-hostnames yes`) are shown as `127.0.0.1` while
//! `announce-hostnames` is `no` (the default), and as `localhost` once it
//! is `yes`, on both, by `GET-MASTER-ADDR-BY-NAME`, `MASTER` and
//! `REPLICAS`.
//!
//! Needs `valkey-server` and `valkey-sentinel`; without them the test
//! fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::sentinel::{beside_a_real_sentinel, sides};
use support::{Server, TempDir, call, field, free_port, try_call, valkey_server, wait_until};
use valkyrie_protocol::Frame;

/// The hosts `port` shows for group `g`: the master's address, `MASTER`'s
/// `ip`, and each replica's `ip`.
fn shown(port: u16) -> Vec<String> {
    let mut hosts = Vec::new();
    if let Ok(Frame::Array(a)) = try_call(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "g"]) {
        let host = a.first().and_then(Frame::as_bytes);
        hosts.push(
            host.map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default(),
        );
    }
    if let Ok(m) = try_call(port, &["SENTINEL", "MASTER", "g"]) {
        hosts.extend(field(&m, "ip"));
    }
    if let Ok(Frame::Array(rs)) = try_call(port, &["SENTINEL", "REPLICAS", "g"]) {
        hosts.extend(rs.iter().filter_map(|r| field(r, "ip")));
    }
    hosts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_names_are_shown_resolved_unless_announced_as_on_sentinel() {
    let dir = TempDir::new("hostnames");
    let (mp, rp) = (free_port(), free_port());
    let _master = Server::start(&valkey_server(), &dir.0, mp, None);
    let _replica = Server::start(&valkey_server(), &dir.0, rp, Some(mp));
    // The replica announces itself by name, as a pod announces its DNS
    // name: set, then a new handshake, which is when a replica
    // announces itself.
    call(rp, &["CONFIG", "SET", "replica-announce-ip", "localhost"]);
    call(rp, &["REPLICAOF", "NO", "ONE"]);
    call(rp, &["REPLICAOF", "127.0.0.1", &mp.to_string()]);
    wait_until(Duration::from_secs(10), || {
        matches!(try_call(mp, &["INFO", "replication"]), Ok(Frame::Bulk(b))
            if String::from_utf8_lossy(&b).contains(&format!("ip=localhost,port={rp},state=online")))
    });
    let (real, daemon) = beside_a_real_sentinel(&dir.0).await;
    let sides = sides(&real, &daemon);
    let m = mp.to_string();
    for (who, port) in sides {
        let set = |k: &str, v: &str| call(port, &["SENTINEL", "CONFIG", "SET", k, v]);
        assert_eq!(
            set("resolve-hostnames", "yes"),
            Frame::simple("OK"),
            "{who}"
        );
        let ok = call(port, &["SENTINEL", "MONITOR", "g", "localhost", &m, "1"]);
        assert_eq!(ok, Frame::simple("OK"), "{who}");
    }
    let ips = vec!["127.0.0.1".to_string(); 3];
    settle(&sides, &ips, Duration::from_secs(30));
    for (who, port) in sides {
        let set = call(
            port,
            &["SENTINEL", "CONFIG", "SET", "announce-hostnames", "yes"],
        );
        assert_eq!(set, Frame::simple("OK"), "{who}");
    }
    let names = vec!["localhost".to_string(); 3];
    settle(&sides, &names, Duration::from_secs(10));
}

/// Waits until both sides show `want`, within `limit`; fails with what
/// each showed last.
fn settle(sides: &[(&str, u16)], want: &[String], limit: Duration) {
    let start = std::time::Instant::now();
    loop {
        let seen: Vec<(&str, Vec<String>)> = sides.iter().map(|(w, p)| (*w, shown(*p))).collect();
        if seen.iter().all(|(_, s)| s == want) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "want {want:?} on both within {limit:?}, last seen {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
