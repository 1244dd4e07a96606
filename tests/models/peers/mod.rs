//! Model check of the peer protocol with stateright: two or three real
//! Valkyrie cores (`valkyrie::core::Core`, the code the daemon runs) and
//! one model of a real Sentinel 8.0.1 peer, over a master and two
//! replicas, against interleavings of hellos, `is-master-down-by-addr`
//! questions and answers, commands to the data nodes, and faults.
//!
//! The world: node 1 is the master, nodes 2 and 3 its replicas (offsets 10
//! and 8); quorum 2, `down-after` 1 s, `failover-timeout` 2 s. The master
//! dies after two quiet rounds in which everyone saw it and each other, so
//! every run is about one failover. Time advances in ticks of 500 ms, when
//! nothing is in flight: at every tick each live sentinel sees the data
//! nodes (or cannot reach them) and pings its peers, then runs its timer
//! (the order is a choice). Between ticks the Sentinel model's timer may
//! run again (it runs ten times a second). Hellos go out every 2 s and at
//! once after a promotion; a hello that could change nothing at its
//! receiver (no higher current or config epoch) is not sent, since
//! processing it is a no-op.
//!
//! Messages between sentinels travel through a network in the model
//! state, at most one per (kind, sender, receiver) (a newer one replaces
//! an older one, which is then lost). A question is answered when it is
//! delivered, in the same step (a round trip on the peer link). The
//! checker delivers messages one at a time in any order, or, in the
//! coarser runs, everything one sentinel sent at once. Faults, each
//! counted against a budget: a hello or question lost or delivered twice;
//! an answer lost; time passing while messages are in flight (a delay); a
//! command to a data node lost; a Valkyrie crashing, between any two
//! steps or between persisting a vote and sending its answer (it
//! restarts, at a quiet moment, from what its `Persist` outputs recorded
//! and nothing else); a sentinel cut off from everyone, the other
//! sentinels and the data nodes (it heals at a quiet moment); replica 2
//! dying; the old master coming back. With one fault, faults involving V0 stand for those
//! of any Valkyrie (the model is symmetric in them). The Valkyries'
//! jitters are 0 or 50 ms, each combination an initial state; a candidacy
//! delayed by the jitter starts at the next tick (the liveness rounds
//! step a core at its `next_deadline`).
//!
//! The Sentinel model (spec §4–§6, faithful and small): one vote per epoch,
//! first come first served, moving its current epoch up; `down` answers
//! from its own SDOWN; ODOWN by quorum of fresh answers (forgotten after
//! 5 s); candidacies on ODOWN with the `2 × failover-timeout` back-off
//! (restarted by a vote for another, plus its jitter), `++current_epoch`,
//! forced vote requests, asking with its *current* epoch; votes counted
//! against its current epoch (upstream bug L3) with its own vote for the
//! front-runner; election timeout `min(10 s, failover-timeout)`;
//! promotion of the best replica it sees, the new configuration stamped
//! with the failover epoch once the replica reports the master role, the
//! others reconfigured, a forced hello; blind adoption of a strictly
//! higher config epoch from hellos (cancelling any failover in progress,
//! free to fail over again at once). Left out: its TILT, its restarts,
//! and the 8 s corrections of §6.3 (beyond the horizon).
//!
//! Properties (always):
//! - one configuration per config epoch across all sentinels (every
//!   sentinel that advertises a config epoch names the same master for
//!   it), and each sentinel's config epoch only grows, its master changing
//!   only with it, across crash-restarts;
//! - one vote per voter per epoch (every `+vote-for-leader` is recorded in
//!   a ghost that survives crashes), and every vote an answer reports was
//!   granted as announced;
//! - at most one promoting sentinel (`REPLICAOF NO ONE`) per epoch, and
//!   never two data nodes promoted in one epoch;
//! - a Valkyrie promotes only in an epoch in which a majority of all
//!   sentinels (and at least the quorum) voted for it;
//! - no promotion by a partitioned sentinel in an epoch it started after
//!   being cut off.
//!
//! Sometimes: a Valkyrie promotes, the Sentinel model promotes, everybody
//! agrees on a new master (so the checks are not vacuous).
//!
//! Eventually (fair rounds: every round time passes, every message and
//! command in flight is delivered, cores are stepped at their deadlines;
//! faults only in the first rounds; the random delays of different
//! daemons differ): every sentinel advertises the same live new master
//! with the same config epoch.
//!
//! `cargo test` explores the whole space of each default run: a run that
//! claims the whole space and stops at its state bound fails, one that is
//! bounded on purpose says so and prints whether it reached the bound.
//! `VALKYRIE_MODEL_STATES` changes the bound (stateright counts generated
//! states against it). `cargo test --release --test models -- --ignored
//! peers::` runs the deeper ones (minutes each; docs/architecture.md has
//! their figures). `VALKYRIE_MODEL_SHOW=<words of a property
//! name>` prints the trace of its example.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;

use stateright::{Checker, Expectation, Model};
use tokio::time::Instant;
use valkyrie::core::Millis;

mod model;
mod network;
mod sentinel;
mod time;
mod world;

use crate::search::{Search, conclude};
use model::*;
use world::*;

/// Breadth first.
fn run(env: Env, what: &str, default_states: usize, search: Search) {
    let states = bound(default_states);
    let started = Instant::now();
    let checker = env
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_bfs()
        .join();
    conclude(&checker, what, states, search, started);
    report(&checker, what);
}

/// As [`run`], depth first: the same space when it is explored whole,
/// with a memory of one path instead of a breadth-first frontier (millions
/// of states of a few kilobytes each); counterexamples are longer.
fn run_dfs(env: Env, what: &str, default_states: usize, search: Search) {
    let states = bound(default_states);
    let started = Instant::now();
    let checker = env
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_dfs()
        .join();
    conclude(&checker, what, states, search, started);
    report(&checker, what);
}

/// `VALKYRIE_MODEL_STATES`, or `default_states`: how many states (counted
/// as generated, duplicates included) a run may generate.
fn bound(default_states: usize) -> usize {
    std::env::var("VALKYRIE_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_states)
}

fn report(checker: &impl Checker<Env>, what: &str) {
    // `VALKYRIE_MODEL_SHOW=<words of a property name>` prints its example.
    let show = std::env::var("VALKYRIE_MODEL_SHOW").unwrap_or_default();
    let mut failures = Vec::new();
    for p in checker.model().properties() {
        let found = checker.discovery(p.name);
        let failed = match (p.expectation, &found) {
            (Expectation::Always | Expectation::Eventually, Some(_)) => true,
            (Expectation::Sometimes, None) => {
                eprintln!("no example of \"{}\" within the bound", p.name);
                true
            }
            _ => false,
        };
        let shown = !show.is_empty() && p.name.contains(show.as_str());
        if let Some(path) = found
            && (failed || shown)
        {
            let mut trace = format!("trace of \"{}\":\n", p.name);
            let states = path.clone().into_states();
            if let Some(init) = states.first() {
                let jitters: Vec<Millis> = init.vals.iter().map(|v| v.jitter).collect();
                let _ = writeln!(
                    trace,
                    "  jitters: Valkyries {jitters:?}, Sentinel model {}",
                    init.sen.jitter
                );
            }
            for (state, action) in path.into_vec() {
                let _ = writeln!(trace, "  {}", state.summary());
                if let Some(action) = action {
                    let _ = writeln!(trace, "  -> {action:?}");
                } else if let Some(v) = &state.violation {
                    let _ = writeln!(trace, "  VIOLATION: {v}");
                }
            }
            eprintln!("{trace}");
        }
        if failed {
            failures.push(p.name);
        }
    }
    assert!(failures.is_empty(), "{what}: {failures:?}");
}

/// Every combination of `choices`, one per Valkyrie.
fn jitter_sets(valkyries: u8, choices: &[Millis]) -> Vec<Vec<Millis>> {
    let mut sets: Vec<Vec<Millis>> = vec![Vec::new()];
    for _ in 0..valkyries {
        sets = sets
            .into_iter()
            .flat_map(|c| {
                choices.iter().map(move |j| {
                    let mut c = c.clone();
                    c.push(*j);
                    c
                })
            })
            .collect();
    }
    sets
}

/// Distinct jitters (random delays differ; ties are what randomness
/// breaks), in both orders.
fn distinct_jitters(valkyries: u8) -> Vec<Vec<Millis>> {
    let up: Vec<Millis> = (0..Millis::from(valkyries)).map(|i| i * 30).collect();
    let mut down = up.clone();
    down.reverse();
    vec![up, down]
}

/// Random walks (a fixed seed) with faults: deep traces with several
/// faults, where the exhaustive runs stop at one or two. Counts visited
/// states (stateright keeps no set of them in this mode).
fn simulate(env: Env, what: &str, default_states: usize) {
    let states = bound(default_states);
    let seed = std::env::var("VALKYRIE_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let started = Instant::now();
    let checker = env
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_simulation(seed, FaultChooser)
        .join();
    eprintln!(
        "{what}: visited {} states in random walks (max depth {}, seed {seed}): bounded, \
         by {states} states, in {:.1?}",
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    report(&checker, what);
}

/// A safety run: 2 or 3 Valkyries, every jitter combination of 0 and
/// [`JITTER`], the Sentinel model's jitter 0.
fn safety(valkyries: u8, max_faults: u8, faults: Faults) -> Env {
    Env {
        valkyries,
        jitters: jitter_sets(valkyries, &[0, JITTER]),
        sen_jitters: vec![0],
        max_faults,
        faults,
        v0_faults: max_faults == 1,
        batched: false,
        persist_epoch: true,
        horizon: 4_000,
        liveness: None,
    }
}

/// Every kind of fault.
fn all_faults() -> Faults {
    Faults {
        delay: true,
        drop: true,
        duplicate: true,
        lose_answer: true,
        lose_command: true,
        crash: true,
        partition: true,
        replica: true,
        revive: true,
        silence: false,
    }
}

/// A liveness run: fair rounds, faults (partitions, crashes, rounds that
/// lose everything in flight) only before `window`, distinct jitters
/// (the random delays differ: ties are what randomness breaks), the
/// Sentinel model's jitter 0 or 900.
fn liveness(valkyries: u8, max_faults: u8, window: Millis, horizon: Millis) -> Env {
    Env {
        valkyries,
        jitters: distinct_jitters(valkyries),
        sen_jitters: vec![0, 900],
        max_faults,
        faults: Faults {
            crash: true,
            partition: true,
            silence: true,
            ..Faults::default()
        },
        v0_faults: false,
        batched: false,
        persist_epoch: true,
        horizon,
        liveness: Some(window),
    }
}

/// Two Valkyries and the Sentinel model, every interleaving of every
/// message and command, no fault: the whole space.
#[test]
fn peers_are_safe_in_every_interleaving() {
    run(
        safety(2, 0, Faults::default()),
        "every interleaving, no fault",
        1_000_000,
        Search::Whole,
    );
}

/// Any one fault of every kind, at any point: a lost, duplicated or
/// delayed message, a lost answer, a lost command, a Valkyrie crash (and
/// restart from its state file), a partition (and its healing), replica
/// 2 dying, the old master coming back. Deliveries by sender (everything
/// one sentinel sent, at once, in a fixed order). The whole space.
#[test]
fn peers_are_safe_with_any_one_fault() {
    let mut env = safety(2, 1, all_faults());
    env.batched = true;
    env.horizon = 3_500;
    run(
        env,
        "any one fault, deliveries by sender",
        1_000_000,
        Search::Whole,
    );
}

/// A Valkyrie crash at any point, also in the middle of answering a
/// question (its vote persisted, the answer never sent), restarting from
/// the group states alone (no current epoch kept: what the `Persist`
/// outputs carry must hold every vote). Deliveries by sender. The whole
/// space.
#[test]
fn votes_survive_restarts_from_the_group_states_alone() {
    let faults = Faults {
        crash: true,
        ..Faults::default()
    };
    let mut env = safety(2, 1, faults);
    env.batched = true;
    env.persist_epoch = false;
    run(env, "a crash, group states alone", 1_000_000, Search::Whole);
}

/// Three Valkyries and the Sentinel model (four voters: a majority is 3),
/// deliveries by sender, no fault: the whole space.
#[test]
fn three_valkyries_and_a_sentinel_are_safe() {
    let mut env = safety(3, 0, Faults::default());
    env.batched = true;
    run(
        env,
        "three Valkyries, deliveries by sender",
        1_000_000,
        Search::Whole,
    );
}

/// Liveness: up to two faults in the first two seconds (a partition, a
/// crash, a round that loses everything in flight); after that, fair
/// rounds. Every sentinel ends up advertising the same new master.
#[test]
fn peers_agree_on_a_new_master_after_faults() {
    run(
        liveness(2, 2, 3_000, 12_000),
        "liveness, two Valkyries",
        1_000_000,
        Search::Whole,
    );
}

/// Liveness with three Valkyries and the Sentinel model.
#[test]
fn three_valkyries_and_a_sentinel_agree_after_faults() {
    run(
        liveness(3, 2, 3_000, 12_000),
        "liveness, three Valkyries",
        1_000_000,
        Search::Whole,
    );
}

// Deeper runs (`cargo test --test models -- --ignored peers::`; minutes
// each, see the numbers in the report of each run).

/// Any one fault except delays, every interleaving.
#[test]
#[ignore = "minutes: the whole space of one fault in every interleaving"]
fn deep_any_one_fault_in_every_interleaving() {
    let mut faults = all_faults();
    faults.delay = false;
    run_dfs(
        safety(2, 1, faults),
        "deep: one fault, every interleaving",
        100_000_000,
        Search::Whole,
    );
}

/// A crash, every interleaving, restarting from the group states alone
/// (no current epoch kept): the whole space.
#[test]
#[ignore = "minutes"]
fn deep_crash_without_the_current_epoch_persisted() {
    let faults = Faults {
        crash: true,
        ..Faults::default()
    };
    let mut env = safety(2, 1, faults);
    env.persist_epoch = false;
    run_dfs(
        env,
        "deep: a crash, current epoch not persisted",
        100_000_000,
        Search::Whole,
    );
}

/// Two faults of every kind, deliveries by sender, the Sentinel model's
/// jitter 0 or 900 (bounded: 20 million generated states; the whole space
/// is far larger).
#[test]
#[ignore = "bounded by VALKYRIE_MODEL_STATES"]
fn deep_any_two_faults() {
    let mut env = safety(2, 2, all_faults());
    env.batched = true;
    env.sen_jitters = vec![0, 900];
    run_dfs(
        env,
        "deep: two faults, deliveries by sender",
        20_000_000,
        Search::Bounded,
    );
}

/// Three Valkyries, any one fault, deliveries by sender: the whole space.
#[test]
#[ignore = "minutes"]
fn deep_three_valkyries_one_fault() {
    let mut env = safety(3, 1, all_faults());
    env.batched = true;
    run_dfs(
        env,
        "deep: three Valkyries, one fault",
        100_000_000,
        Search::Whole,
    );
}

/// Liveness with three faults in the first four seconds: the whole space.
#[test]
#[ignore = "minutes"]
fn deep_liveness_three_faults() {
    run_dfs(
        liveness(2, 3, 5_000, 16_000),
        "deep: liveness, three faults",
        100_000_000,
        Search::Whole,
    );
}

/// Random walks with up to three faults of every kind, every
/// interleaving, a longer horizon, no current epoch persisted, the
/// Sentinel model's jitter 0 or 900 (`VALKYRIE_MODEL_SEED` picks the
/// walks). Bounded: 4 million visited states.
#[test]
#[ignore = "bounded by VALKYRIE_MODEL_STATES"]
fn deep_random_walks_with_three_faults() {
    let mut env = safety(2, 3, all_faults());
    env.v0_faults = false;
    env.persist_epoch = false;
    env.sen_jitters = vec![0, 900];
    env.horizon = 8_000;
    simulate(env, "deep: random walks, three faults", 4_000_000);
}
