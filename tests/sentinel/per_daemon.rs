//! Two daemons in one process keep their own Sentinel-port clients: ids
//! from 1 each, `INFO clients` and `INFO stats` counting only their own
//! connections.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use support::wire::*;
use support::*;
use valkyrie::daemon::Daemon;

fn field(info: &str, name: &str) -> String {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_in_one_process_count_their_own_clients() {
    let tmp_a = TempDir::new("per-daemon-a");
    let tmp_b = TempDir::new("per-daemon-b");
    let a = Daemon::start(daemon_config(&tmp_a.0, vec![]))
        .await
        .unwrap();
    let b = Daemon::start(daemon_config(&tmp_b.0, vec![]))
        .await
        .unwrap();
    let (pa, pb) = (a.sentinel_addrs[0].port(), b.sentinel_addrs[0].port());
    tokio::task::spawn_blocking(move || {
        // One at a time: ids are given as connections start.
        let mut a1 = Raw::connect(pa);
        assert_eq!(a1.ask(&cmd(&["CLIENT", "ID"])), ":1\r\n");
        let mut a2 = Raw::connect(pa);
        assert_eq!(a2.ask(&cmd(&["CLIENT", "ID"])), ":2\r\n");
        let mut a3 = Raw::connect(pa);
        assert_eq!(a3.ask(&cmd(&["CLIENT", "ID"])), ":3\r\n");
        // The other daemon's first client is its own client 1.
        let mut b1 = Raw::connect(pb);
        assert_eq!(b1.ask(&cmd(&["CLIENT", "ID"])), ":1\r\n");

        let info_a = a1.ask(&cmd(&["INFO", "clients"]));
        let info_b = b1.ask(&cmd(&["INFO", "clients"]));
        assert_eq!(field(&info_a, "connected_clients"), "3", "{info_a}");
        assert_eq!(field(&info_b, "connected_clients"), "1", "{info_b}");

        let stats_a = a1.ask(&cmd(&["INFO", "stats"]));
        let stats_b = b1.ask(&cmd(&["INFO", "stats"]));
        assert_eq!(field(&stats_a, "total_connections_received"), "3");
        assert_eq!(field(&stats_b, "total_connections_received"), "1");
        // Commands finished before this INFO: CLIENT ID and INFO clients on
        // b; CLIENT ID ×3 and INFO clients on a.
        assert_eq!(field(&stats_b, "total_commands_processed"), "2");
        assert_eq!(field(&stats_a, "total_commands_processed"), "4");

        let list_b = b1.ask(&cmd(&["CLIENT", "LIST"]));
        assert_eq!(list_b.matches("id=").count(), 1, "{list_b}");
    })
    .await
    .unwrap();
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}
