//! Two more of the readiness verdict's reasons against real
//! valkey-servers, read on the Sentinel port (`VALKYRIE READINESS`):
//! - **lost data**: a paused group's master restarts empty; the verdict
//!   says the trigger is the lost data, held by the pause, before anything
//!   is promoted;
//! - **awaiting reports**: a replica known from the state file that does
//!   not answer after a restart (SIGSTOP) holds a failover back, by its
//!   address, and `SENTINEL FAILOVER` would be refused; once it answers,
//!   the group is ready.
//!
//! The peer-quorum reason is in `tests/peering/verdict.rs` (a real
//! valkey-sentinel peer).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::*;

use crate::readiness::sentinel_verdict;

/// Waits (bounded) until the verdict satisfies `check`; returns it.
fn wait_verdict(
    port: u16,
    limit: Duration,
    check: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let mut last = BTreeMap::new();
    wait_until(limit, || {
        last = sentinel_verdict(port).unwrap_or_default();
        check(&last)
    });
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_restarted_empty_is_the_trigger_while_paused() {
    let bin = valkey_server();
    let tmp = TempDir::new("verdict-lost");
    let (mut master, _r1, _r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    write_acknowledged(pm, 100, 2);
    let state = tmp.0.join("v");
    std::fs::create_dir_all(&state).unwrap();
    let d = valkyrie::daemon::Daemon::start(daemon_config(&state, vec![fast_group(pm)]))
        .await
        .unwrap();
    replicas_known(&d.handle, 2).await;
    let port = d.sentinel_addrs[0].port();
    d.handle.pause(vec!["mymaster".into()], true).await.unwrap();
    let v = tokio::task::spawn_blocking(move || {
        wait_verdict(port, Duration::from_secs(10), |v| {
            v.get("reason").map(String::as_str) == Some("paused")
        });
        master.restart_empty();
        let v = wait_verdict(port, Duration::from_secs(10), |v| {
            v.get("trigger").map(String::as_str) == Some("lost_data")
        });
        // Held: the empty master is still the one advertised.
        assert_eq!(advertised_master(port), Some(pm));
        drop(master);
        v
    })
    .await
    .unwrap();
    assert_eq!(v["ready"], "0", "{v:?}");
    assert_eq!(v["reason"], "paused", "{v:?}");
    assert!(v["text"].contains("paused"), "{v:?}");
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_silent_since_the_restart_holds_the_failover_by_its_address() {
    let bin = valkey_server();
    let tmp = TempDir::new("verdict-awaiting");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let state = tmp.0.join("v");
    std::fs::create_dir_all(&state).unwrap();
    // A long down-after: a silent replica is timed out only after 5 s
    // (the link's reply timeout), the window this test reads in.
    let mut group = fast_group(master.port);
    group.down_after = Duration::from_secs(60);
    let config = daemon_config(&state, vec![group]);
    let d = valkyrie::daemon::Daemon::start(config.clone())
        .await
        .unwrap();
    replicas_known(&d.handle, 2).await;
    d.stop().await.unwrap();

    r2.signal("STOP");
    let d = valkyrie::daemon::Daemon::start(config).await.unwrap();
    let port = d.sentinel_addrs[0].port();
    let silent = format!("127.0.0.1:{}", r2.port);
    let answering = format!(":{}", r1.port);
    // At first neither has reported; then only the silent one is named.
    let v = tokio::task::spawn_blocking(move || {
        wait_verdict(port, Duration::from_secs(5), |v| {
            v.get("reason").map(String::as_str) == Some("awaiting_reports")
                && v.get("text")
                    .is_some_and(|t| t.contains(&silent) && !t.contains(&answering))
        })
    })
    .await
    .unwrap();
    assert_eq!(v["ready"], "0", "{v:?}");
    assert_eq!(v["switchover-ready"], "0", "{v:?}");

    r2.signal("CONT");
    let v = tokio::task::spawn_blocking(move || {
        wait_verdict(port, Duration::from_secs(15), |v| {
            v.get("reason").map(String::as_str) == Some("ready")
        })
    })
    .await
    .unwrap();
    assert_eq!(v["switchover-ready"], "1", "{v:?}");
    d.stop().await.unwrap();
}
