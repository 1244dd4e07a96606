//! Numeric bounds on the Sentinel port, side by side with a real
//! `valkey-sentinel` 8.0.1: `SENTINEL SET`, `SENTINEL MONITOR` and
//! `SENTINEL CONFIG SET` get the same matrix of odd values (zero,
//! negative, not a number, leading zeros or `+`, `i64::MAX` — which
//! Sentinel accepts — and one past it) and must give the same reply bytes.
//!
//! Needs the `valkey-sentinel` binary (`VALKEY_SENTINEL`, else the one on
//! `PATH`); without it the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use support::sentinel::RealSentinel;
use support::wire::Conn;
use support::{TempDir, free_port};
use valkyrie::config;
use valkyrie::daemon::Daemon;

const VALUES: &[&str] = &[
    "0",
    "-5",
    "abc",
    "",
    "1",
    "05",
    "-0",
    "+5",
    " 5",
    "1.5",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
];

const SET_OPTIONS: &[&str] = &[
    "down-after-milliseconds",
    "failover-timeout",
    "parallel-syncs",
    "quorum",
    "master-reboot-down-after-period",
    "primary-reboot-down-after-period",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_bounds_reply_as_sentinel_does() {
    let dir = TempDir::new("bounds-diff");
    let real_dir = dir.0.join("real");
    let ours_dir = dir.0.join("ours");
    std::fs::create_dir_all(&real_dir).unwrap();
    std::fs::create_dir_all(&ours_dir).unwrap();
    // Nothing listens on the monitored port: only the replies matter.
    let dead = free_port();
    let monitor = format!("sentinel monitor m 127.0.0.1 {dead} 1\n");
    let real = RealSentinel::start(&real_dir, &monitor);
    let text = format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\n{monitor}",
        ours_dir.display()
    );
    let (cfg, _) = config::parse("t.conf", text.as_bytes()).unwrap();
    let daemon = Daemon::start(cfg).await.unwrap();
    let ours_port = daemon.sentinel_addrs[0].port();
    let real_port = real.port;

    let mismatches = tokio::task::spawn_blocking(move || {
        let mut real = Conn::connect(real_port);
        let mut ours = Conn::connect(ours_port);
        let mut requests: Vec<Vec<String>> = Vec::new();
        for opt in SET_OPTIONS {
            for v in VALUES {
                requests.push(vec![
                    "SENTINEL".into(),
                    "SET".into(),
                    "m".into(),
                    (*opt).into(),
                    (*v).into(),
                ]);
            }
        }
        for (i, v) in VALUES.iter().enumerate() {
            let host = "127.0.0.1".to_string();
            let p = dead.to_string();
            requests.push(vec![
                "SENTINEL".into(),
                "MONITOR".into(),
                format!("q{i}"),
                host.clone(),
                p,
                (*v).into(),
            ]);
            requests.push(vec![
                "SENTINEL".into(),
                "MONITOR".into(),
                format!("p{i}"),
                host,
                (*v).into(),
                "1".into(),
            ]);
            requests.push(vec![
                "SENTINEL".into(),
                "CONFIG".into(),
                "SET".into(),
                "announce-port".into(),
                (*v).into(),
            ]);
        }
        for port in ["65535", "65536", "-1"] {
            requests.push(vec![
                "SENTINEL".into(),
                "MONITOR".into(),
                format!("x{port}"),
                "127.0.0.1".into(),
                port.into(),
                "1".into(),
            ]);
        }
        let mut mismatches = Vec::new();
        for req in &requests {
            let args: Vec<&str> = req.iter().map(String::as_str).collect();
            let a = real.ask(&args);
            let b = ours.ask(&args);
            // Sentinel truncates a port to a C int before its range check,
            // so 4294967296 and i64::MIN become port 0 and are monitored;
            // Valkyrie refuses them (docs/configuration.md).
            let wraps = args[1] == "MONITOR"
                && args[2].starts_with('p')
                && ["4294967296", "-9223372036854775808"].contains(&args[4]);
            if wraps {
                assert_eq!(a, b"+OK\r\n", "{args:?}");
                assert_eq!(b, b"-ERR Invalid port number.\r\n", "{args:?}");
                continue;
            }
            if a != b {
                mismatches.push(format!(
                    "{args:?}\n  sentinel: {:?}\n  valkyrie: {:?}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
        }
        mismatches
    })
    .await
    .unwrap();
    daemon.stop().await.unwrap();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
