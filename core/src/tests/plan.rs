//! Planned switchovers: order, concurrency, window, pre-flight and stop.

use std::collections::BTreeMap;

use super::*;
use crate::plan::{Action, Facts, Failure, Plan, PlanError, PlanSpec, State, Step, Stop, Window};

/// One group as the plan's facts see it.
#[derive(Clone)]
struct Seen {
    master: Addr,
    master_down: bool,
    running: bool,
    readiness: Readiness,
    unlinked: Vec<Addr>,
}

fn ready(target: u16) -> Readiness {
    Readiness {
        ready: true,
        holds: Vec::new(),
        trigger: Trigger::Odown,
        candidate: None,
        replicas: Vec::new(),
        quorum: None,
        fence: FenceView::Off,
        witnesses: None,
        manual: Ok(a(target)),
    }
}

fn seen(master: u16) -> Seen {
    Seen {
        master: a(master),
        master_down: false,
        running: false,
        readiness: ready(master + 1),
        unlinked: Vec::new(),
    }
}

struct World(BTreeMap<String, Seen>);

impl World {
    fn new(groups: &[(&str, u16)]) -> World {
        World(
            groups
                .iter()
                .map(|(g, m)| (g.to_string(), seen(*m)))
                .collect(),
        )
    }

    fn step(&self, plan: &mut Plan, now: Millis) -> Vec<String> {
        let actions = plan.step(now, |g| {
            self.0.get(g).map(|s| Facts {
                master: &s.master,
                master_down: s.master_down,
                failover_running: s.running,
                readiness: &s.readiness,
                unlinked: s.unlinked.clone(),
                failover_timeout: 10_000,
            })
        });
        actions
            .into_iter()
            .map(|Action { group, .. }| group)
            .collect()
    }

    fn get(&mut self, g: &str) -> &mut Seen {
        self.0.get_mut(g).unwrap()
    }

    /// The switchover of `g` promotes master + 1.
    fn switched(&mut self, g: &str) {
        let s = self.get(g);
        s.master = a(s.master.port + 1);
        s.running = false;
    }
}

fn spec(groups: &[&str], concurrency: usize) -> PlanSpec {
    PlanSpec {
        groups: groups.iter().map(|g| g.to_string()).collect(),
        concurrency,
        window: Window {
            start: 0,
            end: None,
        },
    }
}

fn step_of<'a>(plan: &'a Plan, g: &str) -> &'a Step {
    plan.steps().find(|(n, _)| *n == g).unwrap().1
}

#[test]
fn groups_go_in_order_within_the_concurrency() {
    let mut w = World::new(&[("a", 100), ("b", 200), ("c", 300)]);
    let mut plan = Plan::new(spec(&["a", "b", "c"], 2), 0).unwrap();
    assert_eq!(w.step(&mut plan, 10), ["a", "b"]);
    plan.answered("a", Ok(()));
    plan.answered("b", Ok(()));
    w.get("a").running = true;
    assert!(w.step(&mut plan, 20).is_empty(), "two are running");
    w.switched("a");
    assert_eq!(w.step(&mut plan, 30), ["c"]);
    assert_eq!(
        *step_of(&plan, "a"),
        Step::Done {
            from: a(100),
            to: a(101),
            took: 20
        }
    );
    w.switched("b");
    w.switched("c");
    plan.answered("c", Ok(()));
    assert!(w.step(&mut plan, 40).is_empty());
    assert_eq!(plan.state(40), State::Completed);
    assert_eq!(plan.finished(), Some(40));
    assert!(plan.failure().is_none());
}

#[test]
fn the_first_group_failing_its_preflight_stops_the_plan_and_spares_the_rest() {
    let mut w = World::new(&[("a", 100), ("b", 200), ("c", 300)]);
    w.get("b").readiness.holds.push(Reason::Paused);
    let mut plan = Plan::new(spec(&["a", "b", "c"], 3), 0).unwrap();
    assert_eq!(w.step(&mut plan, 10), ["a"]);
    assert_eq!(plan.state(10), State::Stopping, "a still runs");
    assert_eq!(*step_of(&plan, "c"), Step::Waiting);
    plan.answered("a", Ok(()));
    w.switched("a");
    // b is ready by now: a stopped plan starts nothing any more.
    w.get("b").readiness.holds.clear();
    assert!(w.step(&mut plan, 20).is_empty());
    assert_eq!(plan.state(20), State::Failed);
    let (group, failure) = plan.failure().unwrap();
    assert_eq!(group, "b");
    assert_eq!(*failure, Failure::NotReady(Reason::Paused));
    assert_eq!(failure.label(), "not_ready");
    assert!(
        failure.describe(20).contains("paused"),
        "{}",
        failure.describe(20)
    );
    assert_eq!(*step_of(&plan, "c"), Step::Waiting);
}

#[test]
fn every_preflight_rule_is_enforced() {
    type Breaks = Box<dyn Fn(&mut Seen)>;
    let cases: Vec<(Breaks, &str)> = vec![
        (Box::new(|s| s.master_down = true), "master_down"),
        (
            Box::new(|s| s.readiness.manual = Err(AdminError::NoGoodReplica)),
            "no_replica",
        ),
        (
            Box::new(|s| s.unlinked = vec![a(7000)]),
            "replicas_not_in_sync",
        ),
        (
            Box::new(|s| {
                s.readiness.fence = FenceView::Relaxed {
                    in_force: 1,
                    full: 2,
                }
            }),
            "fence_relaxed",
        ),
        (
            Box::new(|s| {
                s.readiness.holds.push(Reason::Tilt {
                    since: 0,
                    until: None,
                });
            }),
            "not_ready",
        ),
    ];
    for (break_it, label) in cases {
        let mut w = World::new(&[("a", 100)]);
        break_it(w.get("a"));
        let mut plan = Plan::new(spec(&["a"], 1), 0).unwrap();
        assert!(w.step(&mut plan, 1).is_empty(), "{label}");
        assert_eq!(plan.state(1), State::Failed, "{label}");
        assert_eq!(plan.failure().unwrap().1.label(), label);
    }
    let w = World::new(&[]);
    let mut plan = Plan::new(spec(&["gone"], 1), 0).unwrap();
    assert!(w.step(&mut plan, 1).is_empty());
    assert_eq!(plan.failure().unwrap().1, &Failure::GroupGone);
}

#[test]
fn nothing_starts_outside_the_window() {
    let w = World::new(&[("a", 100), ("b", 200)]);
    let mut s = spec(&["a", "b"], 1);
    s.window = Window {
        start: 1_000,
        end: Some(2_000),
    };
    let mut plan = Plan::new(s, 0).unwrap();
    assert!(w.step(&mut plan, 999).is_empty());
    assert_eq!(plan.state(999), State::Scheduled);
    assert_eq!(w.step(&mut plan, 1_000), ["a"]);
    plan.answered("a", Ok(()));
    // a never finishes within the window; b must not start after it.
    assert!(w.step(&mut plan, 2_000).is_empty());
    assert_eq!(plan.stop(), Some(&Stop::WindowClosed));
    assert_eq!(plan.state(2_000), State::Stopping);
    assert_eq!(*step_of(&plan, "b"), Step::Waiting);
}

#[test]
fn a_refused_request_stops_the_plan() {
    let w = World::new(&[("a", 100), ("b", 200)]);
    let mut plan = Plan::new(spec(&["a", "b"], 1), 0).unwrap();
    assert_eq!(w.step(&mut plan, 1), ["a"]);
    plan.answered("a", Err("INPROG Failover already in progress".into()));
    assert!(w.step(&mut plan, 2).is_empty());
    assert_eq!(plan.state(2), State::Failed);
    assert_eq!(plan.failure().unwrap().1.label(), "refused");
}

#[test]
fn an_aborted_switchover_is_a_failure_once_accepted() {
    let mut w = World::new(&[("a", 100)]);
    let mut plan = Plan::new(spec(&["a"], 1), 0).unwrap();
    assert_eq!(w.step(&mut plan, 1), ["a"]);
    // Not yet seen running, not yet accepted: still waiting.
    assert!(w.step(&mut plan, 2).is_empty());
    assert!(matches!(step_of(&plan, "a"), Step::Switching { .. }));
    plan.answered("a", Ok(()));
    w.get("a").running = true;
    w.step(&mut plan, 3);
    w.get("a").running = false;
    w.step(&mut plan, 4);
    assert_eq!(plan.failure().unwrap().1, &Failure::Aborted);

    // Never seen running, but the back-off window it leaves is seen.
    let mut w = World::new(&[("a", 100)]);
    let mut plan = Plan::new(spec(&["a"], 1), 0).unwrap();
    w.step(&mut plan, 1);
    plan.answered("a", Ok(()));
    w.get("a")
        .readiness
        .holds
        .push(Reason::Window { until: 9_000 });
    w.step(&mut plan, 2);
    assert_eq!(plan.failure().unwrap().1, &Failure::Aborted);
}

#[test]
fn a_switchover_past_the_failover_timeout_fails() {
    let mut w = World::new(&[("a", 100)]);
    let mut plan = Plan::new(spec(&["a"], 1), 0).unwrap();
    w.step(&mut plan, 1);
    plan.answered("a", Ok(()));
    w.get("a").running = true;
    w.step(&mut plan, 10_001);
    assert!(matches!(step_of(&plan, "a"), Step::Switching { .. }));
    w.step(&mut plan, 10_002);
    assert_eq!(
        plan.failure().unwrap().1,
        &Failure::TimedOut { after: 10_001 }
    );
}

#[test]
fn a_cancel_lets_the_running_finish_and_starts_nothing() {
    let mut w = World::new(&[("a", 100), ("b", 200)]);
    let mut plan = Plan::new(spec(&["a", "b"], 1), 0).unwrap();
    assert_eq!(w.step(&mut plan, 1), ["a"]);
    plan.answered("a", Ok(()));
    assert!(plan.cancel());
    assert!(!plan.cancel(), "once");
    assert_eq!(plan.state(2), State::Stopping);
    w.switched("a");
    assert!(w.step(&mut plan, 3).is_empty());
    assert_eq!(plan.state(3), State::Cancelled);
    assert!(matches!(step_of(&plan, "a"), Step::Done { .. }));
    assert_eq!(*step_of(&plan, "b"), Step::Waiting);
    assert!(!plan.cancel(), "finished");
}

#[test]
fn malformed_plans_are_refused() {
    let err = |s: PlanSpec| Plan::new(s, 0).unwrap_err();
    assert_eq!(err(spec(&[], 1)), PlanError::NoGroups);
    assert_eq!(err(spec(&["a"], 0)), PlanError::NoConcurrency);
    assert_eq!(
        err(spec(&["a", "b", "a"], 1)),
        PlanError::Duplicate("a".into())
    );
    let mut s = spec(&["a"], 1);
    s.window = Window {
        start: 5,
        end: Some(5),
    };
    assert_eq!(err(s), PlanError::EmptyWindow);
}
