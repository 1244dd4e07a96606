//! A restart with a state file the world has moved past: Valkyrie (a real
//! process) monitors a master and two replicas and saves its state; it is
//! stopped; while it is down a replica is promoted by hand and the others
//! pointed at it; it is started again on the same state file.
//!
//! It must adopt the new master (the one the others follow and that holds
//! the data) and advertise it, keep a writable master, and never tell an
//! instance to replicate from itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use support::process::{DaemonProcess, replicas_listed};
use support::*;
use valkyrie_protocol::Frame;

#[test]
fn roles_changed_while_down_keep_a_writable_master() {
    let bin = valkey_server();
    let tmp = TempDir::new("stale-state");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, r1.port, r2.port);
    write_acknowledged(pm, 100, 2);

    let port = free_port();
    let conf = tmp.0.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nindex-port 0\nadmin-port 0\n\
             sentinel monitor mymaster 127.0.0.1 {pm} 2\n\
             sentinel down-after-milliseconds mymaster 1000\n",
            tmp.0.display()
        ),
    )
    .unwrap();
    let log = tmp.0.join("valkyrie.log");
    {
        let _daemon = DaemonProcess::start(&conf, &log);
        wait_until(Duration::from_secs(15), || replicas_listed(port, 2));
        // An administrative change: saved in the state file before the
        // reply, with the master as Valkyrie knows it.
        assert_eq!(
            call(
                port,
                &[
                    "SENTINEL",
                    "SET",
                    "mymaster",
                    "down-after-milliseconds",
                    "1000"
                ]
            ),
            Frame::simple("OK")
        );
    }

    // While Valkyrie is down: R1 becomes the master, M and R2 follow it.
    assert_eq!(call(p1, &["REPLICAOF", "NO", "ONE"]), Frame::simple("OK"));
    for p in [pm, p2] {
        assert_eq!(
            call(p, &["REPLICAOF", "127.0.0.1", &p1.to_string()]),
            Frame::simple("OK")
        );
    }
    wait_until(Duration::from_secs(10), || {
        [pm, p2]
            .iter()
            .all(|&p| info_field(p, "master_link_status").as_deref() == Some("up"))
    });
    write_acknowledged(p1, 100, 2);

    let _daemon = DaemonProcess::start(&conf, &log);
    wait_until(Duration::from_secs(15), || {
        advertised_master(port) == Some(p1)
    });
    // It stays that way, with a writable master and nobody following
    // itself, over several INFO periods.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        assert_eq!(advertised_master(port), Some(p1));
        assert_eq!(upstream(p1), None, "the adopted master was demoted");
        assert_eq!(
            upstream(pm),
            Some(p1),
            "the old master must follow the new one"
        );
        assert_eq!(upstream(p2), Some(p1));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(call(p1, &["SET", "after", "restart"]), Frame::simple("OK"));
    // The data written before and after the change is all there.
    assert_eq!(call(p1, &["DBSIZE"]), Frame::Integer(101));
    drop((master, r1, r2));
}
