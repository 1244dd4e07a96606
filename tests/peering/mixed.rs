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

use crate::support;

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
    let p = d.promotions(5 * S);
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

/// Sentinel `i`'s id.
fn id(d: &Deployment, i: usize) -> String {
    d.sentinels[i].myid.clone()
}

/// Panics with the message and every sentinel's log tail.
fn fail(d: &Deployment, msg: impl std::fmt::Display) -> ! {
    let mut logs = String::new();
    for s in d.sentinels.iter().filter(|s| s.is_valkyrie()) {
        logs.push_str(&format!(
            "--- {} log ---\n{}\n",
            s.label(),
            d.log_tail(s.idx, 25)
        ));
    }
    panic!("{msg}\n{logs}");
}

trait OrFail<T> {
    fn or_fail(self, d: &Deployment) -> T;
}

impl<T> OrFail<T> for Result<T, String> {
    fn or_fail(self, d: &Deployment) -> T {
        self.unwrap_or_else(|e| fail(d, e))
    }
}

/// M1: S1, S2 and V discover each other; a restarted V keeps its id, its
/// peers, and is not announced again.
#[test]
fn m1_discovery_and_restart_keep_one_identity() {
    let _serial = serial();
    let mut d = Deployment::start("peer-m1", &[Spec::real(), Spec::real(), Spec::valkyrie()]);
    d.check_i7(20 * S).or_fail(&d);
    let v = id(&d, 2);
    d.kill_sentinel(2);
    let restarted = d.now();
    assert_eq!(d.start_sentinel(2), v, "V's id after a restart");
    // Its peers come back from its state file, before any hello.
    let peers = d.peers_of(2).or_fail(&d);
    assert_eq!(
        peers.len(),
        2,
        "V's peers right after its restart: {peers:?}"
    );
    // Two hello periods after the restart: V heard again, nothing new.
    poll(10 * S, || {
        let n = d
            .hellos()
            .iter()
            .filter(|h| h.runid == v && h.at > restarted && h.node == d.nodes[0].port)
            .count();
        if n >= 2 {
            Ok(())
        } else {
            Err(format!("{n} hellos of V since its restart"))
        }
    })
    .or_fail(&d);
    d.check_i7(10 * S).or_fail(&d);
    for i in [0, 1] {
        let again: Vec<_> = d
            .find(i, "+sentinel", &format!("sentinel {v}"))
            .into_iter()
            .filter(|e| e.at > restarted)
            .collect();
        assert!(
            again.is_empty(),
            "{} announced V again: {again:?}",
            d.sentinels[i].label()
        );
        let invalid = d.find(i, "+sentinel-invalid-addr", "");
        assert!(
            invalid.is_empty(),
            "{}: {invalid:?}",
            d.sentinels[i].label()
        );
    }
    d.check_records().or_fail(&d);
}

/// M2: a real sentinel leads (V's down-after is 10 s): V grants its vote,
/// adopts through the leader's hello and promotes nothing.
#[test]
fn m2_real_sentinel_leads_valkyrie_votes_and_adopts() {
    let _serial = serial();
    let mut d = Deployment::start(
        "peer-m2",
        &[
            Spec::real(),
            Spec::real(),
            Spec::valkyrie().down_after(10_000),
        ],
    );
    d.check_i7(20 * S).or_fail(&d);
    let w = writer(&d);
    let old = d.nodes[0].port;
    d.kill_node(0);
    let (master, epoch) = d.converged(30 * S).or_fail(&d);
    assert_ne!(master, old);
    let leader = d
        .elections()
        .iter()
        .filter(|e| e.epoch == Some(epoch))
        .map(|e| e.sentinel)
        .next()
        .unwrap_or_else(|| {
            fail(
                &d,
                format!("no leader of epoch {epoch}: {:?}", d.elections()),
            )
        });
    assert!(leader < 2, "the leader is a real sentinel");
    let lid = id(&d, leader);
    let voted = d.find(2, "+vote-for-leader", &format!("{lid} {epoch}"));
    if voted.is_empty() {
        fail(
            &d,
            format!("V did not vote for {lid} in {epoch}: {:?}", d.events_of(2)),
        );
    }
    let from = d.find(2, "+config-update-from", &format!("sentinel {lid}"));
    if from.is_empty() {
        fail(
            &d,
            format!("V did not adopt from {lid}: {:?}", d.events_of(2)),
        );
    }
    for ch in ["+try-failover", "+elected-leader"] {
        assert!(d.find(2, ch, "").is_empty(), "V: {ch}");
    }
    // The failover the real sentinel ran has its bytes at risk on V.
    let line = format!("+switch-master epoch {epoch}: at least ");
    poll(10 * S, || {
        let log = std::fs::read_to_string(&d.sentinels[2].log).map_err(|e| e.to_string())?;
        log.lines()
            .find(|l| l.contains(&line) && l.contains(" bytes at risk: "))
            .map(|_| ())
            .ok_or_else(|| "no bytes at risk in V's log".to_string())
    })
    .or_fail(&d);
    assert_eq!(
        d.find(2, "+switch-master", "").len(),
        1,
        "one +switch-master on V"
    );
    let sent = d.sent_by(2);
    assert!(sent.is_empty(), "V sent replication commands: {sent:?}");
    let p = d.promotions(5 * S);
    assert_eq!(p.len(), 1, "one promotion: {p:?}");
    d.check_i5(30 * S).or_fail(&d);
    d.check_records().or_fail(&d);
    w.check_i8(master).or_fail(&d);
}

/// M3: V leads (quorum 1, down-after 1 s; S1, S2 quorum 2, down-after
/// 10 s): S1 and S2 vote for V, V promotes once, S1 and S2 adopt V's
/// configuration; the old master, restarted, is converted.
#[test]
fn m3_valkyrie_leads_real_sentinels_vote_and_adopt() {
    let _serial = serial();
    let slow = Spec::real().down_after(10_000);
    let mut d = Deployment::start("peer-m3", &[slow.clone(), slow, Spec::valkyrie().quorum(1)]);
    d.check_i7(20 * S).or_fail(&d);
    let w = writer(&d);
    let old = d.nodes[0].port;
    d.kill_node(0);
    d.wait_event(2, "+elected-leader", "", 20 * S).or_fail(&d);
    let (master, epoch) = d.converged(20 * S).or_fail(&d);
    assert_ne!(master, old);
    let v = id(&d, 2);
    let odown = d.find(2, "+odown", "master");
    assert!(
        odown
            .iter()
            .any(|e| e.payload.contains("#quorum") && e.payload.ends_with("/1")),
        "V's +odown: {odown:?}"
    );
    assert!(!d.find(2, "+try-failover", "").is_empty());
    assert!(
        d.elections()
            .iter()
            .any(|e| e.sentinel == 2 && e.epoch == Some(epoch)),
        "V elected in {epoch}: {:?}",
        d.elections()
    );
    for i in [0, 1] {
        let label = d.sentinels[i].label();
        let voted = d.find(i, "+vote-for-leader", &format!("{v} {epoch}"));
        assert!(!voted.is_empty(), "{label} did not vote for V in {epoch}");
        assert!(
            d.find(i, "+try-failover", "").is_empty(),
            "{label} tried a failover"
        );
        let from = d.find(i, "+config-update-from", &format!("sentinel {v}"));
        assert!(!from.is_empty(), "{label} did not adopt V's configuration");
    }
    let p = d.promotions(5 * S);
    assert_eq!(p.len(), 1, "one promotion: {p:?}");
    assert_eq!(d.sender(&p[0]), Some(2), "V promoted: {p:?}");
    assert!(p[0].args[0].eq_ignore_ascii_case("replicaof"), "{p:?}");
    // The old master comes back empty and is made a replica.
    d.restart_node(0);
    let m = d.check_i5(40 * S).or_fail(&d);
    assert_eq!(m, master);
    d.check_records().or_fail(&d);
    w.check_i8(master).or_fail(&d);
}

/// The cut scenario of M5 with any mix: sentinel `cut` is isolated from
/// every data node and every peer for 30 s, the master is killed during
/// the cut; the others fail over, the cut one does nothing and adopts
/// after the cut heals.
fn isolated_stays_passive(tag: &str, specs: &[Spec], cut: usize) {
    let mut d = Deployment::start(tag, specs);
    d.check_i7(20 * S).or_fail(&d);
    let others: Vec<usize> = (0..specs.len()).filter(|&i| i != cut).collect();
    let rules = d.isolate(cut);
    let cut_at = d.now();
    d.wait_event(cut, "+sdown", "master", 10 * S).or_fail(&d);
    let old = d.nodes[0].port;
    d.kill_node(0);
    let (master, epoch) = d.converged_among(&others, 40 * S).or_fail(&d);
    assert_ne!(master, old);
    while d.now() < cut_at + 30 * S {
        std::thread::sleep(Duration::from_millis(100));
    }
    let label = d.sentinels[cut].label();
    for other in &others {
        let peer = format!("sentinel {}", id(&d, *other));
        assert!(
            !d.find(cut, "+sdown", &peer).is_empty(),
            "{label}: no +sdown for {peer}"
        );
    }
    rules.heal();
    poll(20 * S, || match (d.advertised(cut), d.config_epoch(cut)) {
        (Some(m), Some(e)) if m == master && e == epoch => Ok(()),
        other => Err(format!(
            "{label} after the cut: {other:?}, others: ({master}, {epoch})"
        )),
    })
    .or_fail(&d);
    for ch in ["+odown", "+elected-leader"] {
        let seen = d.find(cut, ch, "");
        assert!(seen.is_empty(), "{label}: {seen:?}");
    }
    let sent = d.sent_by(cut);
    assert!(
        sent.is_empty(),
        "{label} sent replication commands: {sent:?}"
    );
    d.check_i5(30 * S).or_fail(&d);
    d.check_i7(20 * S).or_fail(&d);
    d.check_records().or_fail(&d);
}

/// The cut of M5 on three real sentinels: proves the cut helper.
#[test]
fn three_real_sentinels_one_isolated() {
    let _serial = serial();
    isolated_stays_passive(
        "peer-cut-real",
        &[Spec::real(), Spec::real(), Spec::real()],
        2,
    );
}

/// M5: a partition isolates V while the master dies.
#[test]
fn m5_isolated_valkyrie_stays_passive_then_adopts() {
    let _serial = serial();
    isolated_stays_passive(
        "peer-m5",
        &[Spec::real(), Spec::real(), Spec::valkyrie()],
        2,
    );
}
