//! The readiness verdict: one test per reason (its data and its words) and
//! the per-replica table; the fence in [`fence`], peer mode in [`peers`],
//! and the agreement of the verdict with the step in [`agreement`].

use super::*;
use crate::select::Skip;
use crate::{Candidate, FenceView, Readiness, Reason, ReplicaVerdict, VetoCause, WitnessVerdict};

mod agreement;
mod fence;
mod peers;

fn verdict(h: &H) -> Readiness {
    h.core.readiness("mymaster", h.now).expect("known group")
}

fn holds(h: &H) -> Vec<Reason> {
    verdict(h).holds
}

fn skipped(r: &Readiness) -> Vec<(u16, Option<Skip>)> {
    r.replicas.iter().map(|v| (v.addr.port, v.skip)).collect()
}

#[test]
fn ready_names_the_best_replica_with_its_lag_and_changes_nothing() {
    let mut h = H::new();
    h.info(M, master_info("m1", 150, &[R1, R2]));
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.info(R2, replica_info("r2", M, true, 90, 100));
    let before = h.core.clone();
    let r = verdict(&h);
    assert_eq!(h.core, before, "pure");
    assert!(r.ready && r.holds.is_empty());
    assert_eq!(r.label(), "ready");
    assert_eq!(
        r.candidate,
        Some(Candidate {
            addr: a(R1),
            priority: 100,
            offset: 100,
            lag_bytes: Some(50),
        })
    );
    assert_eq!(
        r.replicas,
        vec![
            ReplicaVerdict {
                addr: a(R1),
                priority: Some(100),
                offset: Some(100),
                skip: None,
            },
            ReplicaVerdict {
                addr: a(R2),
                priority: Some(100),
                offset: Some(90),
                skip: None,
            },
        ]
    );
    assert_eq!(r.trigger, group::Trigger::Odown);
    assert_eq!(
        (r.quorum, r.fence, r.witnesses),
        (None, FenceView::Off, None)
    );
    assert_eq!(r.manual, Ok(a(R1)));
    assert_eq!(
        r.describe(h.now),
        "ready: would promote 127.0.0.1:6380 (lag 50 B)"
    );
    assert_eq!(h.core.readiness("nosuch", h.now), None);
}

#[test]
fn no_eligible_replica_says_why_for_each() {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.info(R1, replica_info("r1", M, true, 100, 0));
    h.info(R2, replica_info("r2", M, true, 90, 100));
    // The one that may be promoted comes first.
    let r = verdict(&h);
    assert_eq!(
        skipped(&r),
        vec![(R2, None), (R1, Some(Skip::PriorityZero))]
    );
    let out = h.core.retire(h.now, "mymaster", &[a(R2)].into()).unwrap();
    h.log.extend(out);
    let r = verdict(&h);
    assert_eq!(r.holds, vec![Reason::NoEligibleReplica]);
    assert_eq!(r.candidate, None);
    assert_eq!(
        skipped(&r),
        vec![(R1, Some(Skip::PriorityZero)), (R2, Some(Skip::Retiring))]
    );
    assert_eq!(
        r.replicas
            .iter()
            .map(|v| v.skip.map(Skip::label))
            .collect::<Vec<_>>(),
        vec![Some("priority_zero"), Some("retiring")]
    );
    assert_eq!(r.label(), "no_eligible_replica");
    assert_eq!(r.describe(h.now), "no replica can be promoted");
    assert_eq!(r.manual, Err(AdminError::NoGoodReplica));
}

#[test]
fn a_master_that_lost_its_data_excludes_its_history() {
    let h = H::lost_data_with_r2_unpromotable();
    let r = verdict(&h);
    assert_eq!(
        r.trigger,
        group::Trigger::LostData {
            replid: "replid-m2".into()
        }
    );
    assert_eq!(r.holds, vec![Reason::NoEligibleReplica]);
    assert_eq!(
        skipped(&r),
        vec![
            (R1, Some(Skip::SharesLostHistory)),
            (R2, Some(Skip::PriorityZero))
        ]
    );
    assert_eq!(Skip::SharesLostHistory.label(), "shares_lost_history");
    assert_eq!(r.manual, Err(AdminError::NoGoodReplica));
}

#[test]
fn a_running_failover_then_the_window_after_its_abort() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Refused);
    let (r1, r2) = (
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    h.master_silent_for(D + 200, r1.clone(), r2.clone());
    let r = verdict(&h);
    assert_eq!(
        r.holds[0],
        Reason::FailoverRunning {
            epoch: 1,
            promoted: a(R1)
        }
    );
    assert_eq!(
        r.describe(h.now),
        "a failover is running (epoch 1, promoting 127.0.0.1:6380)"
    );
    assert_eq!(r.manual, Err(AdminError::InProgress));
    // R1 never confirms: aborted, and held back for a failover timeout.
    h.master_silent_for(10_100, r1, r2);
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
    let until = h.group().retry_at;
    assert!(until > h.now);
    let r = verdict(&h);
    assert_eq!(r.holds, vec![Reason::Window { until }]);
    assert_eq!(r.label(), "window");
    assert_eq!(r.candidate.map(|c| c.addr), Some(a(R1)));
    h.now = until - 4_200;
    assert_eq!(
        verdict(&h).describe(h.now),
        "no new failover for 4.2 s: the back-off after the last attempt or vote"
    );
}

#[test]
fn an_unreachable_master_waits_for_then_is_vetoed_by_its_witnesses() {
    let mut h = H::new();
    h.healthy();
    let last_ok = h.group().master_instance().unwrap().last_ok;
    // Before down-after runs out: what an observer cut off from the
    // master sees before anything happens.
    h.now += 100;
    h.down(M, LinkFailure::ConnectTimeout);
    let until = last_ok + 2 * D;
    let r = verdict(&h);
    assert_eq!(r.holds, vec![Reason::WitnessWait { until }]);
    assert_eq!(r.witnesses, Some(WitnessVerdict::Wait { until }));
    assert_eq!(
        r.describe(until - 1_900),
        "waiting up to 1.9 s for the replicas to report since the master went silent"
    );
    h.now += 100;
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.info(R2, replica_info("r2", M, true, 90, 100));
    let vouched = VetoCause::Vouched {
        vouching: 2,
        fresh: 2,
    };
    let r = verdict(&h);
    assert!(!h.group().master_instance().unwrap().sdown);
    assert_eq!(r.holds, vec![Reason::WitnessVeto(vouched)]);
    assert_eq!(r.label(), "witness_veto");
    assert_eq!(
        r.describe(h.now),
        "vetoed: the master is unreachable from here, but 2 of 2 replicas still hear from it"
    );
}

#[test]
fn an_unreachable_master_without_reachable_replicas_is_vetoed() {
    let mut h = H::new();
    h.healthy();
    for p in [M, R1, R2] {
        h.down(p, LinkFailure::ConnectTimeout);
    }
    let r = verdict(&h);
    assert_eq!(
        r.holds,
        vec![
            Reason::WitnessVeto(VetoCause::NoWitness),
            Reason::NoEligibleReplica
        ]
    );
    assert_eq!(
        r.describe(h.now),
        "vetoed: the master is unreachable from here, and so is every replica"
    );
}

#[test]
fn tilt_holds_every_group() {
    let specs = vec![spec("a", 7000), spec("b", 7100), spec("c", 7200)];
    let mut h = H::with(specs, None);
    let report = |h: &mut H, g: &str, port: u16, info: InfoReport| {
        h.feed(Input::Report {
            group: g.into(),
            addr: a(port),
            info,
        });
    };
    for (g, base) in [("a", 7000u16), ("b", 7100), ("c", 7200)] {
        report(&mut h, g, base, master_info("m", 100, &[base + 1]));
        report(&mut h, g, base + 1, replica_info("r", base, true, 100, 100));
    }
    two_of_three_masters_time_out(&mut h);
    let since = h.core.tilt_since().expect("tilted");
    for g in ["a", "b", "c"] {
        let r = h.core.readiness(g, h.now).unwrap();
        assert_eq!(r.holds, vec![Reason::Tilt { since, until: None }], "{g}");
    }
    let r = h.core.readiness("c", since + 12_000).unwrap();
    assert!(
        r.describe(since + 12_000)
            .starts_with("TILT for 12.0 s: more than half of the masters are unreachable"),
        "{}",
        r.describe(since + 12_000)
    );
}

#[test]
fn an_exhausted_epoch_is_named() {
    let mut h = H::with_exhausted_epoch();
    h.healthy();
    let r = verdict(&h);
    assert_eq!(r.holds, vec![Reason::EpochExhausted]);
    assert_eq!(r.manual, Err(AdminError::EpochExhausted));
    assert_eq!(
        r.describe(h.now),
        "the failover epoch is at its maximum: reset the state file"
    );
}

#[test]
fn replicas_not_heard_from_yet_are_awaited() {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.info(R1, replica_info("r1", M, true, 100, 100));
    let r = verdict(&h);
    assert_eq!(
        r.holds,
        vec![Reason::AwaitingReports {
            missing: vec![a(R2)]
        }]
    );
    assert_eq!(r.manual, Err(AdminError::NotEveryReplicaReported));
    assert_eq!(
        r.describe(h.now),
        "waiting for the first report of 127.0.0.1:6381 since Valkyrie started"
    );
}

#[test]
fn labels_are_bounded_and_distinct() {
    let reasons = [
        Reason::FailoverRunning {
            epoch: 1,
            promoted: a(R1),
        },
        Reason::ElectionRunning { epoch: 1 },
        Reason::Paused,
        Reason::Window { until: 0 },
        Reason::PendingConfig {
            master: a(R1),
            config_epoch: 1,
            until: 0,
        },
        Reason::WitnessWait { until: 0 },
        Reason::WitnessVeto(VetoCause::NoWitness),
        Reason::Tilt {
            since: 0,
            until: None,
        },
        Reason::QuorumUnreachable {
            usable: 1,
            quorum: 2,
        },
        Reason::ElectionUnwinnable {
            usable: 1,
            needed: 2,
            known: 3,
        },
        Reason::EpochExhausted,
        Reason::AwaitingReports { missing: vec![] },
        Reason::NoEligibleReplica,
        Reason::StateUnwritable,
    ];
    let mut labels: Vec<&str> = reasons.iter().map(Reason::label).collect();
    labels.insert(0, "ready");
    assert_eq!(labels, Reason::LABELS);
    assert_eq!(
        Reason::StateUnwritable.describe(0),
        "the state file cannot be written: every decision is held"
    );
}
