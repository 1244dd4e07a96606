//! The write fence with real processes and real cuts: real valkey-server
//! master and replicas, Valkyrie as its own uid (tests/support/cut.rs),
//! writers that keep writing to whatever node takes writes.
//!
//! - **The master isolated with its clients** (its replicas and Valkyrie
//!   cut from it, both directions; the writers still reach it) for 20 s,
//!   under `write-fence auto`: the isolated master stops acknowledging
//!   within the fence's lag plus 2 s of the cut, a replica is promoted
//!   well inside the 11 s an unfenced master's witnesses take, and no
//!   moment has two masters that take writes.
//! - **A client that waits** (`WAIT 1`) loses nothing in the same cut.
//! - **A replica restart under `auto`**: writes pause at most briefly and
//!   nothing acknowledged is lost.
//! - **`strict`**: with a replica away, writes stop; nothing is lost.
//! - **The observer partition** under `auto`: Valkyrie alone cut from a
//!   healthy master fails nothing over and the fence stays.
//!
//! Needs root and iptables; a missing piece fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::{Duration, Instant};

use support::cut::{Cut, CutProcess, connect_from_isolated_side, require_root, spawn_as_cut_user};
use support::observe::{Events, Probe, Writer, lost_writes};
use support::*;
use valkyrie_protocol::Frame;

const DOWN_AFTER_MS: u64 = 1000;
/// `write-fence-lag` (the default).
const LAG: Duration = Duration::from_secs(1);

pub(super) struct Setup {
    _tmp: TempDir,
    pub(super) master: Server,
    pub(super) replicas: Vec<Server>,
    pub(super) sentinel_port: u16,
    admin_port: u16,
    _daemon: CutProcess,
}

/// The last failover's bytes at risk and whether the figure is complete,
/// from `/metrics`.
fn at_risk(admin_port: u16) -> Option<(u64, bool)> {
    let (_, body) = support::http::http_get(admin_port, "/metrics").ok()?;
    let value = |name: &str| {
        body.lines()
            .find(|l| l.starts_with(&format!("{name}{{group=\"mymaster\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let bytes = value("valkyrie_failover_bytes_at_risk")?;
    let complete = value("valkyrie_failover_bytes_at_risk_complete")?;
    Some((bytes as u64, complete == 1.0))
}

pub(super) fn setup(tag: &str, fence: &str) -> Setup {
    require_root();
    let bin = valkey_server();
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let state = tmp.0.join("valkyrie");
    std::fs::create_dir_all(&state).unwrap();
    let (sentinel_port, admin_port) = (free_port(), free_port());
    let conf = state.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel_port}\nbind 127.0.0.1\ndir {dir}\nindex-port 0\nadmin-port {admin_port}\n\
             sentinel monitor mymaster 127.0.0.1 {pm} 2\n\
             sentinel down-after-milliseconds mymaster {DOWN_AFTER_MS}\n\
             sentinel failover-timeout mymaster 10000\n\
             sentinel write-fence mymaster {fence}\n",
            dir = state.display(),
            pm = master.port,
        ),
    )
    .unwrap();
    let daemon = spawn_as_cut_user(
        std::path::Path::new(env!("CARGO_BIN_EXE_valkyrie")),
        &[conf.to_str().unwrap()],
        &state,
        "valkyrie.log",
    );
    wait_until(Duration::from_secs(15), || {
        matches!(
            try_call(sentinel_port, &["SENTINEL", "REPLICAS", "mymaster"]),
            Ok(Frame::Array(r)) if r.len() == 2
        )
    });
    Setup {
        _tmp: tmp,
        master,
        replicas: vec![r1, r2],
        sentinel_port,
        admin_port,
        _daemon: daemon,
    }
}

/// `CONFIG GET <name>` on `port`.
fn config(port: u16, name: &str) -> Option<String> {
    match try_call(port, &["CONFIG", "GET", name]) {
        Ok(Frame::Array(kv)) if kv.len() == 2 => kv[1]
            .as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// Waits until Valkyrie has set `min-replicas-to-write` to `n` on `port`.
pub(super) fn fence_is(port: u16, n: &str) {
    wait_until(Duration::from_secs(15), || {
        config(port, "min-replicas-to-write").as_deref() == Some(n)
            && config(port, "repl-ping-replica-period").as_deref() == Some("1")
    });
}

pub(super) fn linked(port: u16) -> bool {
    info_field(port, "master_link_status").as_deref() == Some("up")
}

/// Moves the replicas to the side `Cut::isolate` cuts, and waits until
/// they are linked and the master fenced; returns their ports.
fn isolatable(s: &Setup) -> Vec<u16> {
    let ports: Vec<u16> = s.replicas.iter().map(|r| r.port).collect();
    for &p in &ports {
        connect_from_isolated_side(p);
    }
    wait_until(Duration::from_secs(15), || ports.iter().all(|&p| linked(p)));
    fence_is(s.master.port, "2");
    // The master still lists them where they listen.
    assert_eq!(
        master_field(s.sentinel_port, "num-slaves").as_deref(),
        Some("2")
    );
    ports
}

#[test]
fn an_isolated_master_stops_acknowledging_and_is_failed_over_within_seconds() {
    let s = setup("fence-isolated", "auto");
    let pm = s.master.port;
    let replica_ports = isolatable(&s);
    let events = Events::watch(s.sentinel_port);
    let sp = s.sentinel_port;
    let writer = Writer::start(Duration::from_millis(5), move || advertised_master(sp));
    wait_until(Duration::from_secs(5), || writer.acked() > 100);
    let probe = Probe::start(&[pm, replica_ports[0], replica_ports[1]]);
    std::thread::sleep(Duration::from_millis(200));

    let cut = Cut::isolate(pm);
    let t0 = Instant::now();
    wait_until(Duration::from_secs(25), || {
        t0.elapsed() >= Duration::from_secs(20)
    });
    cut.heal();
    // The old master is demoted and resyncs; every node follows the new
    // master.
    wait_until(Duration::from_secs(30), || {
        info_field(pm, "role").as_deref() == Some("slave") && linked(pm)
    });
    std::thread::sleep(Duration::from_millis(500));
    let oks = probe.stop();
    let acked = writer.stop_timed();

    let new = advertised_master(sp).unwrap();
    assert_ne!(new, pm, "no failover: {:?}", events.all());
    let plain: Vec<(u64, u16)> = acked.iter().map(|(i, p, _)| (*i, *p)).collect();
    let lost = lost_writes(&plain, new);
    let on_old_after: Vec<Duration> = acked
        .iter()
        .filter(|(_, p, at)| *p == pm && *at > t0)
        .map(|(_, _, at)| *at - t0)
        .collect();
    let old_last = on_old_after.last().copied().unwrap_or_default();
    let new_first = acked
        .iter()
        .find(|(_, p, at)| *p != pm && *at > t0)
        .map(|(_, _, at)| *at - t0)
        .expect("the new master never took a write");
    let probe_old_last = oks
        .iter()
        .filter(|(p, at)| *p == pm && *at > t0)
        .map(|(_, at)| *at)
        .max();
    let probe_new_first = oks
        .iter()
        .filter(|(p, at)| *p != pm && *at > t0)
        .map(|(_, at)| *at)
        .min()
        .expect("no other node ever took a probe write");
    eprintln!(
        "isolated 20 s: {} writes acknowledged by the isolated master after the cut (last at {:?}), \
         {lost} acknowledged writes lost, new master {new} took its first write at {new_first:?}; \
         probe: old master's last write at {:?}, another node's first at {:?}",
        on_old_after.len(),
        old_last,
        probe_old_last.map(|t| t - t0),
        probe_new_first - t0,
    );
    // The bound: the fence bites within its lag + 2 s of the last
    // acknowledgement (whole seconds, counted once a second).
    let bound = LAG + Duration::from_millis(2_500);
    assert!(
        old_last <= bound,
        "the isolated master acknowledged writes {old_last:?} after the cut (bound {bound:?})"
    );
    // Every lost write is one the isolated master took around the cut:
    // at most the replication's own delay before it (asynchronous), at
    // most the bound after it.
    let mut c = Client::connect(new).unwrap();
    for (i, port, at) in &acked {
        let held = c.call(&["GET", &format!("w{i}")]).unwrap() == Frame::bulk(i.to_string());
        if !held {
            assert_eq!(*port, pm, "write {i} lost from {port}");
            assert!(
                *at + Duration::from_millis(500) > t0 && *at <= t0 + bound,
                "write {i} lost, acknowledged {:?} from the cut",
                if *at > t0 { *at - t0 } else { t0 - *at }
            );
        }
    }
    assert!(
        probe_old_last.is_none_or(|t| t < probe_new_first),
        "two masters took writes: the old one at {:?}, the new one from {:?}",
        probe_old_last.map(|t| t - t0),
        probe_new_first - t0
    );
    // Without the fence, the witnesses hold a failover for 11 s.
    assert!(
        new_first < Duration::from_secs(10),
        "the new master took writes only {new_first:?} after the cut"
    );
    // The old master, seen again before its demotion, settled the figure:
    // it took writes the new master lacks.
    wait_until(Duration::from_secs(10), || {
        at_risk(s.admin_port).is_some_and(|(_, complete)| complete)
    });
    let (bytes, complete) = at_risk(s.admin_port).expect("no bytes-at-risk series");
    eprintln!("bytes at risk: {bytes} (complete: {complete})");
    assert!(
        complete && bytes > 0,
        "bytes at risk {bytes}, complete {complete}"
    );
}

#[test]
fn a_switchover_puts_nothing_at_risk() {
    let s = setup("fence-switchover", "auto");
    let pm = s.master.port;
    wait_until(Duration::from_secs(15), || {
        s.replicas.iter().all(|r| linked(r.port))
    });
    fence_is(pm, "2");
    let sp = s.sentinel_port;
    let writer = Writer::start(Duration::from_millis(5), move || advertised_master(sp));
    wait_until(Duration::from_secs(5), || writer.acked() > 100);
    assert_eq!(
        call(sp, &["SENTINEL", "FAILOVER", "mymaster"]),
        Frame::Simple("OK".into())
    );
    wait_until(Duration::from_secs(15), || {
        advertised_master(sp) != Some(pm)
    });
    let new = advertised_master(sp).unwrap();
    // The promoted master is fenced in turn once its replicas attach.
    fence_is(new, "2");
    let before = writer.acked();
    wait_until(Duration::from_secs(5), || writer.acked() > before + 50);
    let acked = writer.stop();
    assert_eq!(lost_writes(&acked, new), 0);
    wait_until(Duration::from_secs(5), || at_risk(s.admin_port).is_some());
    assert_eq!(at_risk(s.admin_port), Some((0, true)));
}

/// Zero loss needs the client's help: a write it counts only once
/// `WAIT 1` says a replica has it is never one the isolated master alone
/// took.
#[test]
fn an_isolated_master_loses_nothing_a_client_waited_for() {
    let s = setup("fence-wait", "auto");
    let pm = s.master.port;
    isolatable(&s);
    let sp = s.sentinel_port;
    let writer = Writer::start_replicated(Duration::from_millis(5), move || advertised_master(sp));
    wait_until(Duration::from_secs(5), || writer.acked() > 100);
    let cut = Cut::isolate(pm);
    let t0 = Instant::now();
    wait_until(Duration::from_secs(15), || {
        t0.elapsed() >= Duration::from_secs(8)
    });
    cut.heal();
    wait_until(Duration::from_secs(30), || {
        info_field(pm, "role").as_deref() == Some("slave") && linked(pm)
    });
    let new = advertised_master(sp).unwrap();
    assert_ne!(new, pm);
    let before = writer.acked_on(new);
    wait_until(Duration::from_secs(10), || {
        writer.acked_on(new) > before + 20
    });
    let acked = writer.stop();
    let lost = lost_writes(&acked, new);
    eprintln!(
        "WAIT writer: {} writes acknowledged by a replica, {lost} lost",
        acked.len()
    );
    assert_eq!(lost, 0);
}

#[test]
fn under_auto_a_replica_restart_pauses_writes_briefly_and_loses_nothing() {
    let mut s = setup("fence-restart", "auto");
    let pm = s.master.port;
    wait_until(Duration::from_secs(15), || {
        s.replicas.iter().all(|r| linked(r.port))
    });
    fence_is(pm, "2");
    verdict_fence(s.sentinel_port, "in_force", "2");
    let writer = Writer::start(Duration::from_millis(5), move || Some(pm));
    wait_until(Duration::from_secs(5), || writer.acked() > 100);
    // Away long enough for Valkyrie to see it gone and relax the fence,
    // then back: a restart that takes a while, or a resync.
    s.replicas[0].kill();
    fence_is(pm, "1");
    // The readiness verdict calls it a risk: 1 of the 2 a majority needs.
    verdict_fence(s.sentinel_port, "relaxed", "1");
    s.replicas[0].restart();
    wait_until(Duration::from_secs(20), || linked(s.replicas[0].port));
    fence_is(pm, "2");
    let before = writer.acked();
    wait_until(Duration::from_secs(5), || writer.acked() > before + 100);
    let acked = writer.stop_timed();
    let longest = acked.windows(2).map(|w| w[1].2 - w[0].2).max().unwrap();
    let plain: Vec<(u64, u16)> = acked.iter().map(|(i, p, _)| (*i, *p)).collect();
    assert_eq!(lost_writes(&plain, pm), 0);
    eprintln!("replica restart under auto: longest pause between writes {longest:?}");
    assert!(
        longest < Duration::from_secs(5),
        "writes stopped for {longest:?} while a replica restarted"
    );
}

/// Waits, bounded, for the readiness verdict on the Sentinel port to
/// show the fence `state` with `replicas` required.
fn verdict_fence(sentinel_port: u16, state: &str, replicas: &str) {
    wait_until(Duration::from_secs(10), || {
        crate::readiness::sentinel_verdict(sentinel_port).is_some_and(|v| {
            v.get("fence").map(String::as_str) == Some(state)
                && v.get("fence-replicas").map(String::as_str) == Some(replicas)
        })
    });
}

#[test]
fn strict_stops_writes_while_a_replica_is_away_and_loses_nothing() {
    let mut s = setup("fence-strict", "strict");
    let pm = s.master.port;
    wait_until(Duration::from_secs(15), || {
        s.replicas.iter().all(|r| linked(r.port))
    });
    fence_is(pm, "2");
    s.replicas[0].kill();
    // Refused, not acknowledged: NOREPLICAS.
    wait_until(
        Duration::from_secs(10),
        || matches!(try_call(pm, &["SET", "k", "v"]), Ok(Frame::Error(e)) if e.starts_with(b"NOREPLICAS")),
    );
    // Still refused after Valkyrie saw the replica go: strict never relaxes.
    std::thread::sleep(Duration::from_millis(3 * DOWN_AFTER_MS));
    assert_eq!(config(pm, "min-replicas-to-write").as_deref(), Some("2"));
    assert!(matches!(
        try_call(pm, &["SET", "k", "v"]),
        Ok(Frame::Error(_))
    ));
    s.replicas[0].restart();
    wait_until(Duration::from_secs(20), || {
        matches!(try_call(pm, &["SET", "k", "v"]), Ok(Frame::Simple(_)))
    });
}

#[test]
fn under_auto_the_observer_partition_fails_nothing_over() {
    let s = setup("fence-observer", "auto");
    let pm = s.master.port;
    wait_until(Duration::from_secs(15), || {
        s.replicas.iter().all(|r| linked(r.port))
    });
    fence_is(pm, "2");
    let events = Events::watch(s.sentinel_port);
    let writer = Writer::start(Duration::from_millis(5), move || Some(pm));
    wait_until(Duration::from_secs(5), || writer.acked() > 100);
    let cut = Cut::new(&[pm]);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(8 * DOWN_AFTER_MS) {
        assert_eq!(advertised_master(s.sentinel_port), Some(pm));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        events.saw("+sdown", "master mymaster"),
        "{:?}",
        events.all()
    );
    cut.heal();
    let acked = writer.stop();
    assert!(!events.saw("+switch-master", ""), "{:?}", events.all());
    assert_eq!(lost_writes(&acked, pm), 0);
    assert_eq!(config(pm, "min-replicas-to-write").as_deref(), Some("2"));
    assert!(
        acked.len() > 500,
        "writes stopped during the cut: {}",
        acked.len()
    );
}
