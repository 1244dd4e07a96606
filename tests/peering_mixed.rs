//! Mixed deployments (sentinel-peering.md §11.4): real valkey-sentinel
//! 8.0.1 processes and a Valkyrie monitoring the same master and two
//! replicas, observed through tests/support/peers.rs (events, hellos, the
//! data nodes' replication commands, pollers) and checked against the
//! invariants of §11.2.
//!
//! - `three_real_sentinels_baseline`: three real sentinels alone — proves
//!   the harness and its invariant checks on Sentinel itself.
//! - M1 discovery, M2 a real sentinel leads, M3 Valkyrie leads, M5 a cut
//!   isolates Valkyrie while the master dies.
//!
//! Needs root (every sentinel runs as a uid of its own; cuts use
//! iptables) and valkey-server/valkey-sentinel (scripts/test installs
//! them). The tests of this file run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod support;

use std::time::Duration;

use support::peers::{AckWriter, Deployment, Spec, poll, serial};

const S: Duration = Duration::from_secs(1);

/// Discovery: every sentinel lists the others.
fn discovered(d: &Deployment) {
    d.check_i7(20 * S)
        .unwrap_or_else(|e| panic!("{e}\n{}", d.log_tail(0, 20)));
}

/// A writer through the sentinels, once it has some acknowledged writes.
fn writer(d: &Deployment) -> AckWriter {
    let w = AckWriter::start(d.sentinels.iter().map(|s| s.port).collect(), 2);
    poll(10 * S, || {
        if w.acked() >= 10 {
            Ok(())
        } else {
            Err(format!("{w:?}"))
        }
    })
    .unwrap();
    w
}

/// The promotions recorded so far, once at least one is.
fn promotions(d: &Deployment) -> Vec<support::peers::Sent> {
    poll(5 * S, || {
        let p: Vec<_> = d.sent().into_iter().filter(|s| s.is_promotion()).collect();
        if p.is_empty() {
            Err("no promotion recorded".into())
        } else {
            Ok(p)
        }
    })
    .unwrap()
}

#[test]
fn three_real_sentinels_baseline() {
    let _serial = serial();
    let mut d = Deployment::start("peer-baseline", &[Spec::real(), Spec::real(), Spec::real()]);
    discovered(&d);
    let w = writer(&d);
    let old = d.nodes[0].port;
    d.kill_node(0);
    let (master, epoch) = d.converged(40 * S).unwrap();
    assert_ne!(master, old);
    assert!(epoch >= 1, "config epoch {epoch}");
    let p = promotions(&d);
    assert_eq!(p.len(), 1, "exactly one promotion: {p:?}");
    assert_eq!(p[0].node, master, "the promoted replica is the master");
    let leader = d.sender(&p[0]).expect("promotion attributed to a sentinel");
    assert_eq!(
        d.elections()
            .iter()
            .filter(|e| e.sentinel == leader && e.epoch == Some(epoch))
            .count(),
        1,
        "the promoter was elected in epoch {epoch}: {:?}",
        d.elections()
    );
    d.check_i5(30 * S).unwrap();
    d.check_records().unwrap();
    w.check_i8(master).unwrap();
}
