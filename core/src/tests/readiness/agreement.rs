//! The verdict agrees with the step: when it says "ready, would promote
//! X", the tick at the same time with the master down sends `REPLICAOF NO
//! ONE` to X, and when it says "not ready", that tick promotes nobody.

use super::*;

/// What each replica keeps reporting while the master is down.
type Reports = Vec<(u16, InfoReport)>;

/// Replicas (and the master, if `master_answers`) answer every 100 ms
/// until just before `end`; the clock then stands at `end`, unstepped.
fn answer_until(h: &mut H, end: Millis, reports: &Reports, master_answers: bool) {
    while h.now + 100 < end {
        h.now += 100;
        if master_answers {
            h.ping(M);
        }
        for (port, info) in reports {
            h.ping(*port);
            h.info(*port, info.clone());
        }
    }
    h.now = end;
}

/// The verdict now, then a tick at the same time: the verdict, and the
/// replicas that tick promoted. Asserts that they agree.
fn verdict_then_tick(h: &mut H) -> (Readiness, Vec<Addr>) {
    let r = verdict(h);
    let out = h.feed(Input::Tick);
    let promoted: Vec<Addr> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send {
                to,
                command: Command::ReplicaOfNoOne,
                ..
            } => Some(to.clone()),
            _ => None,
        })
        .collect();
    if r.ready {
        let named = r.candidate.as_ref().map(|c| c.addr.clone());
        assert_eq!(promoted, Vec::from_iter(named), "{r:?}");
    } else {
        assert!(promoted.is_empty(), "held by {:?}: {promoted:?}", r.holds);
    }
    (r, promoted)
}

/// The master fails with `failure` while the replicas keep reporting:
/// the verdict taken just before, and the one (with what was promoted)
/// at the first moment the master is SDOWN.
fn master_fails(
    h: &mut H,
    failure: LinkFailure,
    reports: &Reports,
) -> (Readiness, Readiness, Vec<Addr>) {
    let before = verdict(h);
    h.down(M, failure);
    let last_ok = h.group().master_instance().unwrap().last_ok;
    answer_until(h, last_ok + D + 1, reports, false);
    let (r, promoted) = verdict_then_tick(h);
    (before, r, promoted)
}

/// A replica: its port, run id, offset and priority.
type Replica<'a> = (u16, &'a str, u64, u32);

/// A healthy group whose `replicas` report, and what they report once the
/// master is gone (`link_up`: they still hear from it).
fn group_of(replicas: &[Replica<'_>], link_up: bool) -> (H, Reports) {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1, R2]));
    let mut reports = Vec::new();
    for &(port, run, offset, priority) in replicas {
        h.info(port, replica_info(run, M, true, offset, priority));
        reports.push((port, replica_info(run, M, link_up, offset, priority)));
    }
    (h, reports)
}

#[test]
fn the_replica_named_before_a_kill_is_the_one_promoted() {
    let cases: [(&[Replica<'_>], u16); 6] = [
        // Offsets decide.
        (&[(R1, "r1", 100, 100), (R2, "r2", 90, 100)], R1),
        (&[(R1, "r1", 90, 100), (R2, "r2", 120, 100)], R2),
        // Priorities decide, before offsets.
        (&[(R1, "r1", 100, 50), (R2, "r2", 90, 10)], R2),
        // Priority 0 is never promoted.
        (&[(R1, "r1", 100, 0), (R2, "r2", 90, 100)], R2),
        // A tie goes to the smaller run id.
        (&[(R1, "r1", 100, 100), (R2, "r2", 100, 100)], R1),
        (&[(R1, "bbb", 100, 100), (R2, "aaa", 100, 100)], R2),
    ];
    for (replicas, expected) in cases {
        let (mut h, reports) = group_of(replicas, false);
        let (before, r, promoted) = master_fails(&mut h, LinkFailure::Refused, &reports);
        assert!(before.ready && r.ready, "{replicas:?}: {:?}", r.holds);
        assert_eq!(before.candidate.map(|c| c.addr), Some(a(expected)));
        assert_eq!(promoted, vec![a(expected)], "{replicas:?}");
    }
}

#[test]
fn a_retiring_replica_is_neither_named_nor_promoted() {
    let (mut h, reports) = group_of(&[(R1, "r1", 100, 100), (R2, "r2", 90, 100)], false);
    let out = h.core.retire(h.now, "mymaster", &[a(R1)].into()).unwrap();
    h.log.extend(out);
    let (before, _, promoted) = master_fails(&mut h, LinkFailure::Refused, &reports);
    assert_eq!(before.candidate.map(|c| c.addr), Some(a(R2)));
    assert_eq!(promoted, vec![a(R2)]);
}

#[test]
fn not_ready_promotes_nobody() {
    let (mut h, reports) = group_of(&[(R1, "r1", 100, 0), (R2, "r2", 90, 0)], false);
    let (_, r, promoted) = master_fails(&mut h, LinkFailure::Refused, &reports);
    assert_eq!(r.holds, vec![Reason::NoEligibleReplica]);
    assert!(promoted.is_empty());
}

#[test]
fn an_unreachable_master_is_judged_by_its_witnesses() {
    // Its replicas still hear from it: vetoed, nobody promoted. Before
    // the failure the verdict could not know (a master that answers is
    // vouched for whatever happens next).
    let replicas = [(R1, "r1", 100, 100), (R2, "r2", 90, 100)];
    let (mut h, reports) = group_of(&replicas, true);
    let (before, r, promoted) = master_fails(&mut h, LinkFailure::ConnectTimeout, &reports);
    assert!(before.ready);
    assert_eq!(
        r.holds,
        vec![Reason::WitnessVeto(VetoCause::Vouched {
            vouching: 2,
            fresh: 2
        })]
    );
    assert!(promoted.is_empty());
    // They lost it too: the master is gone, R1 is promoted.
    let (mut h, reports) = group_of(&replicas, false);
    let (_, r, promoted) = master_fails(&mut h, LinkFailure::ConnectTimeout, &reports);
    assert_eq!(r.witnesses, Some(WitnessVerdict::Go));
    assert_eq!(promoted, vec![a(R1)]);
}

#[test]
fn a_master_that_lost_its_data_is_replaced_as_named() {
    let mut h = H::new();
    h.healthy();
    h.now += 50;
    // R1 resyncs from the restarted, empty master: the guard fails over
    // to R2 at once.
    let mut r1 = replica_info("r1", M, true, 5, 100);
    r1.replid = "replid-m2".into();
    r1.keys = Some(0);
    h.info(R1, r1.clone());
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.promoted.clone()),
        Some(a(R2))
    );
    // R2 never confirms: aborted, then the window.
    let reports = vec![(R1, r1), (R2, replica_info("r2", M, true, 90, 100))];
    let end = h.now + 10_200;
    answer_until(&mut h, end, &reports, true);
    assert!(h.group().failover.is_none());
    let until = h.group().retry_at;
    let r = verdict(&h);
    assert_eq!(r.holds, vec![Reason::Window { until }]);
    let (r, promoted) = verdict_then_tick(&mut h);
    assert!(!r.ready && promoted.is_empty());
    // At its end: ready, and the tick promotes the replica it names.
    answer_until(&mut h, until, &reports, true);
    let (r, promoted) = verdict_then_tick(&mut h);
    assert!(r.ready, "{:?}", r.holds);
    assert_eq!(promoted, vec![a(R2)]);
}

#[test]
fn a_master_that_lost_its_data_with_no_replica_left_is_not_replaced() {
    let mut h = H::lost_data_with_r2_unpromotable();
    h.now += 100;
    let (r, promoted) = verdict_then_tick(&mut h);
    assert_eq!(r.holds, vec![Reason::NoEligibleReplica]);
    assert!(promoted.is_empty());
}
