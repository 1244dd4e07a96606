//! Partition safety with real network cuts: real valkey-server master and
//! replicas, a writer connected to the master, and Valkyrie (a separate
//! process, running as its own uid) whose packets to chosen ports are
//! dropped by `iptables` (tests/support/cut.rs). The writer, the master
//! and its replicas keep talking to each other throughout.
//!
//! - Only Valkyrie's path to the master is cut, for 8 × down-after: no
//!   promotion, the master unchanged on the Sentinel and index ports, and
//!   every acknowledged write still on the master after the path heals;
//!   the readiness verdict says the replicas vouch for the master.
//! - Valkyrie cut from the master and every replica: no promotion either;
//!   the verdict says no witness is reachable.
//! - Valkyrie cut from the master while the master is really hung
//!   (SIGSTOP): the replicas stop hearing from it, and it is failed over.
//!
//! Needs root and iptables (scripts/test installs iptables; CI runs as
//! root). A missing piece fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::cut::{Cut, CutProcess, require_root, spawn_as_cut_user};
use support::observe::{Events, Writer, lost_writes};
use support::*;
use valkyrie_protocol::Frame;

const DOWN_AFTER_MS: u64 = 1000;

struct Setup {
    _tmp: TempDir,
    master: Server,
    replicas: Vec<Server>,
    sentinel_port: u16,
    index_port: u16,
    _daemon: CutProcess,
}

fn setup(tag: &str) -> Setup {
    require_root();
    let bin = valkey_server();
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let state = tmp.0.join("valkyrie");
    std::fs::create_dir_all(&state).unwrap();
    let (sentinel_port, index_port) = (free_port(), free_port());
    let conf = state.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel_port}\nbind 127.0.0.1\ndir {dir}\nindex-port {index_port}\nadmin-port 0\n\
             sentinel monitor mymaster 127.0.0.1 {pm} 2\n\
             sentinel down-after-milliseconds mymaster {DOWN_AFTER_MS}\n\
             sentinel failover-timeout mymaster 10000\n",
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
    // Monitoring: both replicas known with their INFO, master up.
    wait_until(Duration::from_secs(15), || {
        matches!(
            try_call(sentinel_port, &["SENTINEL", "REPLICAS", "mymaster"]),
            Ok(Frame::Array(r)) if r.len() == 2 && replicas_linked(sentinel_port)
        )
    });
    Setup {
        _tmp: tmp,
        master,
        replicas: vec![r1, r2],
        sentinel_port,
        index_port,
        _daemon: daemon,
    }
}

/// Both replicas report an up link to the master, as Valkyrie sees them.
fn replicas_linked(port: u16) -> bool {
    let Ok(Frame::Array(rs)) = try_call(port, &["SENTINEL", "REPLICAS", "mymaster"]) else {
        return false;
    };
    rs.iter().all(|r| match r {
        Frame::Array(kv) => kv.chunks(2).any(|p| {
            p[0].as_bytes().map(|b| &b[..]) == Some(&b"master-link-status"[..])
                && p[1].as_bytes().map(|b| &b[..]) == Some(&b"ok"[..])
        }),
        _ => false,
    })
}

/// The index port's snapshot of `mymaster`: its epoch and master port.
fn index_view(port: u16) -> (u64, u16) {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut w = stream.try_clone().unwrap();
    w.write_all(b"HELLO 1\nWATCH mymaster\n").unwrap();
    let mut epoch = None;
    for line in BufReader::new(stream).lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["SNAPSHOT", "mymaster", e, ..] => {
                epoch = e.strip_prefix("epoch=").and_then(|e| e.parse().ok());
            }
            ["MASTER", _, p, ..] => return (epoch.unwrap(), p.parse().unwrap()),
            _ => {}
        }
    }
    panic!("no MASTER line from the index port");
}

/// Cuts Valkyrie from `ports` for 8 × down-after while a writer writes to
/// the master, checking every 100 ms that nothing was promoted; heals;
/// waits until Valkyrie sees the master up again; then checks that the
/// master is unchanged everywhere and no acknowledged write was lost.
///
/// While cut, the readiness verdict on the Sentinel port (asked by the
/// test, which is not cut) must come to say that the witnesses veto, in
/// `veto`'s words.
fn cut_and_expect_no_failover(s: &Setup, ports: &[u16], veto: &str) {
    let pm = s.master.port;
    let events = Events::watch(s.sentinel_port);
    let (epoch0, master0) = index_view(s.index_port);
    assert_eq!(master0, pm);
    let writer = Writer::start(Duration::from_millis(2), move || Some(pm));
    wait_until(Duration::from_secs(5), || writer.acked() > 50);

    let cut = Cut::new(ports);
    let start = Instant::now();
    let mut vetoed = None;
    while start.elapsed() < Duration::from_millis(8 * DOWN_AFTER_MS) {
        assert_eq!(
            advertised_master(s.sentinel_port),
            Some(pm),
            "master switched during the cut"
        );
        if let Some(v) = crate::readiness::sentinel_verdict(s.sentinel_port)
            && v.get("reason").map(String::as_str) == Some("witness_veto")
        {
            vetoed = v.get("text").cloned();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let vetoed = vetoed.expect("the verdict never said the witnesses veto");
    assert!(
        vetoed.starts_with("vetoed: ") && vetoed.contains(veto),
        "{vetoed}"
    );
    // The cut was real: Valkyrie lost the master.
    assert!(
        events.saw("+sdown", "master mymaster"),
        "the cut never took effect: {:?}",
        events.all()
    );
    cut.heal();
    wait_until(Duration::from_secs(15), || {
        !master_field(s.sentinel_port, "flags")
            .unwrap_or_default()
            .contains("s_down")
            && replicas_linked(s.sentinel_port)
    });
    let acked = writer.stop();

    for (channel, _) in events.all() {
        assert!(
            !matches!(
                channel.as_str(),
                "+odown"
                    | "+try-failover"
                    | "+selected-slave"
                    | "+promoted-slave"
                    | "+switch-master"
            ),
            "failover started on a healthy master: {:?}",
            events.all()
        );
    }
    assert_eq!(advertised_master(s.sentinel_port), Some(pm));
    assert_eq!(index_view(s.index_port), (epoch0, pm));
    assert_eq!(info_field(pm, "role").as_deref(), Some("master"));
    for r in &s.replicas {
        assert_eq!(info_field(r.port, "role").as_deref(), Some("slave"));
    }
    assert!(
        acked.len() > 1000,
        "the writer wrote too little: {}",
        acked.len()
    );
    assert_eq!(lost_writes(&acked, pm), 0, "acknowledged writes lost");
    eprintln!(
        "{} writes acknowledged, none lost; events: {:?}",
        acked.len(),
        events.all()
    );
}

#[test]
fn cut_from_the_master_only_fails_nothing_over() {
    let s = setup("cut-master");
    cut_and_expect_no_failover(&s, &[s.master.port], "2 of 2 replicas still hear from it");
}

#[test]
fn cut_from_the_master_and_every_replica_fails_nothing_over() {
    let s = setup("cut-all");
    let ports: Vec<u16> = std::iter::once(s.master.port)
        .chain(s.replicas.iter().map(|r| r.port))
        .collect();
    cut_and_expect_no_failover(&s, &ports, "and so is every replica");
}

#[test]
fn cut_from_a_master_that_is_really_hung_fails_it_over() {
    let s = setup("cut-hung");
    let pm = s.master.port;
    let events = Events::watch(s.sentinel_port);
    let cut = Cut::new(&[pm]);
    s.master.signal("STOP");
    // The replicas stop hearing from the hung master; once their last I/O
    // from it is older than a live master's ping period, they no longer
    // vouch for it.
    wait_until(Duration::from_secs(40), || {
        advertised_master(s.sentinel_port).is_some_and(|p| p != pm)
    });
    let new_master = advertised_master(s.sentinel_port).unwrap();
    assert!(s.replicas.iter().any(|r| r.port == new_master));
    // The event reaches the watcher's own connection a moment after the
    // port answers with the new master: wait for it, bounded.
    wait_until(Duration::from_secs(10), || {
        events.saw("+switch-master", "mymaster")
    });
    wait_until(Duration::from_secs(10), || {
        info_field(new_master, "role").as_deref() == Some("master")
    });
    assert_eq!(index_view(s.index_port).1, new_master);
    s.master.signal("CONT");
    cut.heal();
    // Back, the old master is demoted.
    wait_until(Duration::from_secs(15), || {
        info_field(pm, "role").as_deref() == Some("slave")
    });
}

/// Two of three masters unreachable at once: TILT. The third group's
/// master is fine, and its readiness verdict says TILT holds its failover
/// back (the Sentinel port, asked by the test, which is not cut).
#[test]
fn tilt_is_the_verdict_of_a_healthy_group_while_most_masters_are_unreachable() {
    require_root();
    let bin = valkey_server();
    let tmp = TempDir::new("cut-tilt");
    let masters: Vec<Server> = (0..3)
        .map(|_| Server::start(&bin, &tmp.0, free_port(), None))
        .collect();
    let state = tmp.0.join("valkyrie");
    std::fs::create_dir_all(&state).unwrap();
    let sentinel_port = free_port();
    let mut conf = format!(
        "port {sentinel_port}\nbind 127.0.0.1\ndir {}\nindex-port 0\nadmin-port 0\n",
        state.display()
    );
    for (i, m) in masters.iter().enumerate() {
        conf.push_str(&format!(
            "sentinel monitor g{i} 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds g{i} {DOWN_AFTER_MS}\n",
            m.port
        ));
    }
    let path = state.join("sentinel.conf");
    std::fs::write(&path, conf).unwrap();
    let _daemon = spawn_as_cut_user(
        std::path::Path::new(env!("CARGO_BIN_EXE_valkyrie")),
        &[path.to_str().unwrap()],
        &state,
        "valkyrie.log",
    );
    wait_until(Duration::from_secs(15), || {
        crate::readiness::group_verdict(sentinel_port, "g2")
            .is_some_and(|v| v.contains_key("reason"))
    });
    let _cut = Cut::new(&[masters[0].port, masters[1].port]);
    let mut verdict = None;
    wait_until(Duration::from_secs(30), || {
        verdict = crate::readiness::group_verdict(sentinel_port, "g2");
        verdict
            .as_ref()
            .and_then(|v| v.get("reason"))
            .map(String::as_str)
            == Some("tilt")
    });
    let v = verdict.unwrap();
    assert_eq!(v.get("tilt").map(String::as_str), Some("1"));
    let text = &v["text"];
    assert!(text.starts_with("TILT for "), "{text}");
}
