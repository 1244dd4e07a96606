//! The most used Java and Go Sentinel clients through a real SIGKILL
//! failover, against three Valkyries and, in the same run, against three
//! real valkey-sentinels: Jedis (`JedisSentinelPool`), Lettuce (RESP3,
//! RESP2 and `MasterReplica` with `REPLICA_PREFERRED`), Redisson
//! (`useSentinelServers`), Spring Data Redis (`RedisSentinelConfiguration`
//! on Lettuce) and go-redis v9 (`NewFailoverClient` in RESP3 and RESP2,
//! `NewFailoverClusterClient`).
//!
//! Each client discovers the master and the replicas, writes, reads the
//! write back from a replica, then the master is SIGKILLed and the same
//! client object writes again, to the promoted replica; the clients that
//! subscribe receive `+switch-master`. Each reports how long it took to
//! write again after the kill: the per-client table of
//! docs/compatibility.md comes from this test's output
//! (`VALKYRIE_CLIENT_TRIALS=N` repeats each deployment N times).
//!
//! The drivers are tests/clients/java (Maven) and tests/clients/go (Go
//! modules); `scripts/deps.sh` builds them and exports
//! VALKYRIE_JAVA_CLIENTS and VALKYRIE_GO_CLIENTS. Redisson refuses to
//! start with fewer than two entries in `SENTINEL sentinels`; with one
//! sentinel it runs with `checkSentinelsList(false)`, in its own test.
//!
//! The same clients over TLS, against one Valkyrie and one valkey-sentinel:
//! tests/clients/tls_java_go.rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use support::call;
use support::clients::{Driver, GO_CLIENTS as GO, RecoveryTable, driver_command};
use support::peers::{Deployment, Kind, Spec, serial};

const S: Duration = Duration::from_secs(1);

/// The Java clients run against three sentinels, in one JVM.
const JAVA: &[&str] = &[
    "jedis",
    "lettuce-resp3",
    "lettuce-resp2",
    "lettuce-master-replica",
    "redisson",
    "spring",
];

/// One failover of a fresh deployment with the given drivers attached:
/// each client's recovery time, and the failover's own (kill to every
/// sentinel advertising the new master).
fn one_failover(
    tag: &str,
    specs: &[Spec],
    drivers: &[(&str, &[&'static str])],
) -> (Vec<(&'static str, u64)>, Duration) {
    let mut d = Deployment::start(tag, specs);
    d.check_i7(20 * S)
        .unwrap_or_else(|e| panic!("{tag}: {e}\n{}", d.log_tail(0, 20)));
    let sentinels: Vec<u16> = d.sentinels.iter().map(|s| s.port).collect();
    let old = d.nodes[0].port;
    let replicas = [d.nodes[1].port, d.nodes[2].port];
    let mut running: Vec<Driver> = drivers
        .iter()
        .map(|(var, clients)| {
            Driver::start(
                driver_command(var),
                &format!("{tag}/{var}"),
                &sentinels,
                clients,
            )
        })
        .collect();
    for r in &mut running {
        r.expect_before(old, &replicas);
    }
    d.kill_node(0);
    let killed = Instant::now();
    for r in &mut running {
        r.proc.go();
    }
    let (master, epoch) = d
        .converged(40 * S)
        .unwrap_or_else(|e| panic!("{tag}: {e}\n{}", d.log_tail(0, 40)));
    let failover = killed.elapsed();
    assert!(replicas.contains(&master), "{tag}: promoted {master}");
    assert!(epoch >= 1, "{tag}: config epoch {epoch}");
    let switch = format!("mymaster 127.0.0.1 {old} 127.0.0.1 {master}");
    // Real sentinels sometimes fail the new master over again right away
    // (one of them marks it down before its link to it is up); Valkyries
    // never may.
    let real = specs.iter().any(|s| matches!(s.kind, Kind::Real));
    let moved_on = || {
        let now = d.converged(20 * S).ok().map(|(m, _)| m);
        if now.is_some_and(|m| m != master) {
            assert!(real, "{tag}: the Valkyries failed over a second time");
            eprintln!("{tag}: the sentinels failed over again, to {now:?}");
        }
        now
    };
    let get = |port: u16, key: &str| call(port, &["GET", key]);
    let mut recovered = Vec::new();
    for r in &mut running {
        recovered.extend(r.expect_after(master, &switch, &moved_on, &get));
    }
    (recovered, failover)
}

/// Runs `one_failover` for each deployment kind, `VALKYRIE_CLIENT_TRIALS`
/// times (1 by default), and prints the recovery table.
fn side_by_side(name: &str, sentinels: usize, drivers: &[(&str, &[&'static str])]) {
    let trials: usize = std::env::var("VALKYRIE_CLIENT_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1)
        .max(1);
    let quorum = u32::try_from(sentinels / 2 + 1).unwrap();
    let kinds = [
        ("valkyrie", Spec::valkyrie().quorum(quorum)),
        ("sentinel", Spec::real().quorum(quorum)),
    ];
    let mut table = RecoveryTable::default();
    for trial in 0..trials {
        for (kind, spec) in &kinds {
            let _serial = serial();
            let tag = format!("{name}-{kind}-{trial}");
            let specs = vec![spec.clone(); sentinels];
            let (recovered, failover) = one_failover(&tag, &specs, drivers);
            eprintln!("{tag}: failover settled {failover:?} after the kill: {recovered:?}");
            table.add(kind, recovered, failover);
        }
    }
    table.print(
        &format!(
            "{name}: {sentinels} sentinel(s), {trials} trial(s); median ms from SIGKILL to the first acknowledged write"
        ),
        &format!("{sentinels} × Valkyrie"),
        &format!("{sentinels} × valkey-sentinel"),
    );
}

#[test]
fn java_and_go_clients_follow_a_failover() {
    side_by_side(
        "clients",
        3,
        &[("VALKYRIE_JAVA_CLIENTS", JAVA), ("VALKYRIE_GO_CLIENTS", GO)],
    );
}

#[test]
fn redisson_with_one_sentinel_and_its_check_off() {
    side_by_side(
        "redisson-one",
        1,
        &[("VALKYRIE_JAVA_CLIENTS", &["redisson-unchecked"])],
    );
}
