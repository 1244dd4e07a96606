//! `SENTINEL SIMULATE-FAILURE`, with the daemon's binary and real
//! valkey-servers: the leader crashes (exit status 99) after its
//! election, or after the promotion is confirmed and saved; restarted
//! from its state file, it completes the failover, or runs it again, and
//! no acknowledged write is lost. The flags are not saved, as on
//! Sentinel, so the restarted daemon does not crash again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::process::{DaemonProcess, replicas_listed};
use support::*;
use valkyrie_protocol::Frame;

/// The acknowledged keys `k0`..`k99` are all on `port`.
fn holds_every_write(port: u16) -> bool {
    (0..100).all(|i| call(port, &["GET", &format!("k{i}")]) == Frame::bulk(format!("v{i}")))
}

/// A trio under a daemon started from `conf`, 100 writes acknowledged by
/// both replicas, and the flag set: returns the daemon, its port and the
/// servers.
fn armed(tag: &str, flag: &str) -> (TempDir, DaemonProcess, u16, [Server; 3]) {
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&valkey_server(), &tmp.0);
    write_acknowledged(master.port, 100, 2);
    let port = free_port();
    let conf = tmp.0.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nindex-port 0\nadmin-port 0\n\
             sentinel monitor mymaster 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n",
            tmp.0.display(),
            master.port
        ),
    )
    .unwrap();
    let daemon = DaemonProcess::start(&conf, &tmp.0.join("valkyrie.log"));
    wait_until(Duration::from_secs(15), || replicas_listed(port, 2));
    assert_eq!(
        call(port, &["SENTINEL", "SIMULATE-FAILURE", flag]),
        Frame::simple("OK")
    );
    let bits = if flag == "crash-after-election" { 1 } else { 2 };
    assert!(matches!(call(port, &["INFO", "sentinel"]), Frame::Bulk(b)
            if String::from_utf8_lossy(&b).contains(&format!("sentinel_simulate_failure_flags:{bits}\r\n"))));
    (tmp, daemon, port, [master, r1, r2])
}

#[test]
fn a_leader_crashing_after_its_election_fails_over_after_its_restart() {
    let (tmp, mut daemon, port, [mut master, r1, r2]) =
        armed("crash-election", "crash-after-election");
    master.kill();
    assert_eq!(daemon.exited(Duration::from_secs(20)), Some(99));
    // Nothing was promoted: both replicas still follow the dead master.
    assert_eq!(upstream(r1.port), Some(master.port));
    assert_eq!(upstream(r2.port), Some(master.port));
    let _daemon = DaemonProcess::start(&tmp.0.join("sentinel.conf"), &tmp.0.join("valkyrie.log"));
    wait_until(Duration::from_secs(30), || {
        advertised_master(port).is_some_and(|p| p != master.port)
            && [r1.port, r2.port].iter().all(|&p| {
                let new = advertised_master(port).unwrap_or(0);
                p == new || upstream(p) == Some(new)
            })
    });
    let new = advertised_master(port).unwrap();
    assert!(holds_every_write(new), "acknowledged writes lost");
}

#[test]
fn a_leader_crashing_after_the_promotion_completes_it_after_its_restart() {
    let (tmp, mut daemon, port, [master, r1, r2]) =
        armed("crash-promotion", "crash-after-promotion");
    // A planned switchover, as Valkey's suite asks for.
    assert_eq!(
        call(port, &["SENTINEL", "FAILOVER", "mymaster"]),
        Frame::simple("OK")
    );
    assert_eq!(daemon.exited(Duration::from_secs(20)), Some(99));
    // The promotion happened and was saved.
    let promoted = [r1.port, r2.port]
        .into_iter()
        .find(|&p| upstream(p).is_none())
        .expect("a replica promoted before the crash");
    let _daemon = DaemonProcess::start(&tmp.0.join("sentinel.conf"), &tmp.0.join("valkyrie.log"));
    wait_until(Duration::from_secs(10), || {
        advertised_master(port) == Some(promoted)
    });
    // The rest follow the new master once the restarted daemon
    // reconfigures them.
    wait_until(Duration::from_secs(30), || {
        [master.port, r1.port, r2.port]
            .iter()
            .filter(|&&p| p != promoted)
            .all(|&p| upstream(p) == Some(promoted))
    });
    assert!(holds_every_write(promoted), "acknowledged writes lost");
}
