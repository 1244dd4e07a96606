//! Master names that could not be carried on every port are refused by
//! `SENTINEL MONITOR`: the empty name (the index port would send
//! `SNAPSHOT  epoch=…`, which its own clients reject) and names longer than
//! 1024 bytes (past the index protocol's line limits). The longest
//! accepted name is pushed on the index port and read back by its client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::{TempDir, daemon_config, free_port};
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;
use valkyrie_protocol::index::{IndexClient, Update};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_refuses_empty_and_overlong_names() {
    let dir = TempDir::new("odd-names");
    let mut cfg = daemon_config(&dir.0, Vec::new());
    cfg.index_port = free_port();
    let d = Daemon::start(cfg).await.unwrap();
    let port = d.sentinel_addrs[0].port();
    let index = d.index_addrs[0];
    let dead = free_port().to_string();
    let fits = "n".repeat(valkyrie::config::MAX_NAME_LEN);
    let long = "n".repeat(valkyrie::config::MAX_NAME_LEN + 1);
    let huge = "n".repeat(70 * 1024);
    let (fits2, dead2) = (fits.clone(), dead.clone());
    let replies = tokio::task::spawn_blocking(move || {
        let mon = |name: &str| {
            support::call(
                port,
                &["SENTINEL", "MONITOR", name, "127.0.0.1", &dead2, "1"],
            )
        };
        (mon(""), mon(&long), mon(&huge), mon(&fits2))
    })
    .await
    .unwrap();
    assert_eq!(
        replies.0,
        Frame::error("ERR Master names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        replies.1,
        Frame::error("ERR Master names cannot be longer than 1024 bytes.")
    );
    assert_eq!(replies.2, replies.1);
    assert_eq!(replies.3, Frame::simple("OK"));
    let groups: Vec<String> = d.handle.topology.borrow().groups.keys().cloned().collect();
    assert_eq!(groups, vec![fits.clone()]);

    let mut client = tokio::time::timeout(Duration::from_secs(10), IndexClient::connect(index))
        .await
        .unwrap()
        .unwrap();
    client.watch(&[fits.as_str()]).await.unwrap();
    let update = tokio::time::timeout(Duration::from_secs(10), client.next())
        .await
        .unwrap()
        .unwrap();
    match update {
        Update::Snapshot(s) => assert_eq!(s.group, fits),
        other => panic!("expected a snapshot, got {other:?}"),
    }
    d.stop().await.unwrap();
}
