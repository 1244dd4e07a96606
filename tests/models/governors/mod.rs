//! Model check of the write fence under two governors, with stateright.
//! On Kubernetes every Valkyrie governs the master's `auto` fence, each
//! its own `Core` sending `CONFIG SET` on its own observations, while
//! the reconciler (in the Lease holder) replaces the replicas one at a
//! time for a rolling update. Here: the real `Core` twice, the holder's
//! and a follower's; a master (node 1) and two replicas (2 and 3).
//!
//! The update, as the reconciler does it, for replica 2 then 3: once
//! every replica is in sync in the holder's view, it publishes the mark
//! of the one to replace (the custom resource's status) and marks it in
//! its own core (`Core::retire`); it deletes the pod once the setting
//! its core last sent to the master asks no more than a majority of the
//! synced replicas that stay and the master acknowledged it, or none was
//! sent (`fence_relaxed`, on `Group::fence_sent`; its 2 s timeout never
//! comes into play: every setting lands within its second), and no
//! sooner than `FOLLOWERS_SETTLE` after publishing the mark. The pod
//! comes back as a new process and syncs; once the holder sees it in
//! sync, the marks are cleared (published, then in its core). The
//! follower applies the published marks whenever its watch reads them.
//!
//! The settle is a timing assumption, and nothing the holder sees can
//! replace it: an acknowledgement says only that the master ran the
//! holder's setting once, and the follower's may have overwritten it
//! since; the setting in force does not say either, as an older, tighter
//! one of the follower's may still be on its way. The followers read the
//! marks from their watch in milliseconds and relax with one `CONFIG
//! SET`; the model, whose clock counts whole seconds, states what the
//! settle gives: before the deletion the follower has read the marks and
//! every setting it sent has landed and been acknowledged.
//!
//! The world keeps Valkey's timing in whole seconds, as `fence` does:
//! each second every replica in sync acknowledges; the master takes
//! writes while its good replicas (acknowledged within
//! `min-replicas-max-lag`; counted each second, at `CONFIG SET` and as a
//! replica leaves or goes online, so always current here) are at least
//! `min-replicas-to-write`. Each second each governor observes every
//! node once (a tick, a PING, an INFO; a deleted pod refuses); its other
//! commands run at once, but each `CONFIG SET` it sends the master is in
//! flight: it runs there (the last one run winning) and its `OK` reaches
//! the core that sent it at a later step of the same second, in the
//! order that core sent them (one connection each). A core with two in
//! flight sends nothing more until one lands (a bound on the search).
//!
//! Nondeterministic: within each second, the order of the governors'
//! observations, of their settings landing, and of the update's steps
//! (mark, deletion, the pod's return, clearing); how long each step
//! waits; when the follower reads the marks. Replica 2's replacement is
//! the prior step that raises the follower's wanted setting: once 2 is
//! back in sync, the follower's next report lists both replicas again,
//! possibly just after 3 was marked (the real trace).
//!
//! Properties:
//! - (always) no write is refused because of the update: whenever every
//!   replica not published as retiring has its pod, is in sync and
//!   acknowledged within the lag, the master's good replicas are at
//!   least its `min-replicas-to-write`. A client may write at any moment
//!   and a write changes no setting, so this holds in every state;
//! - (sometimes) a pod is deleted; while a replica is marked, the master
//!   holds the follower's setting, above what the deletion waits for
//!   (the trigger is reached); the update completes.
//!
//! The tests, each search exhaustive (breadth first to the horizon; a
//! run that stops short fails), every setting in flight unless said:
//! - under the assumption (`Told::SettledBeforeDeletion`), the
//!   properties hold;
//! - the follower never reads the marks (before the fix): the search
//!   finds refused writes;
//! - the two cases the assumption leaves out, a follower slower than the
//!   settle: the search finds writes refused until the follower catches
//!   up; none is lost (the fence refuses a write, it drops none). The
//!   follower reads the marks only after the deletion (`Told::Anytime`;
//!   its settings run at once there, so that the late read alone
//!   refuses); or it reads them before, but its relaxed setting is still
//!   in flight at the deletion, its tighter one in force meanwhile
//!   (`Told::ReadBeforeDeletion`);
//! - the holder's settings alone in flight, the deletion waiting as it
//!   did before, for the setting in force (`fence_setting`), none counted
//!   as relaxed: the search finds refused writes, the deletion following
//!   a relaxed setting still on its way while the holder's older, tighter
//!   one lands; waiting on `fence_sent`, it finds none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod world;

use std::collections::BTreeSet;

use stateright::{Checker, Model, Property};
use tokio::time::Instant;
use valkyrie::core::group::write_fence::majority;

use crate::search::violated;
use world::{FOLLOWER, HOLDER, MAX_IN_FLIGHT, REPLICAS, Roll, SECOND, Sys};

/// The shortest update ends 2 s after the settled start, and the last
/// replica counts again 2 s after its marks are cleared (`RETIRED_GRACE`);
/// the rest lets every step wait.
const HORIZON: u64 = 9 * SECOND;
const REFUSED: &str = "no write is refused because of the update";

/// A second passes (once both cores observed this one and have nothing
/// in flight); a core observes every node; a core's oldest setting in
/// flight lands; the reconciler publishes the next replica's mark, then
/// marks it in the holder's core; the follower applies the published
/// marks; the reconciler deletes the marked replica's pod; the pod comes
/// back, a new process; the reconciler clears the marks (published, then
/// the holder's).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Second,
    Observe(usize),
    Land(usize),
    Mark,
    FollowerReads,
    Delete,
    Return,
    Clear,
}

/// When the follower applies the published marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Told {
    /// Never: only the holder knows them (before the fix).
    Never,
    /// Whenever its watch reads them, at the latest before the deletion,
    /// and by then every setting it sent has landed, acknowledged: what
    /// `FOLLOWERS_SETTLE` gives (the fix, as it is meant to work).
    SettledBeforeDeletion,
    /// Whenever its watch reads them, at the latest before the deletion,
    /// its settings maybe still in flight then: a follower slower to
    /// relax than the settle.
    ReadBeforeDeletion,
    /// Whenever its watch reads them, maybe after the deletion: a
    /// follower slower to read than the settle.
    Anytime,
}

/// What the deletion waits for, in the holder's core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// `fence_relaxed` (its settle is the follower's, in `Told`): the
    /// setting last sent relaxed and acknowledged, or none sent.
    Acknowledged,
    /// As it was: the setting in force relaxed, or none acknowledged.
    InForce,
}

struct Env {
    told: Told,
    wait: Wait,
    /// Whose settings are in flight: the holder's, the follower's.
    delayed: [bool; 2],
}

impl Env {
    /// The deletion's wait, over `need`: the holder's fence relaxed, then
    /// the follower as far as `told` has it.
    fn may_delete(&self, s: &Sys, need: u64) -> bool {
        let holder = &s.cores[HOLDER].groups()["g"];
        let relaxed = match self.wait {
            Wait::Acknowledged => holder
                .fence_sent()
                .is_none_or(|(sent, acknowledged)| sent.replicas <= need && acknowledged),
            Wait::InForce => holder.fence_setting().is_none_or(|f| f.replicas <= need),
        };
        let read = s.follower_marks == s.published;
        let landed = s.in_flight[FOLLOWER].is_empty();
        relaxed
            && match self.told {
                Told::Never | Told::Anytime => true,
                Told::ReadBeforeDeletion => read,
                Told::SettledBeforeDeletion => read && landed,
            }
    }
}

impl Model for Env {
    type State = Sys;
    type Action = Action;

    fn init_states(&self) -> Vec<Sys> {
        vec![Sys::settled(self.delayed)]
    }

    fn actions(&self, s: &Sys, actions: &mut Vec<Action>) {
        if s.refused.is_some() || s.now >= HORIZON {
            return;
        }
        if s.observed == [true; 2] && s.in_flight.iter().all(|q| q.is_empty()) {
            actions.push(Action::Second);
        }
        let room = |c: usize| s.in_flight[c].len() < MAX_IN_FLIGHT;
        for c in [HOLDER, FOLLOWER] {
            if !s.observed[c] && room(c) {
                actions.push(Action::Observe(c));
            }
            if !s.in_flight[c].is_empty() {
                actions.push(Action::Land(c));
            }
        }
        if self.told != Told::Never && s.follower_marks != s.published && room(FOLLOWER) {
            actions.push(Action::FollowerReads);
        }
        match s.roll {
            Roll::Next(_) if REPLICAS.iter().all(|r| s.in_sync(*r)) && room(HOLDER) => {
                actions.push(Action::Mark);
            }
            Roll::Marked { need, .. } if self.may_delete(s, need) => actions.push(Action::Delete),
            Roll::Deleted(_) if !s.pods[&s.leaving()].up => actions.push(Action::Return),
            Roll::Deleted(_) if s.in_sync(s.leaving()) => actions.push(Action::Clear),
            _ => {}
        }
    }

    fn next_state(&self, s: &Sys, action: Action) -> Option<Sys> {
        let mut s = s.clone();
        // None once the update is done: then only seconds, observations,
        // landings and the follower's last read come.
        let r = if s.roll == Roll::Done { 0 } else { s.leaving() };
        match (action, s.roll.clone()) {
            (Action::Second, _) => s.second(),
            (Action::Observe(c), _) => s.observe(c),
            (Action::Land(c), _) => s.land(c),
            (Action::Mark, Roll::Next(i)) => {
                // `fence_relaxed`'s bound, from the observation the step
                // was planned on.
                let staying = REPLICAS.iter().filter(|p| **p != r && s.in_sync(**p));
                let need = majority(staying.count() as u64);
                s.published = BTreeSet::from([r]);
                s.retire(HOLDER, &BTreeSet::from([r]));
                s.roll = Roll::Marked { i, need };
            }
            (Action::FollowerReads, _) => {
                s.follower_marks = s.published.clone();
                s.retire(FOLLOWER, &s.published.clone());
            }
            (Action::Delete, Roll::Marked { i, .. }) => {
                let pod = s.pods.get_mut(&r).unwrap();
                (pod.up, pod.synced) = (false, false);
                // Its connection closes: the master drops it at once.
                s.acks.remove(&r);
                s.roll = Roll::Deleted(i);
            }
            (Action::Return, _) => {
                let pod = s.pods.get_mut(&r).unwrap();
                (pod.up, pod.run) = (true, pod.run + 1);
            }
            (Action::Clear, Roll::Deleted(i)) => {
                s.published.clear();
                s.retire(HOLDER, &BTreeSet::new());
                let last = i + 1 == REPLICAS.len();
                s.roll = if last { Roll::Done } else { Roll::Next(i + 1) };
            }
            (action, roll) => unreachable!("{action:?} in {roll:?}"),
        }
        s.check();
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::<Self>::always(REFUSED, |_, s| s.refused.is_none()),
            Property::<Self>::sometimes("a pod is deleted", |_, s| {
                matches!(s.roll, Roll::Deleted(_))
            }),
            Property::<Self>::sometimes(
                "the follower sets more than the holder waits for",
                |_, s| {
                    matches!(s.roll, Roll::Marked { need, .. }
                        if s.set_by == Some(FOLLOWER) && s.min_replicas > need)
                },
            ),
            Property::<Self>::sometimes("the update completes", |_, s| s.roll == Roll::Done),
        ]
    }
}

/// A trace: each state, and the action taken from it.
type Trace = Vec<(Sys, Option<Action>)>;

/// The properties the search found violated, after printing their
/// traces, and the trace of the refusal found, if any; a search that
/// stops short fails. A search that finds an example of every property
/// (a counterexample of the `always`) ends there.
fn check(env: Env) -> (Vec<&'static str>, Option<Trace>) {
    let started = Instant::now();
    let what = format!(
        "follower told {:?}, deletion waits {:?}, in flight (holder, follower) {:?}",
        env.told, env.wait, env.delayed
    );
    let checker = env.checker().threads(2).spawn_bfs().join();
    eprintln!(
        "governors, {what}: explored {} unique states, {} generated (max depth {}) in {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    assert!(checker.is_done(), "the search stopped short");
    let refusal = checker.discovery(REFUSED).map(|p| p.into_vec());
    (violated(&checker), refusal)
}

/// Every setting in flight, the deletion waiting on `fence_sent`.
fn env(told: Told) -> Env {
    Env {
        told,
        wait: Wait::Acknowledged,
        delayed: [true; 2],
    }
}

/// The fix: the follower has read the marks and its settings have
/// landed before the deletion (the settle), and no write is refused for
/// the update.
#[test]
fn with_the_follower_settled_before_the_deletion_no_write_is_refused() {
    let (violated, _) = check(env(Told::SettledBeforeDeletion));
    assert_eq!(violated, Vec::<&str>::new(), "properties violated");
}

/// The check is not vacuous: with the marks known to the holder alone
/// (before the fix), the follower sets the fence back to 2 of 2 while the
/// marked replica is deleted, as in the real update.
#[test]
fn without_the_marks_the_follower_refuses_writes() {
    let (violated, _) = check(env(Told::Never));
    assert_eq!(violated, vec![REFUSED], "the refusal not found");
}

/// What the settle rests on, reading: a follower that reads the marks
/// only after the deletion refuses writes until it does. Its settings
/// run at once here, so that nothing else refuses.
#[test]
fn marks_read_after_the_deletion_come_too_late() {
    let delayed = [true, false];
    let (violated, refusal) = check(Env {
        delayed,
        ..env(Told::Anytime)
    });
    assert_eq!(violated, vec![REFUSED], "the refusal not found");
    let trace = refusal.unwrap();
    let last = &trace.last().unwrap().0;
    assert_ne!(
        last.follower_marks, last.published,
        "read before the deletion"
    );
}

/// What the settle rests on, relaxing: a follower that read the marks
/// before the deletion, its relaxed setting still in flight then, refuses
/// writes until that setting lands. The holder's acknowledged setting
/// does not cover it: the follower's tighter one was run after it.
#[test]
fn a_relaxed_setting_landing_after_the_deletion_comes_too_late() {
    let (violated, refusal) = check(env(Told::ReadBeforeDeletion));
    assert_eq!(violated, vec![REFUSED], "the refusal not found");
    let trace = refusal.unwrap();
    let early = trace.iter().any(|(s, action)| {
        *action == Some(Action::Delete)
            && s.follower_marks == s.published
            && !s.in_flight[FOLLOWER].is_empty()
    });
    assert!(early, "no deletion with the follower's setting in flight");
    assert_eq!(
        trace.last().unwrap().0.set_by,
        Some(FOLLOWER),
        "set by the holder"
    );
}

/// What the wait on `fence_sent` fixed, with the holder's settings alone
/// in flight: waiting for the setting in force, none counted as relaxed,
/// the deletion goes ahead while the holder's relaxed setting is on its
/// way, and its older, tighter one lands; waiting on `fence_sent`, none
/// is refused.
#[test]
fn waiting_for_the_setting_in_force_deletes_too_early() {
    let delayed = [true, false];
    let old = Env {
        wait: Wait::InForce,
        delayed,
        ..env(Told::SettledBeforeDeletion)
    };
    let (violated, refusal) = check(old);
    assert_eq!(violated, vec![REFUSED], "the refusal not found");
    let trace = refusal.unwrap();
    let last = &trace.last().unwrap().0;
    assert_eq!(last.set_by, Some(HOLDER), "set by the follower");
    let (violated, _) = check(Env {
        delayed,
        ..env(Told::SettledBeforeDeletion)
    });
    assert_eq!(violated, Vec::<&str>::new(), "properties violated");
}
