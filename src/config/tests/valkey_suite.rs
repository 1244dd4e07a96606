//! The `sentinel.conf` Valkey's own Sentinel test suite (tag 8.0.1) writes
//! for each sentinel: its `tests/sentinel/tests/includes/sentinel.conf`,
//! with the lines `tests/instances.tcl` and `tests/sentinel/run.tcl`
//! append. Valkey starts from it; so must Valkyrie.

use std::path::PathBuf;
use std::time::Duration;

use super::{bad, ok};

const SUITE_CONF: &str = "\
# assume master is down after being unresponsive for 20s
sentinel down-after-milliseconds setmaster 20000
# reconfigure one slave at a time
sentinel parallel-syncs setmaster 2
# wait for 4m before assuming failover went wrong
sentinel failover-timeout setmaster 240000
# monitoring set
sentinel monitor setmaster 10.0.0.1 30000 2
port 20000
repl-diskless-sync-delay 0
dir ./sentinel_0
logfile log.txt
enable-debug-assert yes
sentinel deny-scripts-reconfig no
enable-protected-configs yes
enable-debug-command yes
";

#[test]
fn the_suites_sentinel_conf_loads() {
    let (c, notes) = ok(SUITE_CONF);
    let g = c.group("setmaster").unwrap();
    assert_eq!((g.host.as_str(), g.port, g.quorum), ("10.0.0.1", 30000, 2));
    assert_eq!(g.down_after, Duration::from_millis(20_000));
    assert_eq!(g.parallel_syncs, 2);
    assert_eq!(g.failover_timeout, Duration::from_millis(240_000));
    assert_eq!(c.port, 20000);
    assert_eq!(c.logfile, Some(PathBuf::from("log.txt")));
    // One warning per server directive Valkyrie has no use for, at its
    // line, naming it.
    let warnings: Vec<(usize, &str)> = notes
        .iter()
        .filter(|n| n.warning)
        .map(|n| (n.line, n.message.as_str()))
        .collect();
    let lines: Vec<usize> = warnings.iter().map(|w| w.0).collect();
    assert_eq!(lines, [10, 13, 15], "{warnings:?}");
    for (w, name) in warnings.iter().zip([
        "repl-diskless-sync-delay",
        "enable-debug-assert",
        "enable-protected-configs",
    ]) {
        assert!(w.1.contains(&format!("'{name}' ignored")), "{w:?}");
    }
}

#[test]
fn every_valkey_directive_is_accepted_and_a_typo_is_not() {
    // Valkey's names and aliases, in any case.
    for line in [
        "slaveof 10.0.0.1 6379",
        "replica-serve-stale-data yes",
        "SAVE \"\"",
        "notify-keyspace-events Ex",
        "oom-score-adj-values 0 200 800",
        "loadmodule /x/valkey-tls.so",
        "list-max-ziplist-entries 128",
    ] {
        let (_, notes) = ok(&format!("{line}\n"));
        assert!(
            notes.iter().any(|n| n.warning && n.line == 1),
            "{line}: {notes:?}"
        );
    }
    assert_eq!(
        bad("port 1\nsentinel-monitor m 10.0.0.1 6379 1\n"),
        "sentinel.conf:2: unknown directive 'sentinel-monitor'"
    );
    assert_eq!(
        bad("sentinel monitor m 10.0.0.1 6379 1\nsentinel dwon-after m 10\n"),
        "sentinel.conf:2: unknown directive 'sentinel dwon-after'"
    );
    assert_eq!(
        bad("dwon-after 10\n"),
        "sentinel.conf:1: unknown directive 'dwon-after'"
    );
    // A server `rename-command` left undone could leave a command reachable
    // that was meant to be gone: refused, not ignored.
    assert!(bad("rename-command SHUTDOWN \"\"\n").contains("not supported"));
}

#[test]
fn the_directive_list_is_sorted_for_its_search() {
    let list = crate::config::valkey_directives::VALKEY_DIRECTIVES;
    assert!(list.windows(2).all(|w| w[0] < w[1]));
    assert!(
        list.iter()
            .all(|n| n.bytes().all(|b| !b.is_ascii_uppercase()))
    );
}

#[test]
fn logfile_empty_means_stderr() {
    assert_eq!(ok("logfile \"\"\n").0.logfile, None);
    assert_eq!(
        ok("logfile /var/log/valkyrie.log\n").0.logfile,
        Some(PathBuf::from("/var/log/valkyrie.log"))
    );
}
