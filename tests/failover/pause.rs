//! Pause and resume against real valkey-servers, through the Sentinel
//! port (`VALKYRIE PAUSE`, `VALKYRIE RESUME`): the pause survives a
//! restart of the daemon; while paused, the killed master is reported
//! down (`+odown`) and nothing is promoted, and `SENTINEL FAILOVER` is
//! refused; once resumed, it fails over. The time from the resume to
//! `+switch-master` is printed (the bound asserted is generous: the
//! core's own test pins it to the first step after the resume).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use support::observe::Events;
use support::*;
use valkyrie_protocol::Frame;

fn names(reply: Frame) -> Vec<String> {
    match reply {
        Frame::Array(items) => items
            .iter()
            .map(|f| String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned())
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn reason(port: u16) -> Option<String> {
    crate::readiness::sentinel_verdict(port).and_then(|v| v.get("reason").cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_group_is_not_failed_over_until_resumed_even_across_a_restart() {
    let bin = valkey_server();
    let tmp = TempDir::new("pause");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    let state = tmp.0.join("v");
    std::fs::create_dir_all(&state).unwrap();
    let config = daemon_config(&state, vec![fast_group(pm)]);
    let d = valkyrie::daemon::Daemon::start(config.clone())
        .await
        .unwrap();
    replicas_known(&d.handle, 2).await;
    let port = d.sentinel_addrs[0].port();

    // Paused by a glob; an unmatched pattern pauses nothing.
    let paused = tokio::task::spawn_blocking(move || {
        let none = names(call(port, &["VALKYRIE", "PAUSE", "other*"]));
        let some = names(call(port, &["VALKYRIE", "PAUSE", "my*"]));
        (none, some)
    })
    .await
    .unwrap();
    assert_eq!(paused, (vec![], vec!["mymaster".to_string()]));
    d.stop().await.unwrap();

    // Restarted from its state file: still paused.
    let d = valkyrie::daemon::Daemon::start(config).await.unwrap();
    replicas_known(&d.handle, 2).await;
    let port = d.sentinel_addrs[0].port();
    let (p1, p2) = (r1.port, r2.port);
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            reason(port).as_deref() == Some("paused")
        });
        assert_eq!(
            call(port, &["SENTINEL", "FAILOVER", "mymaster"]),
            Frame::error("ERR the group is paused: VALKYRIE RESUME it first")
        );
        assert!(
            master_field(port, "flags").is_some_and(|f| !f.contains("failover")),
            "no failover"
        );
    })
    .await
    .unwrap();

    let events = Events::watch(port);
    master.kill();
    let resumed_at = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(15), || {
            events.saw("+odown", "master mymaster")
        });
        // Well past the time a failover takes: nothing is promoted.
        let until = Instant::now() + Duration::from_secs(4);
        while Instant::now() < until {
            assert_eq!(advertised_master(port), Some(pm), "promoted while paused");
            assert!(!events.saw("+try-failover", ""), "{:?}", events.all());
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(reason(port).as_deref(), Some("paused"));
        let resumed = names(call(port, &["VALKYRIE", "RESUME", "*"]));
        assert_eq!(resumed, vec!["mymaster".to_string()]);
        let at = Instant::now();
        wait_until(Duration::from_secs(10), || {
            events.saw("+switch-master", "mymaster")
        });
        let new_master = advertised_master(port).unwrap();
        assert!(new_master == p1 || new_master == p2);
        at.elapsed()
    })
    .await
    .unwrap();
    eprintln!("+switch-master {resumed_at:?} after the resume (down-after 1 s)");
    d.stop().await.unwrap();
}
