//! `SENTINEL DEBUG` values take effect in a running daemon, as seen on
//! `SENTINEL REPLICAS`: `info-period` sets how old a replica's INFO gets
//! (`info-refresh`), `ping-period` how long it goes without a PING reply
//! (`last-ping-reply`), both at once, on links already connected.
//!
//! No fixed sleeps: each step polls until what it expects is seen, within
//! a bound. A window of samples spanning more than the old period, all
//! below a value the old period would exceed, shows the new one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use support::*;
use valkyrie::config::GroupConfig;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

/// Field `name` of the first replica of `mymaster`, in milliseconds.
fn replica_ms(port: u16, name: &str) -> u64 {
    let Frame::Array(replicas) = call(port, &["SENTINEL", "REPLICAS", "mymaster"]) else {
        panic!("no replicas")
    };
    let Some(Frame::Array(kv)) = replicas.first() else {
        panic!("no replica")
    };
    kv.chunks(2)
        .find(|p| p[0].as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
        .and_then(|p| p[1].as_bytes())
        .map(|b| String::from_utf8_lossy(b).parse().unwrap())
        .unwrap_or_else(|| panic!("no {name}"))
}

fn debug(port: u16, args: &[&str]) {
    let mut req = vec!["SENTINEL", "DEBUG"];
    req.extend(args);
    assert_eq!(call(port, &req), Frame::Simple("OK".into()), "{args:?}");
}

/// Polls until `n` samples in a row, `every` apart, are all below
/// `below` (an occasional slow sample on a loaded machine restarts the
/// window); panics after `limit`.
fn settles_below(port: u16, field: &str, below: u64, n: usize, limit: Duration) {
    let start = Instant::now();
    let mut in_a_row = 0;
    let mut seen = Vec::new();
    while in_a_row < n {
        assert!(
            start.elapsed() < limit,
            "{field} never stayed below {below} ms for {n} samples: {seen:?}"
        );
        let v = replica_ms(port, field);
        seen.push(v);
        in_a_row = if v < below { in_a_row + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_period_and_ping_period_take_effect_at_once() {
    let bin = valkey_server();
    let tmp = TempDir::new("debug-timers");
    let (master, _r1, _r2) = start_trio(&bin, &tmp.0);
    // down-after 30 s: PINGs every second (a tenth of it, at most
    // ping-period).
    let group = GroupConfig::new("mymaster", "127.0.0.1", master.port, 1);
    let d = Daemon::start(daemon_config(&tmp.0, vec![group]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    replicas_known(&d.handle, 2).await;

    tokio::task::spawn_blocking(move || {
        // INFO once a minute: the replica's INFO grows older than the
        // default period (1 s) ever lets it.
        debug(sp, &["info-period", "60000"]);
        wait_until(Duration::from_secs(15), || {
            replica_ms(sp, "info-refresh") > 2_500
        });
        // With INFO out of the way, only PINGs refresh `last-ping-reply`:
        // at the default ping-period (1 s) it passes 600 ms.
        wait_until(Duration::from_secs(15), || {
            replica_ms(sp, "last-ping-reply") > 600
        });
        // Every 100 ms: over 1.5 s (longer than the old period) it stays
        // below 400 ms.
        debug(sp, &["ping-period", "100"]);
        settles_below(sp, "last-ping-reply", 400, 30, Duration::from_secs(20));
        // And INFO every 100 ms, on the link already open.
        debug(sp, &["info-period", "100"]);
        settles_below(sp, "info-refresh", 400, 30, Duration::from_secs(20));
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}
