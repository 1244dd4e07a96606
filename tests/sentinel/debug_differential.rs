//! `SENTINEL DEBUG` side by side with a real `valkey-sentinel` 8.0.1: the
//! same names in the same order (RESP2 and RESP3), the same values except
//! where Valkyrie's defaults differ (`INFO-PERIOD`, `MIN-LINK-RECONNECT-
//! PERIOD`: docs/configuration.md), the same reply bytes to a matrix of
//! bad input, and, once every timer is set to the same values on both, the
//! same reply bytes. `SENTINEL MONITOR` then takes `default-down-after` and
//! `default-failover-timeout` on both.
//!
//! Needs the `valkey-sentinel` binary (`VALKEY_SENTINEL`, else the one on
//! `PATH`); without it the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use support::sentinel::beside_a_real_sentinel;
use support::wire::Conn;
use support::{TempDir, free_port};
use valkyrie_protocol::Frame;

/// Valkyrie's defaults that are not Sentinel's: (name, Sentinel's,
/// Valkyrie's).
const DIFFERENT: [(&str, &str, &str); 2] = [
    ("INFO-PERIOD", "10000", "1000"),
    ("MIN-LINK-RECONNECT-PERIOD", "15000", "6000"),
];

const NAMES: [&str; 13] = [
    "info-period",
    "Ping-Period",
    "ASK-PERIOD",
    "publish-period",
    "default-down-after",
    "default-failover-timeout",
    "tilt-trigger",
    "tilt-period",
    "slave-reconf-timeout",
    "min-link-reconnect-period",
    "election-timeout",
    "script-max-runtime",
    "script-retry-delay",
];

const BAD_VALUES: &[&str] = &[
    "0",
    "-5",
    "abc",
    "",
    "05",
    "-0",
    "+5",
    " 5",
    "1.5",
    "9223372036854775808",
    "-9223372036854775808",
    "a\r\nb",
];

/// A flat RESP2 key/value reply as (key, value) texts.
fn pairs(reply: &Frame) -> Vec<(String, String)> {
    let Frame::Array(items) = reply else {
        panic!("not an array: {reply:?}")
    };
    let text = |f: &Frame| String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned();
    items
        .chunks(2)
        .map(|p| (text(&p[0]), text(&p[1])))
        .collect()
}

fn bad_requests() -> Vec<Vec<String>> {
    let mut requests: Vec<Vec<String>> = Vec::new();
    let req = |args: &[&str]| {
        let mut r = vec!["SENTINEL".to_string(), "DEBUG".to_string()];
        r.extend(args.iter().map(|a| (*a).to_string()));
        r
    };
    for name in NAMES {
        for v in BAD_VALUES {
            requests.push(req(&[name, v]));
        }
        // A name without its value.
        requests.push(req(&[name]));
    }
    requests.push(req(&["nosuch", "1"]));
    requests.push(req(&["replica-reconf-timeout", "1"]));
    requests.push(req(&["info-period", "100", "nosuch"]));
    requests.push(req(&["info-period", "100", "ping-period", "x"]));
    requests.push(req(&["", ""]));
    requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_debug_replies_as_sentinel_does() {
    let dir = TempDir::new("debug-diff");
    let (real, daemon) = beside_a_real_sentinel(&dir.0).await;
    let ours_port = daemon.sentinel_addrs[0].port();
    let real_port = real.port;

    tokio::task::spawn_blocking(move || {
        let mut real = Conn::connect(real_port);
        let mut ours = Conn::connect(ours_port);
        // The defaults: same names, same order, values where documented.
        let (a, b) = (
            pairs(&real.frame(&["SENTINEL", "DEBUG"])),
            pairs(&ours.frame(&["SENTINEL", "DEBUG"])),
        );
        let keys = |p: &[(String, String)]| p.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&a), keys(&b));
        assert_eq!(a.len(), 13);
        for ((k, real_v), (_, ours_v)) in a.iter().zip(&b) {
            match DIFFERENT.iter().find(|(n, _, _)| n == k) {
                Some((_, sentinel, valkyrie)) => {
                    assert_eq!((real_v.as_str(), ours_v.as_str()), (*sentinel, *valkyrie));
                }
                None => assert_eq!(real_v, ours_v, "{k}"),
            }
        }

        // Bad input: the same bytes.
        let mut mismatches = Vec::new();
        for req in bad_requests() {
            let args: Vec<&str> = req.iter().map(String::as_str).collect();
            let (a, b) = (real.ask(&args), ours.ask(&args));
            if a != b {
                mismatches.push(format!(
                    "{args:?}\n  sentinel: {:?}\n  valkyrie: {:?}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
        // Sentinel kept the pair before the bad one; Valkyrie applies all
        // or nothing.
        let info_period = |c: &mut Conn| pairs(&c.frame(&["SENTINEL", "DEBUG"]))[0].1.clone();
        assert_eq!(info_period(&mut real), "100");
        assert_eq!(info_period(&mut ours), "1000");

        // Valkey's own test (tests/sentinel/tests/14-debug-command.tcl).
        for c in [&mut real, &mut ours] {
            assert_eq!(
                c.ask(&["SENTINEL", "DEBUG", "info-period", "8888"]),
                b"+OK\r\n"
            );
            assert_eq!(info_period(c), "8888");
        }

        // Every timer set alike (i64::MAX included, as Sentinel accepts
        // it): the same bytes, RESP2 and RESP3.
        let mut set = vec!["SENTINEL", "DEBUG"];
        let values: Vec<String> = (0..NAMES.len())
            .map(|i| (1_000 + 7 * i).to_string())
            .collect();
        for (name, value) in NAMES.iter().zip(&values) {
            set.extend([*name, value.as_str()]);
        }
        set.extend(["script-retry-delay", "9223372036854775807"]);
        for c in [&mut real, &mut ours] {
            assert_eq!(c.ask(&set), b"+OK\r\n");
        }
        assert_eq!(
            real.ask(&["SENTINEL", "DEBUG"]),
            ours.ask(&["SENTINEL", "DEBUG"])
        );
        for c in [&mut real, &mut ours] {
            assert!(c.ask(&["HELLO", "3"]).starts_with(b"%"));
        }
        let resp3 = ours.ask(&["SENTINEL", "DEBUG"]);
        assert!(resp3.starts_with(b"%13\r\n$11\r\nINFO-PERIOD\r\n$4\r\n1000\r\n"));
        assert_eq!(real.ask(&["SENTINEL", "DEBUG"]), resp3);

        // A new group takes the default down-after and failover timeout.
        let dead = free_port().to_string();
        for c in [&mut real, &mut ours] {
            let reply = c.ask(&[
                "SENTINEL",
                "DEBUG",
                "default-down-after",
                "4321",
                "default-failover-timeout",
                "98765",
            ]);
            assert_eq!(reply, b"+OK\r\n");
            let reply = c.ask(&["SENTINEL", "MONITOR", "m", "127.0.0.1", &dead, "1"]);
            assert_eq!(reply, b"+OK\r\n");
            let master = c.frame(&["SENTINEL", "MASTER", "m"]);
            let Frame::Map(fields) = master else {
                panic!("{master:?}")
            };
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k.as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
                    .and_then(|(_, v)| v.as_bytes())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            };
            assert_eq!(field("down-after-milliseconds").as_deref(), Some("4321"));
            assert_eq!(field("failover-timeout").as_deref(), Some("98765"));
        }
    })
    .await
    .unwrap();
    daemon.stop().await.unwrap();
}
