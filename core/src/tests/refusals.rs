//! One structured reason for every hold, veto, abort and refusal
//! (`Output::Refused`): reported with the value the step tested, and a
//! hold only on its transitions.

use super::*;
use crate::group::PAUSE_MAX;

/// Every `Refused` output so far: (op, outcome, epoch, reason).
fn refusals(h: &H) -> Vec<(Op, Outcome, u64, Refusal)> {
    h.log
        .iter()
        .filter_map(|o| match o {
            Output::Refused {
                op,
                outcome,
                epoch,
                reason,
                ..
            } => Some((*op, *outcome, *epoch, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_witness_veto_is_reported_once_then_again_after_the_master_returns() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::ConnectTimeout);
    h.master_silent_for(
        5 * D,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    let vetoes: Vec<_> = refusals(&h)
        .into_iter()
        .filter(|(_, o, _, _)| *o == Outcome::Vetoed)
        .collect();
    assert_eq!(
        vetoes,
        vec![(
            Op::Failover,
            Outcome::Vetoed,
            0,
            Refusal::Hold(Reason::WitnessVeto(VetoCause::Vouched {
                vouching: 2,
                fresh: 2
            }))
        )],
        "one report for dozens of ticks: {:?}",
        refusals(&h)
    );
    // Further ticks say nothing new.
    let said = refusals(&h).len();
    h.now += 100;
    h.feed(Input::Tick);
    assert_eq!(refusals(&h).len(), said);
    // The master answers again: the next partition is reported afresh.
    h.ping(M);
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.down(M, LinkFailure::ConnectTimeout);
    h.master_silent_for(
        5 * D,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    let vetoes = refusals(&h)
        .iter()
        .filter(|r| r.3.label() == "witness_veto")
        .count();
    assert_eq!(vetoes, 2);
}

#[test]
fn tilt_is_reported_once_while_it_holds() {
    let specs = vec![spec("a", 7000), spec("b", 7100), spec("c", 7200)];
    let mut h = H::with(specs, None);
    for (g, base) in [("a", 7000u16), ("b", 7100), ("c", 7200)] {
        h.feed(Input::Report {
            group: g.into(),
            addr: a(base),
            info: master_info("m", 100, &[base + 1]),
        });
        h.feed(Input::Report {
            group: g.into(),
            addr: a(base + 1),
            info: replica_info("r", base, true, 100, 100),
        });
    }
    // Two of three masters time out at once; their replicas lost them
    // too (the witnesses let them go: TILT is what holds).
    two_of_three_masters_time_out(&mut h);
    assert!(h.core.tilted());
    let tilts: Vec<String> = h
        .log
        .iter()
        .filter_map(|o| match o {
            Output::Refused {
                group,
                outcome: Outcome::Held,
                reason: Refusal::Hold(Reason::Tilt { .. }),
                ..
            } => Some(group.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(tilts, ["a", "b"], "once per held group");
}

#[test]
fn a_switchover_that_does_not_catch_up_reports_its_abort() {
    let mut h = H::new();
    h.healthy();
    let out = h.core.failover(h.now, "mymaster").unwrap();
    h.log.extend(out);
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 500, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 100, 100)));
    h.now += PAUSE_MAX / 2 + 1;
    h.ping(M);
    h.ping(R1);
    h.feed(Input::Tick);
    assert_eq!(
        refusals(&h),
        vec![(
            Op::Switchover,
            Outcome::Aborted,
            1,
            Refusal::Aborted(Abort::Switchover(SwitchoverAbort::CatchUpTimeout))
        )]
    );
    // Reported before the abort event, which closes the attempt.
    let at = |f: &dyn Fn(&Output) -> bool| h.log.iter().position(f);
    let reported = at(&|o| matches!(o, Output::Refused { .. }));
    let aborted =
        at(&|o| matches!(o, Output::Event(e) if e.channel == Channel::FailoverAbortSlaveTimeout));
    assert!(reported < aborted);
    // The log's words are the old ones.
    assert!(h.log.iter().any(|o| matches!(o, Output::Log { message, .. }
        if message.ends_with("abandoned: the chosen replica did not catch up in time"))));
}

#[test]
fn a_promotion_that_never_confirms_reports_a_timeout() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, 1);
    h.master_silent_for(
        10_100,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    let aborts: Vec<_> = refusals(&h)
        .into_iter()
        .filter(|(_, o, _, _)| *o == Outcome::Aborted)
        .collect();
    assert_eq!(
        aborts,
        vec![(
            Op::Failover,
            Outcome::Aborted,
            1,
            Refusal::Aborted(Abort::PromotionTimeout)
        )]
    );
    // The back-off that follows is a hold of its own, said once.
    let windows = refusals(&h)
        .iter()
        .filter(|r| r.3.label() == "window")
        .count();
    assert_eq!(windows, 1);
}

#[test]
fn a_refused_manual_failover_maps_to_its_reason() {
    let mut h = H::new();
    h.healthy();
    h.info(R1, replica_info("r1", M, true, 100, 0));
    h.info(R2, replica_info("r2", M, true, 90, 0));
    let err = h.core.failover(h.now, "mymaster").unwrap_err();
    assert_eq!(err, AdminError::NoGoodReplica);
    let g = h.group();
    let why = err.refusal(g).unwrap();
    assert_eq!(why, Refusal::Hold(Reason::NoEligibleReplica));
    assert_eq!(why.label(), "no_eligible_replica");
    // The master answers: it was a switchover.
    assert_eq!(g.manual_op(), Op::Switchover);
    match g.refused(g.manual_op(), Outcome::Refused, g.epoch, why) {
        Output::Refused { group, outcome, .. } => {
            assert_eq!((group.as_str(), outcome), ("mymaster", Outcome::Refused));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        AdminError::MasterMoved.refusal(g),
        Some(Refusal::MasterMoved)
    );
    assert_eq!(AdminError::NoSuchMaster.refusal(g), None);
}

#[test]
fn every_label_is_listed_and_the_verdicts_stay_the_verdicts() {
    for label in &Reason::LABELS[1..] {
        assert!(Refusal::LABELS.contains(label), "{label}");
    }
    // The verdict's labels are its holds only (a metric sets them all).
    assert!(!Reason::LABELS.contains(&"promotion_timeout"));
    let aborts = [
        Abort::PromotionTimeout,
        Abort::CandidateDown,
        Abort::CandidateLostData,
        Abort::NeverPromoted,
        Abort::NotElected { split: true },
        Abort::EpochMoved,
        Abort::Superseded { config_epoch: 3 },
        Abort::Switchover(SwitchoverAbort::PauseRefused {
            by: a(M),
            error: "NOPERM".into(),
        }),
        Abort::Switchover(SwitchoverAbort::MasterNotMaster),
        Abort::Switchover(SwitchoverAbort::MasterRestarted),
        Abort::Switchover(SwitchoverAbort::CatchUpTimeout),
        Abort::Switchover(SwitchoverAbort::CandidateNotReplica),
        Abort::Switchover(SwitchoverAbort::CandidateDown),
        Abort::Switchover(SwitchoverAbort::MasterDown),
    ];
    for abort in aborts {
        let r = Refusal::Aborted(abort);
        assert!(Refusal::LABELS.contains(&r.label()), "{}", r.label());
        assert!(!r.describe(0).is_empty());
    }
    assert!(Refusal::LABELS.contains(&Refusal::MasterMoved.label()));
}
