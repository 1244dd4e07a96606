//! The peer trust rules with real valkey-sentinel 8.0 peers
//! (`docs/security.md`, "Peers"): honest real sentinels keep working — one
//! that joins late becomes a voter, one that moves to another port is
//! followed — and what a holder of the data nodes' hello channel or a
//! client of the Sentinel port forges in a real peer's name moves nothing:
//! an inflated config epoch, a held configuration renewed every second, a
//! question posing as the peer's "down" report.
//!
//! Needs root and valkey-server/valkey-sentinel, as the other mixed
//! deployments; the tests of this file run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::peers::{Deployment, Spec, poll, serial};
use support::sentinel::RealSentinel;
use support::wire::Conn;
use support::{advertised_master, master_field};

const S: Duration = Duration::from_secs(1);

/// Every sentinel of `d` lists the others.
fn discovered(d: &Deployment) {
    d.check_i7(30 * S)
        .unwrap_or_else(|e| panic!("{e}\n{}", d.log_tail(0, 30)));
}

/// The ports Valkyrie (sentinel 0) lists for `runid`, with its flags.
fn listed(d: &Deployment, runid: &str) -> Option<(String, String)> {
    d.peers_of(0)
        .ok()?
        .into_iter()
        .find(|p| p.get("runid").map(String::as_str) == Some(runid))
        .map(|p| (p["port"].clone(), p["flags"].clone()))
}

/// A hello on the master's channel, as any client of it may publish.
fn forge(d: &Deployment, payload: &str) {
    let mut c = Conn::connect(d.nodes[0].port);
    c.ask(&["PUBLISH", "__sentinel__:hello", payload]);
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn a_real_sentinel_that_joins_late_becomes_a_voter() {
    let _serial = serial();
    let mut d = Deployment::start("trust-late", &[Spec::valkyrie(), Spec::real()]);
    discovered(&d);
    let master = d.nodes[0].port;
    // A third sentinel starts long after the others know each other.
    let dir = d.tmp.0.join("late");
    std::fs::create_dir_all(&dir).unwrap();
    let late = RealSentinel::start(
        &dir,
        &format!(
            "sentinel monitor mymaster 127.0.0.1 {master} 2\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 6000\n"
        ),
    );
    let late_id = String::from_utf8(Conn::connect(late.port).ask(&["SENTINEL", "MYID"]))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    poll(20 * S, || match listed(&d, &late_id) {
        Some((port, flags)) if port == late.port.to_string() && !flags.contains("disconnected") => {
            Ok(())
        }
        other => Err(format!("{other:?}")),
    })
    .unwrap_or_else(|e| panic!("the late sentinel is not a voter: {e}"));
    assert_eq!(
        master_field(d.sentinels[0].port, "num-other-sentinels").as_deref(),
        Some("2")
    );
    // And the three fail over together.
    d.kill_node(0);
    let (new, _) = d.converged(40 * S).unwrap();
    assert_ne!(new, master);
    poll(20 * S, || {
        if advertised_master(late.port) == Some(new) {
            Ok(())
        } else {
            Err(format!("{:?}", advertised_master(late.port)))
        }
    })
    .unwrap();
    // One promotion, whoever made it (the late sentinel is not one of the
    // deployment's, so its records cannot name it: no `check_records`).
    let p = d.promotions(5 * S);
    assert_eq!(p.len(), 1, "exactly one promotion: {p:?}");
    assert_eq!(p[0].node, new);
}

#[test]
fn a_real_sentinel_that_moves_is_followed() {
    let _serial = serial();
    let mut d = Deployment::start(
        "trust-move",
        &[Spec::valkyrie(), Spec::real(), Spec::real()],
    );
    discovered(&d);
    let id = d.sentinels[1].myid.clone();
    let port = d.move_sentinel(1);
    poll(30 * S, || match listed(&d, &id) {
        Some((p, flags)) if p == port.to_string() && !flags.contains("disconnected") => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .unwrap_or_else(|e| {
        panic!(
            "Valkyrie did not follow the move: {e}\n{}",
            d.log_tail(0, 30)
        )
    });
    assert_eq!(
        master_field(d.sentinels[0].port, "num-other-sentinels").as_deref(),
        Some("2")
    );
    let old = d.nodes[0].port;
    d.kill_node(0);
    let (new, _) = d.converged(40 * S).unwrap();
    assert_ne!(new, old);
    // One promotion. No `check_records`: the moved sentinel's event tap
    // stayed on its old port, so its election is not recorded and a
    // promotion of its would look unelected.
    let p = d.promotions(5 * S);
    assert_eq!(p.len(), 1, "exactly one promotion: {p:?}");
    assert_eq!(p[0].node, new);
}

#[test]
fn forgeries_in_a_real_peers_name_move_nothing() {
    let _serial = serial();
    let mut d = Deployment::start("trust-forged", &[Spec::valkyrie(), Spec::real()]);
    discovered(&d);
    let (real_id, real_port) = (d.sentinels[1].myid.clone(), d.sentinels[1].port);
    let master = d.nodes[0].port;
    let replica = d.nodes[1].port;

    // An inflated config epoch (above the sender's current epoch).
    let big = 1u64 << 32;
    forge(
        &d,
        &format!("127.0.0.1,{real_port},{real_id},0,mymaster,127.0.0.1,{master},{big}"),
    );
    std::thread::sleep(S);
    assert_eq!(d.config_epoch(0), Some(0));

    // A configuration naming a replica, repeated every second in the real
    // peer's name with ever higher epochs: it holds nothing back once the
    // replica says what it is.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forger = {
        let stop = stop.clone();
        let chan = d.nodes[1].port;
        let real_id = real_id.clone();
        std::thread::spawn(move || {
            let mut epoch = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let payload = format!(
                    "127.0.0.1,{real_port},{real_id},{epoch},mymaster,127.0.0.1,{replica},{epoch}"
                );
                let mut c = Conn::connect(chan);
                c.ask(&["PUBLISH", "__sentinel__:hello", &payload]);
                epoch += 1;
                std::thread::sleep(S);
            }
        })
    };
    d.kill_node(0);
    let converged = d.converged(30 * S);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    forger.join().unwrap();
    let (new, epoch) = converged.unwrap_or_else(|e| panic!("{e}\n{}", d.log_tail(0, 40)));
    assert_ne!(new, master);
    assert!(epoch < big, "config epoch {epoch}");

    // A question posing as the real peer's "down" report while the real
    // peer is stopped (it enters TILT when it wakes; the test ends
    // first): one observer is no quorum of 2.
    let pid = d.sentinels[1].pid().unwrap();
    signal(pid, "-STOP");
    let since = d.now();
    let index = d.nodes.iter().position(|n| n.port == new).unwrap();
    d.kill_node(index);
    let vp = d.sentinels[0].port;
    let mut q = Conn::connect(vp);
    q.ask(&[
        "CLIENT",
        "SETNAME",
        &format!("sentinel-{}-cmd", &real_id[..8]),
    ]);
    let until = Instant::now() + 5 * S;
    while Instant::now() < until {
        q.ask(&[
            "SENTINEL",
            "is-master-down-by-addr",
            "127.0.0.1",
            &new.to_string(),
            "0",
            "*",
        ]);
        std::thread::sleep(Duration::from_millis(100));
    }
    let odown: Vec<_> = d
        .find(0, "+odown", "")
        .into_iter()
        .filter(|e| e.at > since)
        .collect();
    signal(pid, "-CONT");
    assert!(
        odown.is_empty(),
        "a forged question made quorum (old master {master}, new {new}, since {since:?}): {odown:?}"
    );
    // No `check_records`: the forged hellos on the data nodes are, by
    // design, in the real peer's name, and would be counted as its own.
}
