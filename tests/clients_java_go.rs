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

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::call;
use support::clients::Proc;
use support::peers::{Deployment, Kind, Spec, serial};
use valkyrie_protocol::Frame;

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

/// The go-redis clients, in one process.
const GO: &[&str] = &["goredis-resp3", "goredis-resp2", "goredis-cluster"];

/// The clients whose driver subscribes to `+switch-master` through the
/// library and prints the message.
const SUBSCRIBERS: &[&str] = &[
    "jedis",
    "lettuce-resp3",
    "lettuce-resp2",
    "lettuce-master-replica",
    "redisson",
    "redisson-unchecked",
    "goredis-resp3",
    "goredis-resp2",
    "goredis-cluster",
];

/// A driver that cannot tell which node served its replica read, and why
/// ([`Driver::expect_before`]).
const ROLE_UNKNOWN: &[&str] = &[];

/// One driver process running several clients, each of its lines
/// prefixed with the client's name.
struct Driver {
    proc: Proc,
    clients: Vec<&'static str>,
}

/// What a driver's artifact is: a jar runs under `java -jar`, anything
/// else is executed.
fn driver_command(var: &str) -> Command {
    let path = std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: run scripts/test (it builds the Java and Go drivers)")
    });
    assert!(
        Path::new(&path).is_file(),
        "{var}={path:?} does not exist: run scripts/test"
    );
    if Path::new(&path).extension().is_some_and(|e| e == "jar") {
        let mut cmd =
            Command::new(std::env::var_os("VALKYRIE_JAVA").unwrap_or_else(|| "java".into()));
        cmd.arg("-jar").arg(path);
        cmd
    } else {
        Command::new(path)
    }
}

impl Driver {
    fn start(var: &str, name: &str, sentinels: &[u16], clients: &[&'static str]) -> Driver {
        let mut cmd = driver_command(var);
        let ports: Vec<String> = sentinels.iter().map(u16::to_string).collect();
        cmd.arg(ports.join(",")).arg(clients.join(","));
        Driver {
            proc: Proc::spawn(name, cmd),
            clients: clients.to_vec(),
        }
    }

    /// Phase 1: every client found `master`, both `replicas`, and read its
    /// write back from a replica.
    fn expect_before(&mut self, master: u16, replicas: &[u16]) {
        let want: BTreeSet<u16> = replicas.iter().copied().collect();
        for c in self.clients.clone() {
            // A JVM starting many clients on a loaded machine is slow.
            let got = self.proc.expect(&format!("{c} master "), 90 * S);
            assert_eq!(got, master.to_string(), "{c}: the master it discovered");
            let got: BTreeSet<u16> = self
                .proc
                .expect(&format!("{c} replicas "), 20 * S)
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
            assert_eq!(got, want, "{c}: the replicas it discovered");
            let read = self.proc.expect(&format!("{c} replica-read "), 20 * S);
            assert_eq!(read, "1", "{c}: its write read back from a replica");
            let role = self.proc.expect(&format!("{c} replica-role "), 20 * S);
            if ROLE_UNKNOWN.contains(&c) {
                assert_eq!(role, "unknown", "{c}");
            } else {
                assert_eq!(role, "slave", "{c}: the node that served the read");
            }
            self.proc.expect(&format!("{c} ready"), 30 * S);
        }
    }

    /// Phase 2: every client wrote to `master` again with the same
    /// object; subscribers got `switch`. Returns each client's time from
    /// the kill to its first acknowledged write.
    ///
    /// `moved_on` names the master the deployment has converged on since,
    /// when real sentinels failed the new master over again (a client that
    /// reports it followed the promoted node then is right).
    fn expect_after(
        &mut self,
        master: u16,
        switch: &str,
        moved_on: &dyn Fn() -> Option<u16>,
    ) -> Vec<(&'static str, u64)> {
        let mut recovered = Vec::new();
        for c in self.clients.clone() {
            let ms = self.proc.expect(&format!("{c} recovered-ms "), 70 * S);
            let ms: u64 = ms
                .parse()
                .unwrap_or_else(|_| panic!("{c}: recovered-ms {ms:?}"));
            let followed = self.proc.expect(&format!("{c} followed "), 20 * S);
            let followed: u16 = followed
                .parse()
                .unwrap_or_else(|_| panic!("{c}: followed {followed:?}"));
            assert!(
                followed == master || moved_on() == Some(followed),
                "{c}: writes to {followed}, not the new master {master}"
            );
            if SUBSCRIBERS.contains(&c) {
                let got = self.proc.expect(&format!("{c} switch "), 20 * S);
                assert_eq!(got, switch, "{c}: the +switch-master message");
            }
            self.proc.expect(&format!("{c} done"), 20 * S);
            assert_eq!(
                call(followed, &["GET", &format!("after:{c}")]),
                Frame::bulk("1"),
                "{c}: its write after the failover is on the master it followed"
            );
            recovered.push((c, ms));
        }
        self.proc.expect("done", 20 * S);
        let status = self.proc.wait_exit(20 * S);
        assert!(status.success(), "{}: exit {status}", self.proc.name);
        recovered
    }
}

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
        .map(|(var, clients)| Driver::start(var, &format!("{tag}/{var}"), &sentinels, clients))
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
    let mut recovered = Vec::new();
    for r in &mut running {
        recovered.extend(r.expect_after(master, &switch, &moved_on));
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
    // client -> kind -> recovery times (ms)
    let mut table: BTreeMap<&str, BTreeMap<&str, Vec<u64>>> = BTreeMap::new();
    let mut failovers: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for trial in 0..trials {
        for (kind, spec) in &kinds {
            let _serial = serial();
            let tag = format!("{name}-{kind}-{trial}");
            let specs = vec![spec.clone(); sentinels];
            let (recovered, failover) = one_failover(&tag, &specs, drivers);
            eprintln!("{tag}: failover settled {failover:?} after the kill: {recovered:?}");
            failovers
                .entry(kind)
                .or_default()
                .push(u64::try_from(failover.as_millis()).unwrap());
            for (c, ms) in recovered {
                table
                    .entry(c)
                    .or_default()
                    .entry(kind)
                    .or_default()
                    .push(ms);
            }
        }
    }
    let median = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    println!(
        "{name}: {sentinels} sentinel(s), {trials} trial(s); median ms from SIGKILL to the first acknowledged write"
    );
    println!("| client | {sentinels} × Valkyrie | {sentinels} × valkey-sentinel | ratio |");
    for (c, by_kind) in &table {
        let v = median(&by_kind["valkyrie"]);
        let s = median(&by_kind["sentinel"]);
        #[allow(clippy::cast_precision_loss)]
        let ratio = v as f64 / s.max(1) as f64;
        println!("| {c} | {v} | {s} | {ratio:.2}× |");
    }
    println!(
        "| (failover settled on every sentinel) | {} | {} | |",
        median(&failovers["valkyrie"]),
        median(&failovers["sentinel"])
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
