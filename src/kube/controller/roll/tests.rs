//! The roll's plan, decided from what one reconcile observed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::plan::{self, Member, Observed, Plan, PodState, Step, Sync, Wait};

const PATIENCE: u64 = 600;

/// A Ready pod of the given revision and sync, in its state for 10 s.
fn pod(ordinal: i32, current: bool, sync: Sync) -> Member {
    Member {
        ordinal,
        current,
        pod: PodState::Ready,
        sync,
        age_secs: 10,
    }
}

/// `want` and `size`, the pods as given, no failover, no strict fence.
fn observed(want: i32, size: i32, members: Vec<Member>) -> Observed {
    Observed {
        want,
        size,
        members,
        failover: false,
        strict_need: None,
        patience_secs: PATIENCE,
    }
}

/// Three Ready pods, the master at `master`, each current as `current`
/// says, every replica in sync.
fn three(master: i32, current: [bool; 3]) -> Observed {
    let members = (0..3)
        .map(|n| {
            let sync = if n == master {
                Sync::Master
            } else {
                Sync::Synced
            };
            pod(n, current[n as usize], sync)
        })
        .collect();
    observed(3, 3, members)
}

fn wait(ordinal: Option<i32>, why: Wait) -> Step {
    Step::Wait { ordinal, why }
}

#[test]
fn steady_when_every_pod_is_current() {
    let o = three(0, [true; 3]);
    let p = plan::plan(&o);
    assert_eq!(
        p,
        Plan {
            size: 3,
            step: Step::Steady,
            refused: None
        }
    );
    assert!(!p.updating(&o));
}

#[test]
fn steady_ignores_the_group_when_every_pod_is_current() {
    // Nothing to roll: a failover, or no master, is not the roll's wait.
    let mut o = three(0, [true; 3]);
    o.failover = true;
    o.members[0].sync = Sync::Unknown;
    o.members[1].pod = PodState::Starting;
    assert_eq!(plan::plan(&o).step, Step::Steady);
}

#[test]
fn deletes_the_highest_out_of_date_replica_first() {
    for (master, expected) in [(0, 2), (1, 2), (2, 1)] {
        let p = plan::plan(&three(master, [false; 3]));
        assert_eq!(p.step, Step::Delete(expected), "master at {master}");
        assert_eq!(p.size, 3);
    }
    // The highest out-of-date one, not the highest ordinal.
    assert_eq!(
        plan::plan(&three(0, [false, false, true])).step,
        Step::Delete(1)
    );
}

#[test]
fn never_deletes_the_master() {
    for master in 0..3 {
        let mut current = [true; 3];
        current[master as usize] = false;
        let p = plan::plan(&three(master, current));
        assert_eq!(p.step, Step::Switchover, "master at {master}");
        assert!(p.updating(&three(master, current)));
    }
}

#[test]
fn waits_while_a_pod_is_away_and_names_it() {
    let cases = [
        (PodState::Missing, Sync::Unknown, Wait::Missing),
        (PodState::Terminating, Sync::Synced, Wait::Terminating),
        (PodState::Starting, Sync::Unknown, Wait::NotReady),
        (PodState::Ready, Sync::Unknown, Wait::Unknown),
        (PodState::Ready, Sync::Unlinked, Wait::Unlinked),
        (
            PodState::Ready,
            Sync::Behind(5 << 20),
            Wait::Behind(5 << 20),
        ),
    ];
    for (state, sync, why) in cases {
        // Pod 1 current but away, pod 2 out of date: nothing is deleted.
        let mut o = three(0, [false, true, false]);
        o.members[1].pod = state;
        o.members[1].sync = sync;
        let p = plan::plan(&o);
        assert_eq!(p.step, wait(Some(1), why), "{state:?} {sync:?}");
        assert_eq!(p.size, 3);
        assert!(p.updating(&o));
    }
}

#[test]
fn names_the_lowest_pod_away() {
    let mut o = three(2, [false; 3]);
    o.members[0].pod = PodState::Starting;
    o.members[1].sync = Sync::Unlinked;
    assert_eq!(plan::plan(&o).step, wait(Some(0), Wait::NotReady));
}

#[test]
fn a_replica_within_the_caught_up_margin_counts_as_synced() {
    // `Behind` is what `sync_of` reports past the margin; within it the
    // replica is `Synced`. The plan does not look at the bytes again.
    let mut o = three(0, [false; 3]);
    o.members[1].sync = Sync::Behind(plan::CAUGHT_UP_BYTES + 1);
    assert_eq!(
        plan::plan(&o).step,
        wait(Some(1), Wait::Behind(plan::CAUGHT_UP_BYTES + 1))
    );
}

#[test]
fn stalled_past_the_patience() {
    let mut o = three(0, [false; 3]);
    o.members[2].pod = PodState::Starting;
    o.members[2].sync = Sync::Unknown;
    o.members[2].age_secs = PATIENCE;
    assert_eq!(plan::plan(&o).step, wait(Some(2), Wait::NotReady));
    o.members[2].age_secs = PATIENCE + 1;
    let p = plan::plan(&o);
    assert_eq!(
        p.step,
        Step::Stalled {
            ordinal: 2,
            why: Wait::NotReady
        }
    );
    assert_eq!(p.size, 3);
    assert!(p.updating(&o));
}

#[test]
fn switchover_only_when_every_replica_is_current_and_synced() {
    // A replica out of date: it goes first.
    assert_eq!(
        plan::plan(&three(1, [true, false, false])).step,
        Step::Delete(2)
    );
    // Every replica current, one behind: wait for it.
    let mut o = three(1, [true, false, true]);
    o.members[0].sync = Sync::Behind(2 << 20);
    assert_eq!(plan::plan(&o).step, wait(Some(0), Wait::Behind(2 << 20)));
    // One not Ready.
    let mut o = three(1, [true, false, true]);
    o.members[2].pod = PodState::Starting;
    assert_eq!(plan::plan(&o).step, wait(Some(2), Wait::NotReady));
    // Every replica current and in sync.
    assert_eq!(
        plan::plan(&three(1, [true, false, true])).step,
        Step::Switchover
    );
}

#[test]
fn waits_during_a_failover_and_with_no_master() {
    let mut o = three(0, [false; 3]);
    o.failover = true;
    assert_eq!(plan::plan(&o).step, wait(None, Wait::FailoverRuns));
    let mut o = three(0, [false; 3]);
    o.members[0].sync = Sync::Unknown;
    let p = plan::plan(&o);
    assert_eq!(p.step, wait(None, Wait::NoMaster));
    assert_eq!(p.size, 3);
    // The failover before the missing master.
    o.failover = true;
    assert_eq!(plan::plan(&o).step, wait(None, Wait::FailoverRuns));
}

#[test]
fn a_scale_down_that_removes_the_master_keeps_the_size_and_switches_over() {
    let mut o = three(2, [true; 3]);
    o.want = 2;
    let p = plan::plan(&o);
    assert_eq!(
        p,
        Plan {
            size: 3,
            step: Step::Switchover,
            refused: None
        }
    );
    assert!(p.updating(&o));
    // During a failover, or with no master: the size kept, waiting.
    o.failover = true;
    let p = plan::plan(&o);
    assert_eq!((p.size, p.step), (3, wait(None, Wait::FailoverRuns)));
    o.failover = false;
    o.members[2].sync = Sync::Unknown;
    let p = plan::plan(&o);
    assert_eq!((p.size, p.step), (3, wait(None, Wait::NoMaster)));
}

#[test]
fn a_scale_down_that_keeps_the_master_applies_the_smaller_size() {
    let mut o = three(0, [true; 3]);
    o.want = 2;
    let p = plan::plan(&o);
    assert_eq!((p.size, &p.step, &p.refused), (2, &Step::Steady, &None));
    // The roll then looks only at the pods that stay: the leaving one
    // may be out of date or away.
    o.members[2].current = false;
    o.members[2].pod = PodState::Terminating;
    assert_eq!(plan::plan(&o).step, Step::Steady);
    o.members[1].current = false;
    let p = plan::plan(&o);
    assert_eq!((p.size, p.step), (2, Step::Delete(1)));
    // Once applied, the pods left are the members.
    let mut o = three(0, [true; 3]);
    o.want = 2;
    o.size = 2;
    o.members.truncate(2);
    let p = plan::plan(&o);
    assert_eq!((p.size, &p.step), (2, &Step::Steady));
    assert!(!p.updating(&o));
}

#[test]
fn a_strict_fence_refuses_a_scale_down_it_cannot_keep() {
    // To 2 pods: 1 replica left, the fence needs 2.
    let mut o = three(0, [true; 3]);
    o.want = 2;
    o.strict_need = Some(2);
    let p = plan::plan(&o);
    assert_eq!(p.size, 3);
    assert_eq!(p.step, Step::Steady);
    let why = p.refused.clone().unwrap_or_default();
    assert!(
        why.contains("leaves 1 replicas") && why.contains("needs 2"),
        "refused: {why:?}"
    );
    assert!(p.updating(&o));
    // The roll goes on over every pod, the kept ones included.
    o.members[2].current = false;
    assert_eq!(plan::plan(&o).step, Step::Delete(2));
    // Refused even when the master leaves: no switchover for it.
    let mut o = three(2, [true; 3]);
    o.want = 2;
    o.strict_need = Some(2);
    let p = plan::plan(&o);
    assert_eq!((p.size, &p.step), (3, &Step::Steady));
    assert!(p.refused.is_some());
    // A fence that one replica satisfies lets it through.
    let mut o = three(0, [true; 3]);
    o.want = 2;
    o.strict_need = Some(1);
    let p = plan::plan(&o);
    assert_eq!((p.size, p.refused), (2, None));
}

#[test]
fn a_scale_up_applies_the_bigger_size_at_once() {
    let mut members = three(0, [true; 3]).members;
    for n in 3..5 {
        members.push(Member {
            ordinal: n,
            current: true,
            pod: PodState::Missing,
            sync: Sync::Unknown,
            age_secs: 0,
        });
    }
    let o = observed(5, 3, members);
    let p = plan::plan(&o);
    assert_eq!((p.size, &p.step, &p.refused), (5, &Step::Steady, &None));
    // With a roll under way, the new pods are waited for like others.
    let mut o = o;
    o.members[1].current = false;
    let p = plan::plan(&o);
    assert_eq!((p.size, p.step), (5, wait(Some(3), Wait::Missing)));
}

#[test]
fn retiring_is_every_pod_a_scale_down_removes_and_every_pod_being_deleted() {
    let retiring = |o: &Observed| {
        plan::retiring(o, &plan::plan(o))
            .into_iter()
            .collect::<Vec<_>>()
    };
    let mut o = three(0, [true; 3]);
    assert!(retiring(&o).is_empty());
    o.want = 2;
    assert_eq!(retiring(&o), [2]);
    o.want = 1;
    assert_eq!(retiring(&o), [1, 2]);
    // Still retiring once the smaller size is applied, while it exists.
    o.size = 1;
    assert_eq!(retiring(&o), [1, 2]);
    o.members[2].pod = PodState::Missing;
    assert_eq!(retiring(&o), [1]);
    // A pod being deleted, whatever its ordinal.
    let mut o = three(0, [true; 3]);
    o.members[1].pod = PodState::Terminating;
    assert_eq!(retiring(&o), [1]);
    // A refused scale-down removes nothing: nothing retires for it.
    let mut o = three(0, [true; 3]);
    o.want = 2;
    o.strict_need = Some(2);
    let p = plan::plan(&o);
    assert!(p.refused.is_some());
    assert!(plan::retiring(&o, &p).is_empty());
}
