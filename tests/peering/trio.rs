//! Three Valkyries (quorum 2, down-after 1000, failover-timeout 6000)
//! monitoring one master and two replicas as peers (sentinel-peering.md
//! §11), observed through tests/support/peers.rs:
//!
//! - (a) the master is killed: exactly one promotion, all three agree on
//!   the master and the config epoch;
//! - (b) the leader is killed right after its `REPLICAOF NO ONE`: the
//!   failover completes once, in that epoch or a later one;
//! - (c) one Valkyrie cut from the others and from the master while the
//!   master dies: it neither promotes nor wins; the other two fail over;
//!   it adopts after the cut heals;
//! - (d) a Valkyrie restarted from a state file the others moved past
//!   adopts the new configuration and sends nothing before it has;
//! - (e) planned switchovers asked of each in turn: the two that did not
//!   lead name the new master within half an INFO period.
//!
//! Needs root (each daemon runs as a uid of its own; cuts use iptables)
//! and valkey-server (scripts/test installs it). The tests of this file
//! run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::time::Duration;

use support::peers::{AckWriter, Deployment, Sent, Spec, poll, serial};

const S: Duration = Duration::from_secs(1);

fn trio(tag: &str) -> Deployment {
    let d = Deployment::start(tag, &[Spec::valkyrie(), Spec::valkyrie(), Spec::valkyrie()]);
    d.check_i7(20 * S).unwrap_or_else(|e| {
        panic!(
            "discovery: {e}\n--- valkyrie#0 log ---\n{}",
            d.log_tail(0, 30)
        )
    });
    d
}

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

/// Panics with the message, the records and the daemons' log tails.
fn fail(d: &Deployment, msg: impl std::fmt::Display) -> ! {
    let mut logs = String::new();
    for s in &d.sentinels {
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

#[test]
fn a_master_killed_one_promotion_all_agree() {
    let _serial = serial();
    let mut d = trio("peer-trio-a");
    let w = writer(&d);
    let old = d.nodes[0].port;
    d.kill_node(0);
    let (master, epoch) = d.converged(40 * S).or_fail(&d);
    assert_ne!(master, old);
    assert!(epoch >= 1, "config epoch {epoch}");
    for i in 0..3 {
        assert_eq!(d.advertised(i), Some(master), "{}", d.sentinels[i].label());
        assert_eq!(d.config_epoch(i), Some(epoch), "{}", d.sentinels[i].label());
    }
    let p = d.promotions(5 * S);
    if p.len() != 1 {
        fail(&d, format!("expected exactly one promotion, got {p:?}"));
    }
    assert_eq!(p[0].node, master);
    let leader = d
        .sender(&p[0])
        .unwrap_or_else(|| fail(&d, format!("unattributed {p:?}")));
    assert!(
        d.elections()
            .iter()
            .any(|e| e.sentinel == leader && e.epoch == Some(epoch)),
        "the promoter was elected in epoch {epoch}: {:?}",
        d.elections()
    );
    d.check_i5(30 * S).or_fail(&d);
    d.check_records().or_fail(&d);
    w.check_i8(master).or_fail(&d);
}

#[test]
fn b_leader_killed_after_promotion_completes_once() {
    let _serial = serial();
    let mut d = trio("peer-trio-b");
    let w = writer(&d);
    // The leader dies the moment it reports having sent REPLICAOF NO ONE
    // (`+failover-state-wait-promotion`): SIGKILL from the watcher.
    let wire = d.kill_on_event(&[0, 1, 2], "+failover-state-wait-promotion");
    d.kill_node(0);
    let (leader, killed_at) = wire.wait(30 * S).or_fail(&d);
    d.kill_sentinel(leader);
    let epoch0 = d
        .elections()
        .iter()
        .filter(|e| e.sentinel == leader)
        .filter_map(|e| e.epoch)
        .next_back()
        .unwrap_or_else(|| fail(&d, "the killed leader has no election"));
    let others = d.live();
    let (master, epoch) = d.converged_among(&others, 45 * S).or_fail(&d);
    assert!(
        epoch >= epoch0,
        "final config epoch {epoch} < the killed leader's {epoch0}"
    );
    d.check_i5(30 * S).or_fail(&d);
    d.check_records().or_fail(&d);
    w.check_i8(master).or_fail(&d);
    let by_leader: Vec<Sent> = d.sent_by(leader);
    let adopted_from_leader = others.iter().any(|&i| {
        !d.find(
            i,
            "+config-update-from",
            &format!("sentinel {}", d.sentinels[leader].myid),
        )
        .is_empty()
    });
    eprintln!(
        "leader {} killed at {}ms in epoch {epoch0}; its commands that landed: {:?}; \
         the others adopted its configuration: {adopted_from_leader}; final master {master}, epoch {epoch}",
        d.sentinels[leader].label(),
        killed_at.as_millis(),
        by_leader
            .iter()
            .map(|s| format!("{}: {}", s.node, s.args.join(" ")))
            .collect::<Vec<_>>(),
    );
}

#[test]
fn c_cut_valkyrie_neither_promotes_nor_leads_then_adopts() {
    let _serial = serial();
    let mut d = trio("peer-trio-c");
    let old = d.nodes[0].port;
    let cut = d.cut(2, &[old], &[0, 1]);
    // The cut is real: the cut daemon loses the master.
    d.wait_event(2, "+sdown", "master", 10 * S).or_fail(&d);
    d.kill_node(0);
    let (master, epoch) = d.converged_among(&[0, 1], 40 * S).or_fail(&d);
    assert_ne!(master, old);
    // Let the cut one run a while longer on its own.
    let until = d.now() + 5 * S;
    while d.now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    cut.heal();
    poll(20 * S, || match (d.advertised(2), d.config_epoch(2)) {
        (Some(m), Some(e)) if m == master && e == epoch => Ok(()),
        other => Err(format!(
            "cut daemon after heal: {other:?}, others: ({master}, {epoch})"
        )),
    })
    .or_fail(&d);
    let elected = d.find(2, "+elected-leader", "");
    assert!(
        elected.is_empty(),
        "the cut daemon won an election: {elected:?}"
    );
    let sent = d.sent_by(2);
    assert!(
        sent.is_empty(),
        "the cut daemon sent replication commands: {sent:?}"
    );
    d.check_i5(30 * S).or_fail(&d);
    d.check_records().or_fail(&d);
    d.check_i7(20 * S).or_fail(&d);
}

#[test]
fn d_stale_state_restart_adopts_before_acting() {
    let _serial = serial();
    let mut d = trio("peer-trio-d");
    let id = d.sentinels[2].myid.clone();
    d.kill_sentinel(2);
    let old = d.nodes[0].port;
    d.kill_node(0);
    let (master, epoch) = d.converged_among(&[0, 1], 40 * S).or_fail(&d);
    assert_ne!(master, old);
    let restarted = d.now();
    assert_eq!(d.start_sentinel(2), id, "same id after a restart");
    let polled = poll(15 * S, || match (d.advertised(2), d.config_epoch(2)) {
        (Some(m), Some(e)) if m == master && e == epoch => Ok(d.now()),
        other => Err(format!(
            "restarted daemon: {other:?}, others: ({master}, {epoch})"
        )),
    })
    .or_fail(&d);
    let adopted = d
        .find(2, "+config-update-from", "")
        .iter()
        .map(|e| e.at)
        .filter(|at| *at >= restarted)
        .min()
        .unwrap_or(polled)
        .min(polled);
    let early: Vec<Sent> = d
        .sent_by(2)
        .into_iter()
        .filter(|s| s.at >= restarted && s.at <= adopted)
        .collect();
    assert!(
        early.is_empty(),
        "replication commands before adopting: {early:?}"
    );
    for i in [0, 1] {
        let pushed = d.find(i, "+config-update-from", &format!("sentinel {id}"));
        assert!(
            pushed.is_empty(),
            "{} took the stale configuration: {pushed:?}",
            d.sentinels[i].label()
        );
    }
    d.check_i5(30 * S).or_fail(&d);
    d.check_records().or_fail(&d);
    d.check_i7(20 * S).or_fail(&d);
}

/// Switchovers one after another, each asked of another Valkyrie: the two
/// that did not lead it name the new master within half an INFO period
/// of the leader's `+switch-master`, so a client that asks any of them
/// right after a switchover is not sent back to the old master. A
/// follower holds a peer's new configuration until the promoted node
/// reports the master role. That report does not wait for the follower's
/// next INFO (up to a second): the promotion's `CLIENT KILL TYPE normal`
/// closes the followers' links to the promoted node too, a link
/// reconnects within 10 ms, and its first command on a new connection is
/// INFO.
#[test]
fn e_switchover_followers_adopt_within_half_an_info_period() {
    let _serial = serial();
    let d = trio("peer-trio-e");
    let w = writer(&d);
    let mut lags = Vec::new();
    for round in 0..3usize {
        let (before, _) = d.converged(20 * S).or_fail(&d);
        let leader = round % 3;
        let port = d.sentinels[leader].port;
        // Refused (`-NOGOODSLAVE`) until a replica is linked again: the
        // last switchover's old master attaches to the new one within
        // Valkey's replication cron (a second).
        let ask = || {
            poll(10 * S, || {
                match support::try_call(port, &["SENTINEL", "FAILOVER", support::peers::GROUP]) {
                    Ok(valkyrie_protocol::Frame::Simple(s)) if s == "OK" => Ok(()),
                    other => Err(format!("round {round}: SENTINEL FAILOVER: {other:?}")),
                }
            })
            .or_fail(&d);
        };
        let asked = std::cell::Cell::new(d.now());
        ask();
        // A switchover the leader gave up (its chosen replica still
        // settling from the round before: followers now adopt a new
        // master within milliseconds, so the next round comes sooner) is
        // asked for again, as an operator would; only once it was given
        // up, never while one may still complete.
        let (after, _) = poll(20 * S, || match d.converged(S) {
            Ok((m, e)) if m != before => Ok((m, e)),
            other => {
                let since = |ch: &str| d.find(leader, ch, "").iter().any(|e| e.at >= asked.get());
                if since("-failover-abort-slave-timeout") && !since("+switch-master") {
                    eprintln!("round {round}: the switchover was given up; asked again");
                    asked.set(d.now());
                    ask();
                }
                Err(format!("round {round}: {other:?}"))
            }
        })
        .or_fail(&d);
        let asked = asked.get();
        let switched = |i: usize| {
            d.find(i, "+switch-master", "")
                .into_iter()
                .filter(|e| e.at >= asked && e.words().get(4) == Some(&after.to_string().as_str()))
                .map(|e| e.at)
                .min()
        };
        let led = poll(5 * S, || {
            switched(leader).ok_or("no +switch-master".to_string())
        })
        .or_fail(&d);
        for i in (0..3).filter(|&i| i != leader) {
            let at = poll(5 * S, || {
                switched(i).ok_or(format!("no +switch-master from {}", d.sentinels[i].label()))
            })
            .or_fail(&d);
            lags.push((round, i, at.saturating_sub(led)));
        }
    }
    println!("followers' +switch-master after the leader's: {lags:?}");
    let slow: Vec<_> = lags
        .iter()
        .filter(|(_, _, lag)| *lag > Duration::from_millis(500))
        .collect();
    if !slow.is_empty() {
        fail(&d, format!("followers slower than 500 ms: {slow:?}"));
    }
    d.check_records().or_fail(&d);
    w.check_i8(d.converged(20 * S).or_fail(&d).0).or_fail(&d);
}
