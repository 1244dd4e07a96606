//! `SENTINEL SIMULATE-FAILURE`: the step stops at the crash point, with
//! what must be durable before it and nothing sent after it.

use super::*;
use crate::CrashPoint;

/// A failover of a dead master with the crash at `point` asked for: the
/// harness, and the index in its log of the first `Crash`, which must be
/// at `point`.
fn crashed_at(point: CrashPoint) -> (H, usize) {
    let mut h = H::new();
    h.core.set_crash_points(point.bit());
    h.fail_over_dead_master();
    let at = h
        .log
        .iter()
        .position(|o| matches!(o, Output::Crash { .. }))
        .expect("a crash");
    assert!(matches!(h.log[at], Output::Crash { point: p } if p == point));
    (h, at)
}

#[test]
fn crash_after_election_comes_before_anything_is_sent() {
    let (h, at) = crashed_at(CrashPoint::AfterElection);
    // Right after `+elected-leader`, before the replica is chosen.
    assert!(matches!(&h.log[at - 1], Output::Event(e) if e.channel == Channel::ElectedLeader));
    assert!(
        !h.log[..at].iter().any(|o| matches!(
            o,
            Output::Send {
                command: Command::ReplicaOfNoOne,
                ..
            }
        )),
        "nothing promoted before the crash"
    );
}

#[test]
fn crash_after_promotion_comes_once_the_new_master_is_durable() {
    let (h, at) = crashed_at(CrashPoint::AfterPromotion);
    // The new master persisted right before it.
    assert!(matches!(&h.log[at - 1], Output::Persist { state, .. } if state.master == a(R1)));
    // The other replica is reconfigured, and peers told, only after it.
    let after = &h.log[at..];
    assert!(after.iter().any(|o| matches!(o, Output::HelloNow { .. })));
    assert!(
        !h.log[..at]
            .iter()
            .any(|o| matches!(o, Output::HelloNow { .. }))
    );
    assert!(!h.log[..at].iter().any(
        |o| matches!(o, Output::Send { to, command: Command::ReplicaOf(_), .. } if *to == a(R2))
    ));
}

#[test]
fn without_the_flags_nothing_crashes() {
    let mut h = H::new();
    h.fail_over_dead_master();
    assert!(!h.log.iter().any(|o| matches!(o, Output::Crash { .. })));
    assert_eq!(h.group().master, a(R1));
}
