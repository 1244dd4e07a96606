//! A master that answers but refuses PING, side by side with a real
//! `valkey-sentinel` 8.0.1: one that cannot save (`-MISCONF`, while its
//! INFO still answers) is flagged `s_down` by both; one whose password
//! the monitors lack (`-NOAUTH`) is flagged `disconnected` by both, until
//! `SENTINEL SET … auth-pass` gives it. No replica, so nothing is failed
//! over and the flags alone are compared.
//!
//! Needs `valkey-server` and `valkey-sentinel`; without them the test
//! fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::sentinel::{beside_a_real_sentinel, sides};
use support::{
    Server, TempDir, call, field, free_port, info_field, try_call, valkey_server, wait_until,
};
use valkyrie_protocol::Frame;

/// The `flags` of `SENTINEL MASTER g` on `port`.
fn flags(port: u16) -> String {
    try_call(port, &["SENTINEL", "MASTER", "g"])
        .ok()
        .and_then(|m| field(&m, "flags"))
        .unwrap_or_default()
}

/// Both monitors watch `master` as group `g`, with a 1 s down-after.
fn monitor(sides: &[(&str, u16)], master: u16) {
    let m = master.to_string();
    for (who, port) in sides {
        let ok = call(*port, &["SENTINEL", "MONITOR", "g", "127.0.0.1", &m, "1"]);
        assert_eq!(ok, Frame::Simple("OK".into()), "{who}");
        let ok = call(
            *port,
            &["SENTINEL", "SET", "g", "down-after-milliseconds", "1000"],
        );
        assert_eq!(ok, Frame::Simple("OK".into()), "{who}");
    }
}

/// No save in progress on `port`.
fn idle(port: u16) -> bool {
    matches!(try_call(port, &["INFO", "persistence"]), Ok(Frame::Bulk(b))
        if String::from_utf8_lossy(&b).contains("rdb_bgsave_in_progress:0"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_refusing_ping_with_misconf_is_sdown_as_on_sentinel() {
    let dir = TempDir::new("refusals-misconf");
    let port = free_port();
    std::fs::create_dir_all(dir.0.join(format!("n{port}")).join("blocked")).unwrap();
    // `dbfilename` may be changed at run time, as in Valkey's suite.
    let args = ["--enable-protected-configs", "yes"];
    let _master = Server::start_with(&valkey_server(), &dir.0, port, None, &args);
    let (real, daemon) = beside_a_real_sentinel(&dir.0).await;
    let sides = sides(&real, &daemon);
    monitor(&sides, port);
    wait_until(Duration::from_secs(15), || {
        sides.iter().all(|(_, p)| flags(*p) == "master")
    });
    // A save that cannot be written (its file name is a directory):
    // Valkey then refuses PING and writes with `-MISCONF`, INFO still
    // answers.
    for args in [
        ["CONFIG", "SET", "save", "1000000 1000000"],
        ["CONFIG", "SET", "dbfilename", "blocked"],
    ] {
        assert_eq!(call(port, &args), Frame::Simple("OK".into()));
    }
    call(port, &["BGSAVE"]);
    wait_until(
        Duration::from_secs(10),
        || matches!(try_call(port, &["PING"]), Ok(Frame::Error(e)) if e.starts_with(b"MISCONF")),
    );
    assert!(info_field(port, "role").is_some(), "INFO still answers");
    wait_until(Duration::from_secs(15), || {
        sides.iter().all(|(_, p)| flags(*p).contains("s_down"))
    });
    // Saving again clears it on both.
    assert_eq!(
        call(port, &["CONFIG", "SET", "dbfilename", "dump.rdb"]),
        Frame::Simple("OK".into())
    );
    wait_until(Duration::from_secs(10), || idle(port));
    call(port, &["BGSAVE"]);
    wait_until(Duration::from_secs(10), || {
        matches!(try_call(port, &["PING"]), Ok(Frame::Simple(_)))
    });
    wait_until(Duration::from_secs(15), || {
        sides.iter().all(|(_, p)| !flags(*p).contains("s_down"))
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_whose_password_is_missing_is_disconnected_as_on_sentinel() {
    let dir = TempDir::new("refusals-noauth");
    let port = free_port();
    let _master = Server::start(&valkey_server(), &dir.0, port, None);
    assert_eq!(
        call(port, &["CONFIG", "SET", "requirepass", "secret"]),
        Frame::Simple("OK".into())
    );
    let (real, daemon) = beside_a_real_sentinel(&dir.0).await;
    let sides = sides(&real, &daemon);
    monitor(&sides, port);
    wait_until(Duration::from_secs(15), || {
        sides
            .iter()
            .all(|(_, p)| flags(*p).contains("disconnected"))
    });
    for (who, p) in sides {
        let ok = call(p, &["SENTINEL", "SET", "g", "auth-pass", "secret"]);
        assert_eq!(ok, Frame::Simple("OK".into()), "{who}");
    }
    wait_until(Duration::from_secs(15), || {
        sides.iter().all(|(_, p)| flags(*p) == "master")
    });
}
