//! `replica-announced no` side by side with a real `valkey-sentinel`
//! 8.0.1: a replica that says so in its INFO is monitored (`num-slaves`
//! counts it) but `SENTINEL REPLICAS` leaves it out, on both; the listed
//! replica shows `replica-announced 1`.
//!
//! Needs `valkey-server` and `valkey-sentinel`; without them the test
//! fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::sentinel::{beside_a_real_sentinel, sides};
use support::{TempDir, call, field, start_trio, try_call, valkey_server, wait_until};
use valkyrie_protocol::Frame;

/// The `name` fields `SENTINEL REPLICAS g` lists on `port`, sorted.
fn listed(port: u16) -> Vec<String> {
    let Ok(Frame::Array(entries)) = try_call(port, &["SENTINEL", "REPLICAS", "g"]) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries.iter().filter_map(|e| field(e, "name")).collect();
    names.sort();
    names
}

/// `num-slaves` of `SENTINEL MASTER g` on `port`.
fn counted(port: u16) -> Option<String> {
    try_call(port, &["SENTINEL", "MASTER", "g"])
        .ok()
        .and_then(|m| field(&m, "num-slaves"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unannounced_replica_is_monitored_but_not_listed_as_by_sentinel() {
    let dir = TempDir::new("announced");
    let (master, r1, r2) = start_trio(&valkey_server(), &dir.0);
    call(r2.port, &["CONFIG", "SET", "replica-announced", "no"]);
    let (real, daemon) = beside_a_real_sentinel(&dir.0).await;
    let sides = sides(&real, &daemon);
    let m = master.port.to_string();
    for (_, port) in sides {
        let ok = call(port, &["SENTINEL", "MONITOR", "g", "127.0.0.1", &m, "1"]);
        assert_eq!(ok, Frame::Simple("OK".into()), "{port}");
    }
    let expected = vec![format!("127.0.0.1:{}", r1.port)];
    let settled = |port: u16| counted(port).as_deref() == Some("2") && listed(port) == expected;
    // Both discover both replicas (Sentinel at its next INFO of the
    // master, within 10 s) and list only the announced one.
    wait_until(Duration::from_secs(30), || {
        sides.iter().all(|(_, port)| settled(*port))
    });
    for (who, port) in sides {
        assert_eq!(listed(port), expected, "{who}");
        assert_eq!(counted(port).as_deref(), Some("2"), "{who}");
        let Frame::Array(entries) = call(port, &["SENTINEL", "REPLICAS", "g"]) else {
            panic!("{who}: not a list");
        };
        assert_eq!(
            field(&entries[0], "replica-announced").as_deref(),
            Some("1"),
            "{who}"
        );
    }
    // Announced again: listed again.
    call(r2.port, &["CONFIG", "SET", "replica-announced", "yes"]);
    let both = {
        let mut v = vec![
            format!("127.0.0.1:{}", r1.port),
            format!("127.0.0.1:{}", r2.port),
        ];
        v.sort();
        v
    };
    wait_until(Duration::from_secs(30), || {
        sides.iter().all(|(_, port)| listed(*port) == both)
    });
    daemon.stop().await.unwrap();
}
