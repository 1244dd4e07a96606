//! Model check of the reconciler's rolling update and scale-down with
//! stateright: every decision is the real `plan::plan`
//! (`valkyrie::kube::controller::roll::plan`), fed what the reconciler
//! would observe, against every interleaving of the StatefulSet
//! controller, the kubelet, the core's failovers, replication, client
//! writes and faults.
//!
//! The world: three pods (ordinals 0..2) of a StatefulSet on `OnDelete`
//! (`Parallel`), each with a revision (old or new), a lifecycle (missing,
//! starting, Ready, terminating), a Valkey (down, master, or a replica
//! never synced since it started, synced once, or linked to the up
//! master) and the acknowledged writes it holds (at most two, a bit
//! each; one write is `CAUGHT_UP_BYTES`, so a replica one write behind
//! counts as synced, two behind does not). The master acknowledges
//! writes at any time but during a switchover; a replica syncs from the
//! up master (a full sync, or a catch-up); a pod created or restarted
//! starts empty. The StatefulSet controller creates a missing pod below
//! its size with the new revision and deletes the pods past it; the
//! kubelet makes a starting pod Ready; a terminating pod goes once its
//! preStop hook returns. The hook runs when the deletion begins: a pod
//! that was the master then waits while a switchover runs or a replica
//! could take over (the reconciler hands it over, `handover.rs`), and
//! goes when none could (the grace period); a replica then goes at any
//! time, even if promoted since.
//!
//! The core: a switchover picks a replica linked to the up master, not
//! retiring, pauses writes, then promotes it caught up (the old master a
//! replica holding everything; the others sync again), or gives up if
//! the master or the replica went meanwhile. A master that is down is
//! failed over to the non-retiring replica that synced once and holds the
//! most writes (the writes it lacks are lost: an unplanned crash). A
//! restarted master pod starts fenced and empty; the core takes it back
//! once no other Valkey holds keys (nothing to lose), and otherwise
//! fails it over (the empty-restart guard).
//!
//! The reconciler, in two steps that the world interleaves: `Observe`
//! builds `Observed` as `roll::observe` does, stores `plan::plan`'s plan
//! and marks retiring what `roll::decide` does (`plan::leaving`, the
//! terminating pods); `Act` applies the plan's size and takes its step
//! only after `roll::act`'s re-check (the master observed is the master,
//! up, no failover runs). A plan that would change nothing is not stored
//! (waiting is stuttering), so a state with nothing left to do is final.
//!
//! Faults, counted against a budget: the reconciler crashes or the Lease
//! moves (the stored plan is dropped and nothing is marked retiring
//! until the next holder observes); a starting pod never becomes Ready;
//! the master's Valkey crashes (its pod restarts empty).
//!
//! Properties (always):
//! - no pod the reconciler deletes holds an acknowledged write that no
//!   other live pod holds (but one a failover already lost);
//! - with no crash, no master pod goes with such a write (a scale-down or
//!   a deletion's hand-over loses nothing; a crash may);
//! - never two masters;
//! - while a pod below the size never came back, no other pod is deleted;
//! - every run ends (a final state) with every pod below the size on the
//!   new revision, Ready, none past it, the plan steady — or, with a pod
//!   that never came back, the plan stalled (or waiting) on it, or done
//!   but for it;
//! - with the strict fence, the size applied never leaves fewer replicas
//!   than it needs.
//!
//! Sometimes: a full roll completes (so the checks are not vacuous). A
//! planner that deletes an out-of-date master instead of switching over
//! is caught. Every run explores its whole space (seconds); one that
//! stops at its state bound fails. Two runs are ignored: they find what
//! their docs say (pods past `want` marked retiring, or not, at the wrong
//! times) and pass once that is fixed.

#![cfg(feature = "kubernetes")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use stateright::{Checker, Model};
use tokio::time::Instant;
use valkyrie::kube::controller::roll::plan::{self, Observed, Plan, Step, Sync};

mod model;
mod world;

use crate::search::{Search, Traced, conclude, violated};
use model::Env;
use world::Faults;

/// The state bound: `VALKYRIE_MODEL_STATES`, or this.
const STATES: usize = 4_000_000;

const ALL: Faults = Faults {
    reconciler: true,
    stuck: true,
    master: true,
};

/// Runs the whole search; returns the names of the properties violated
/// (an `always` with a counterexample, a `sometimes` without an
/// example), after printing their traces.
fn check(env: Env, what: &str) -> Vec<&'static str> {
    let states = std::env::var("VALKYRIE_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(STATES);
    let started = Instant::now();
    let checker = env
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_bfs()
        .join();
    conclude(&checker, what, states, Search::Whole, started);
    violated(&checker)
}

fn assert_holds(env: Env, what: &str) {
    let failed = check(env, what);
    assert!(failed.is_empty(), "{what}: {failed:?}");
}

/// Three pods on the old revision, the master at any ordinal, up to
/// `max_faults` faults of any kind, two writes.
fn roll(want: i32, max_faults: u8) -> Env {
    Env {
        want,
        size: 3,
        masters: vec![0, 1, 2],
        new: false,
        strict_need: None,
        faults: ALL,
        max_faults,
        max_writes: 2,
        planner: plan::plan,
    }
}

/// Every interleaving of a roll of three pods, the master anywhere, with
/// two faults of any kind.
#[test]
fn a_roll_of_three_pods_under_two_faults() {
    assert_holds(roll(3, 2), "roll of 3 pods, 2 faults");
}

/// A scale-down alone (every pod current) to two pods, the master
/// anywhere (on the pod that leaves: a switchover first), one fault.
#[test]
fn a_scale_down_to_two_pods_under_one_fault() {
    let env = Env {
        new: true,
        ..roll(2, 1)
    };
    assert_holds(env, "scale to 2, 1 fault");
}

/// A scale-down to two pods and a roll at once, one fault. This found
/// that a pod being scaled away lost its retiring mark once the smaller
/// size was applied (it was no longer observed), so the roll's
/// switchover or a failover could promote it just before it stopped:
/// `observe` now lists every pod that exists.
#[test]
fn a_scale_down_to_two_pods_while_rolling_under_one_fault() {
    assert_holds(roll(2, 1), "scale to 2 and roll, 1 fault");
}

/// With the strict fence needing two replicas, a scale-down to two pods
/// is refused: the roll goes on over the three. This found that a
/// refused scale-down still marked ordinal 2 retiring, so the pod that
/// stays could be the only one holding the data and never be promoted:
/// `plan::retiring` marks nothing for a refused scale-down.
#[test]
fn a_strict_fence_refuses_the_scale_down() {
    let env = Env {
        strict_need: Some(2),
        ..roll(2, 1)
    };
    assert_holds(env, "strict fence refuses scale to 2, 1 fault");
}

/// `plan::plan`, except that an out-of-date master is deleted instead of
/// switched over.
fn deletes_the_master(o: &Observed) -> Plan {
    let mut p = plan::plan(o);
    if p.step == Step::Switchover
        && let Some(m) = o.members.iter().find(|m| m.sync == Sync::Master)
        && !m.current
    {
        p.step = Step::Delete(m.ordinal);
    }
    p
}

/// The checker finds the loss when there is one: a planner that deletes
/// the master's pod while a write is only on it.
#[test]
fn the_checker_catches_a_planner_that_deletes_the_master() {
    let env = Env {
        planner: deletes_the_master,
        ..roll(3, 0)
    };
    let failed = check(env, "planner deleting the master");
    assert!(
        failed.contains(&"no deletion removes the only copy of an acknowledged write"),
        "{failed:?}"
    );
}

impl Traced for world::Sys {
    fn summary(&self) -> String {
        world::Sys::summary(self)
    }

    fn violation(&self) -> Option<&str> {
        self.violation.as_ref().map(|(_, v)| v.as_str())
    }
}
