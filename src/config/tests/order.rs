//! The order the `sentinel` lines are applied in: Valkey's, once the
//! whole file is read (daemon-wide options, then the monitors, then the
//! rest).

use std::time::Duration;

use super::{bad, ok};

#[test]
fn a_per_master_line_may_come_before_its_monitor() {
    let (c, _) = ok("sentinel down-after-milliseconds m 2000\n\
                     sentinel failover-timeout m 9000\n\
                     sentinel auth-pass m pw\n\
                     sentinel known-replica m 10.0.0.2 6380\n\
                     sentinel monitor m 10.0.0.1 6379 1\n");
    let g = c.group("m").unwrap();
    assert_eq!(g.down_after, Duration::from_millis(2000));
    assert_eq!(g.failover_timeout, Duration::from_millis(9000));
    assert_eq!(g.known_replicas, vec![("10.0.0.2".into(), 6380)]);
}

#[test]
fn a_master_never_monitored_is_still_an_error_naming_its_line() {
    // Valkey's message, at the line of the per-master directive, even
    // though the `monitor` lines were applied first.
    assert_eq!(
        bad("sentinel monitor m 10.0.0.1 6379 1\n\
             port 26380\n\
             sentinel down-after-milliseconds other 100\n"),
        "sentinel.conf:3: No such master with specified name."
    );
    assert_eq!(
        bad("sentinel parallel-syncs nosuch 1\nsentinel monitor m 10.0.0.1 6379 1\n"),
        "sentinel.conf:1: No such master with specified name."
    );
}

#[test]
fn monitors_are_applied_before_the_rest_and_errors_follow_that_order() {
    // Line 1 names no master, line 2 is a bad monitor: the monitor pass
    // runs first, so Valkey reports line 2.
    assert_eq!(
        bad("sentinel down-after-milliseconds nosuch 100\n\
             sentinel monitor m 10.0.0.1 6379 0\n"),
        "sentinel.conf:2: Quorum must be 1 or greater."
    );
    // A daemon-wide option after the monitors is applied before them: a
    // hostname monitor needs `resolve-hostnames yes`, wherever it is.
    let (c, _) = ok("sentinel monitor m valkey-0.svc 6379 1\nsentinel resolve-hostnames yes\n");
    assert_eq!(c.groups[0].host, "valkey-0.svc");
    // The monitors keep their file order.
    let (c, _) = ok("sentinel monitor b 10.0.0.2 6379 1\n\
                     sentinel parallel-syncs a 2\n\
                     sentinel monitor a 10.0.0.1 6379 1\n");
    let names: Vec<&str> = c.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(c.group("a").unwrap().parallel_syncs, 2);
}

#[test]
fn a_server_directive_error_comes_before_any_sentinel_line() {
    // Valkey stops at a bad server line while reading; the queued
    // `sentinel` lines are never applied.
    assert_eq!(
        bad("sentinel down-after-milliseconds nosuch 100\nfrobnicate yes\n"),
        "sentinel.conf:2: unknown directive 'frobnicate'"
    );
}

#[test]
fn a_bare_sentinel_line_is_accepted() {
    let (c, _) = ok("sentinel\nsentinel monitor m 10.0.0.1 6379 1\n");
    assert_eq!(c.groups.len(), 1);
}
