//! How far a model check went, for the model tests that state a bound
//! (`peers`, `lease`): a run that claims the whole space fails when it
//! stopped at its bound instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;

use std::fmt::Write as _;

use stateright::{Checker, Expectation, Model};
use tokio::time::Instant;

/// What a run claims to have explored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// The whole space: a run that stops at its state bound fails.
    Whole,
    /// Up to the state bound, on purpose (the space is larger): the run
    /// prints whether it reached the bound.
    Bounded,
}

/// Prints how far the search went and, for a [`Search::Whole`] run,
/// fails unless it ran out of states. stateright stops at the bound only
/// once it has generated at least that many states (it looks between
/// blocks of states), and `is_done` is true either way; so a run that
/// generated fewer than the bound ended because nothing was left.
pub fn conclude<M>(
    checker: &impl Checker<M>,
    what: &str,
    states: usize,
    search: Search,
    started: Instant,
) where
    M: Model,
    M::State: Debug,
{
    let exhausted = checker.state_count() < states;
    eprintln!(
        "{what}: {} unique states, {} generated (max depth {}, bound {states}): {} in {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        if exhausted {
            "the whole space"
        } else {
            "bounded, stopped at the bound"
        },
        started.elapsed()
    );
    assert!(
        exhausted || search == Search::Bounded,
        "{what}: the search stopped at its bound of {states} generated states ({} unique, \
         {} generated) before exploring the whole space it claims; raise \
         VALKYRIE_MODEL_STATES",
        checker.unique_state_count(),
        checker.state_count()
    );
}

/// A state whose trace a failed check prints: a line of summary, and
/// the invariant it broke, if any.
pub trait Traced {
    /// One line.
    fn summary(&self) -> String;
    /// What it broke.
    fn violation(&self) -> Option<&str>;
}

/// The properties `checker` found violated (an `always` or `eventually`
/// with a counterexample, a `sometimes` without an example), after
/// printing their traces.
pub fn violated<M>(checker: &impl Checker<M>) -> Vec<&'static str>
where
    M: Model,
    M::State: Traced + Clone + PartialEq,
    M::Action: Debug + Clone + PartialEq,
{
    let mut failed = Vec::new();
    for p in checker.model().properties() {
        let found = checker.discovery(p.name);
        let violated = matches!(
            (p.expectation, &found),
            (Expectation::Always | Expectation::Eventually, Some(_))
                | (Expectation::Sometimes, None)
        );
        if !violated {
            continue;
        }
        failed.push(p.name);
        let Some(path) = found else {
            eprintln!("  no example of \"{}\"", p.name);
            continue;
        };
        let mut trace = format!("  trace of \"{}\":\n", p.name);
        for (state, action) in path.into_vec() {
            let _ = writeln!(trace, "    {}", state.summary());
            match (action, state.violation()) {
                (Some(action), _) => {
                    let _ = writeln!(trace, "    -> {action:?}");
                }
                (None, Some(v)) => {
                    let _ = writeln!(trace, "    VIOLATION: {v}");
                }
                (None, None) => {}
            }
        }
        eprintln!("{trace}");
    }
    failed
}
