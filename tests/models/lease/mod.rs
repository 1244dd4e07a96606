//! Model check of the reconciler's Lease election with stateright: two or
//! three electors, each the real decision code the daemon runs
//! (`valkyrie::kube::elector::decide::Local`), an API server holding the
//! Lease with a compare-and-swap on `resourceVersion`, and a network
//! between them, against every interleaving of deliveries, clock steps and
//! faults.
//!
//! The world: one global clock (no drift between the electors' monotonic
//! clocks) advancing in steps of 1 s; the elector's default timings
//! (`Timings::default`, 12 s / 8 s / 2 s) halved to 6 s / 4 s / 1 s, or
//! whole in the `default_timings` runs. Each elector does what the
//! elector's task does around `Local`: at every step it runs its demotion
//! timer, ends an attempt whose deadline passed, and starts the next
//! attempt when due (a GET); the GET's answer goes to `on_read`, whose
//! action becomes a POST or a PUT on the `resourceVersion` read; the
//! write's answer goes to `on_write`, a failure to `fail`. Requests and
//! answers are messages: within a second they are served and taken in any
//! order; only a fault carries one into a later second.
//!
//! Faults, each counted against a budget: a request delayed by 1 s up to
//! renew_deadline + 1 s (it may land after its attempt gave up); an answer
//! delayed by 1 s up to renew_deadline - 1 s (a write applied at once and
//! answered late; later is lost); a request or an answer lost; a request
//! refused (a 5xx or a refused connection, answered at once); an elector
//! stalled (a paused process: no timer, no attempt, no answer taken); an
//! elector crashed (its requests in flight may still land) and restarted
//! with empty local state and a new identity, as a new process has; an
//! elector stopped gracefully (it releases the Lease: no holder,
//! `leaseDurationSeconds: 1`) and restarted; an elector cut off from the
//! API server (everything it sends or is sent is lost). Resuming,
//! restarting and healing are free and happen at the end of any second; a
//! resumed elector runs its timers first and may take an answer that
//! waited for it before its next step.
//!
//! Properties (always):
//! - at most one elector believes it leads at any instant: leads by its own
//!   deadline (`Local::leads_at`, what a writer checks before acting),
//!   stalled ones included;
//! - a running elector's published leadership is never past its deadline;
//! - the term (`leaseTransitions`) stored never decreases, the terms led
//!   only grow from one leader to the next, and one term has one leader.
//!
//! Sometimes (so the checks are not vacuous): a takeover (a term above 0
//! led), a leader demoting itself by its deadline while the stored Lease
//! still names it.
//!
//! Liveness runs: one fault in the first 3 s, then every elector runs,
//! reaches the API server and gets every answer, in any order. Eventually
//! some elector leads; and at the horizon, 3 s plus one lease duration
//! (the worst case: a holder crashed right after a renew; one second less
//! fails), one does.
//!
//! Two runs show the checker catches violations: a store without the
//! compare-and-swap lets two electors lead, and a stalled process's
//! *published* leadership is stale (why writers check the deadline).
//! The default runs explore their whole space (a few seconds each): a run
//! that claims the whole space and stops at its state bound fails, one
//! that is bounded on purpose says so and prints whether it reached the
//! bound. `VALKYRIE_MODEL_STATES` changes the state bound; `cargo test
//! --release --test models -- --ignored lease::` runs the deeper ones
//! (minutes, depth first; docs/architecture.md has their figures).
#![cfg(feature = "kubernetes")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use stateright::{Checker, Model};
use tokio::time::Instant;

mod model;
mod world;

use crate::search::{Search, Traced, conclude, violated};
use world::*;

/// `VALKYRIE_MODEL_STATES`, or `default_states`: how many states a run may
/// generate.
fn bound(default_states: usize) -> usize {
    std::env::var("VALKYRIE_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_states)
}

/// Runs the checker, breadth first (or depth first: the memory of one path
/// instead of a frontier); returns the names of the properties it found
/// violated (an `always` or `eventually` with a counterexample, a
/// `sometimes` without an example), after printing their traces. A
/// [`Search::Whole`] run that stops at its bound fails.
fn check(
    env: Env,
    what: &str,
    default_states: usize,
    depth_first: bool,
    search: Search,
) -> Vec<&'static str> {
    let states = bound(default_states);
    let started = Instant::now();
    let builder = env.checker().threads(2).target_state_count(states);
    if depth_first {
        report(&builder.spawn_dfs().join(), what, states, search, started)
    } else {
        report(&builder.spawn_bfs().join(), what, states, search, started)
    }
}

/// Concludes the search (`search::conclude`), then returns the
/// properties found violated, after printing their traces.
fn report(
    checker: &impl Checker<Env>,
    what: &str,
    states: usize,
    search: Search,
    started: Instant,
) -> Vec<&'static str> {
    conclude(checker, what, states, search, started);
    violated(checker)
}

const NETWORK: Faults = Faults {
    network: true,
    process: false,
};
const PROCESS: Faults = Faults {
    network: false,
    process: true,
};
const ALL: Faults = Faults {
    network: true,
    process: true,
};

/// A safety run: `max_faults` faults of the kinds `faults`, the default
/// timings divided by `by`, `horizon` seconds.
fn safety(electors: usize, faults: Faults, max_faults: u8, by: u32, horizon: u32) -> Env {
    Env {
        electors,
        timings: timings(by),
        faults,
        max_faults,
        horizon,
        store: Store::CompareAndSwap,
        fair_from: None,
        published_check: false,
    }
}

/// A liveness run: one fault of any kind in the first `FAULTS_UNTIL`
/// seconds, then every elector runs and reaches the API server; by the
/// horizon (the faults' end plus one lease duration: the worst case, a
/// holder that crashed just after a renew) some elector leads.
fn liveness(electors: usize) -> Env {
    const FAULTS_UNTIL: u32 = 3;
    let timings = timings(2);
    Env {
        fair_from: Some(FAULTS_UNTIL),
        horizon: FAULTS_UNTIL + secs(timings.lease_duration),
        ..safety(electors, ALL, 1, 2, 0)
    }
}

fn assert_holds(env: Env, what: &str, default_states: usize, search: Search) {
    let failed = check(env, what, default_states, false, search);
    assert!(failed.is_empty(), "{what}: {failed:?}");
}

fn assert_holds_dfs(env: Env, what: &str, default_states: usize, search: Search) {
    let failed = check(env, what, default_states, true, search);
    assert!(failed.is_empty(), "{what}: {failed:?}");
}

/// Every interleaving of two electors with one fault of any kind, over
/// 10 s (a takeover takes 7).
#[test]
fn two_electors_under_one_fault_of_any_kind() {
    let env = safety(2, ALL, 1, 2, 10);
    assert_holds(
        env,
        "2 electors, 1 fault of any kind",
        1_000_000,
        Search::Whole,
    );
}

/// Every interleaving of two electors with two message faults (delays of
/// requests and answers, losses, refusals, a cut), over 8 s.
#[test]
fn two_electors_under_two_network_faults() {
    let env = safety(2, NETWORK, 2, 2, 8);
    assert_holds(
        env,
        "2 electors, 2 network faults",
        2_000_000,
        Search::Whole,
    );
}

/// Every interleaving of two electors with two process faults (stalls,
/// crashes, graceful stops), over 8 s.
#[test]
fn two_electors_under_two_process_faults() {
    let env = safety(2, PROCESS, 2, 2, 8);
    assert_holds(
        env,
        "2 electors, 2 process faults",
        1_000_000,
        Search::Whole,
    );
}

/// Every interleaving of three electors with one fault of any kind, over
/// 8 s.
#[test]
fn three_electors_under_one_fault_of_any_kind() {
    let env = safety(3, ALL, 1, 2, 8);
    assert_holds(
        env,
        "3 electors, 1 fault of any kind",
        2_000_000,
        Search::Whole,
    );
}

#[test]
fn two_electors_elect_a_leader_once_faults_stop() {
    assert_holds(
        liveness(2),
        "liveness, 2 electors, 1 fault",
        1_000_000,
        Search::Whole,
    );
}

#[test]
fn three_electors_elect_a_leader_once_faults_stop() {
    assert_holds(
        liveness(3),
        "liveness, 3 electors, 1 fault",
        1_000_000,
        Search::Whole,
    );
}

/// The checker finds a violation when there is one: with an API server
/// that applies a PUT on a stale `resourceVersion`, two challengers of an
/// expired Lease both win it.
#[test]
fn the_checker_catches_a_store_without_compare_and_swap() {
    let env = Env {
        store: Store::LastWriteWins,
        ..safety(2, PROCESS, 1, 2, 10)
    };
    let failed = check(
        env,
        "store without compare-and-swap",
        1_000_000,
        false,
        Search::Whole,
    );
    assert!(
        failed.contains(&"at most one elector leads at any instant"),
        "{failed:?}"
    );
}

/// What a stalled process *publishes* is not what it may act on: a leader
/// paused past its deadline still shows `Leading` on its channel until its
/// timer runs after it resumes, while another elector has taken over. Only
/// the deadline (`Local::leads_at`) is safe to act on; the checker finds
/// the stale value, and nothing else.
#[test]
fn a_stalled_leader_publishes_a_stale_leadership() {
    let env = Env {
        published_check: true,
        ..safety(2, PROCESS, 1, 2, 10)
    };
    let failed = check(env, "published leadership", 1_000_000, false, Search::Whole);
    assert_eq!(failed, ["at most one live elector publishes Leading"]);
}

/// Every interleaving of two electors with two faults of any kind, over
/// 10 s, depth first: the whole space (minutes unoptimised).
#[test]
#[ignore = "minutes: two faults of any kind in every interleaving"]
fn deep_two_electors_under_two_faults_of_any_kind() {
    let env = safety(2, ALL, 2, 2, 10);
    assert_holds_dfs(
        env,
        "2 electors, 2 faults of any kind",
        16_000_000,
        Search::Whole,
    );
}

/// Three electors, two faults of any kind, depth first. Bounded: 16
/// million generated states, short of the whole space.
#[test]
#[ignore = "minutes: bounded by VALKYRIE_MODEL_STATES"]
fn deep_three_electors_under_two_faults_of_any_kind() {
    let env = safety(3, ALL, 2, 2, 10);
    assert_holds_dfs(
        env,
        "3 electors, 2 faults of any kind",
        16_000_000,
        Search::Bounded,
    );
}

/// The elector's default timings whole (12 s / 8 s / 2 s): every
/// interleaving of two electors with one fault of any kind, over 18 s.
#[test]
fn default_timings_under_one_fault_of_any_kind() {
    let env = safety(2, ALL, 1, 1, 18);
    assert_holds(
        env,
        "default timings, 2 electors, 1 fault",
        1_000_000,
        Search::Whole,
    );
}

/// The default timings whole, every interleaving of two electors with
/// two faults of any kind, depth first: the whole space.
#[test]
#[ignore = "minutes: the default timings, two faults of any kind"]
fn deep_default_timings_under_two_faults_of_any_kind() {
    let env = safety(2, ALL, 2, 1, 18);
    assert_holds_dfs(
        env,
        "default timings, 2 electors, 2 faults",
        16_000_000,
        Search::Whole,
    );
}

/// Liveness after two faults: a request delayed past the faults' end may
/// still change the Lease, so the horizon is longer.
#[test]
#[ignore = "minutes: liveness after two faults of any kind"]
fn deep_liveness_after_two_faults() {
    let mut env = liveness(2);
    env.max_faults = 2;
    env.horizon = 3 + secs(env.timings.renew_deadline) + 1 + secs(env.timings.lease_duration);
    assert_holds(
        env,
        "liveness, 2 electors, 2 faults",
        16_000_000,
        Search::Whole,
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
