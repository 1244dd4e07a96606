//! A planned switchover across many groups: which group goes next,
//! whether it passes its pre-flight, and when the plan stops.
//!
//! Pure, like the rest of the core: the shell feeds it the time and each
//! group's [`Facts`] (the advertised view and the core's own readiness
//! verdict, never a second copy of its rules), carries out the
//! switchovers it returns ([`Action`]) through `SENTINEL FAILOVER`'s
//! zero-loss path, away from the master the pre-flight saw
//! ([`Core::switch_over`](crate::Core::switch_over)), and reports each
//! request's answer back ([`Plan::answered`]).
//!
//! The rules:
//! - groups go in the plan's order, at most `concurrency` at once, and
//!   only inside the window: none starts before it opens, none after it
//!   closes;
//! - a group's pre-flight ([`preflight`]): the master up, nothing in the
//!   verdict holding a failover back (a failover running, a pause, a
//!   window, TILT…), a replica `SENTINEL FAILOVER` would promote, every
//!   replica linked to the master, and the write fence not relaxed;
//! - a switchover is done once the group's master is another one and no
//!   failover runs; it failed when it was refused, when its failover
//!   ended with the master unchanged, or after the group's
//!   `failover-timeout`;
//! - the first group that fails its pre-flight or its switchover stops
//!   the plan: no group after it starts, switchovers already running
//!   finish, and the rest are left untouched. A cancel stops it the same
//!   way.

mod words;

pub use words::State;

use crate::{Addr, AdminError, FenceView, Millis, Readiness, Reason};

/// When a plan may start switchovers, in the core's milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// None starts before.
    pub start: Millis,
    /// None starts at or after (`None`: no end).
    pub end: Option<Millis>,
}

/// What a plan is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSpec {
    /// The groups, in the order they go.
    pub groups: Vec<String>,
    /// Switchovers running at once, at most.
    pub concurrency: usize,
    /// When switchovers may start.
    pub window: Window,
}

/// Why a plan cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No group.
    #[error("the plan names no group")]
    NoGroups,
    /// A group twice.
    #[error("group {0} is named twice")]
    Duplicate(String),
    /// Concurrency 0.
    #[error("concurrency must be at least 1")]
    NoConcurrency,
    /// The window ends before it starts (or when it starts).
    #[error("the window ends before it starts")]
    EmptyWindow,
}

/// What the shell knows about one group when the plan steps.
#[derive(Clone, Debug)]
pub struct Facts<'a> {
    /// The advertised master.
    pub master: &'a Addr,
    /// The master is subjectively down.
    pub master_down: bool,
    /// A failover (or switchover) of the group is running.
    pub failover_running: bool,
    /// The core's verdict, as last judged.
    pub readiness: &'a Readiness,
    /// Replicas, other than those on their way out, whose replication
    /// link to `master` is not up (or that follow another master).
    pub unlinked: Vec<Addr>,
    /// The group's `failover-timeout`.
    pub failover_timeout: Millis,
}

/// Why a group failed its pre-flight or its switchover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The group is no longer monitored.
    GroupGone,
    /// Its master is down: a switchover would be a failover.
    MasterDown,
    /// The verdict holds a failover back (its first hold).
    NotReady(Reason),
    /// `SENTINEL FAILOVER` would promote no replica.
    NoReplica(AdminError),
    /// Replicas whose link to the master is not up.
    Unlinked(Vec<Addr>),
    /// The auto write fence requires fewer replicas than a majority of
    /// the known ones.
    FenceRelaxed {
        /// `min-replicas-to-write` in force.
        in_force: u64,
        /// A majority of the known replicas.
        full: u64,
    },
    /// The switchover request was refused (the refusal's text).
    Refused(String),
    /// The switchover's failover ended with the master unchanged.
    Aborted,
    /// No new master within the group's `failover-timeout`.
    TimedOut {
        /// How long it waited.
        after: Millis,
    },
}

/// Where one group of a plan is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not started.
    Waiting,
    /// Its switchover was asked for.
    Switching {
        /// The master it switches away from.
        from: Addr,
        /// When it was asked for.
        since: Millis,
        /// The request was accepted.
        accepted: bool,
        /// Its failover was seen running.
        seen_running: bool,
    },
    /// A new master.
    Done {
        /// The old master.
        from: Addr,
        /// The new one.
        to: Addr,
        /// From the request to the new master's advertisement, as seen
        /// by the plan.
        took: Millis,
    },
    /// Failed its pre-flight or its switchover.
    Failed(Failure),
}

/// Why a plan stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// A group failed ([`Step::Failed`] says why).
    Failed {
        /// The group.
        group: String,
    },
    /// An operator cancelled it.
    Cancelled,
    /// The window closed with groups not started.
    WindowClosed,
}

/// A switchover the shell must ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// The group.
    pub group: String,
    /// Away from this master only.
    pub from: Addr,
}

/// A plan and its progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    spec: PlanSpec,
    steps: Vec<Step>,
    stop: Option<Stop>,
    created: Millis,
    finished: Option<Millis>,
}

/// The pre-flight of one group: the master to switch away from, or why
/// not.
pub fn preflight(facts: Option<&Facts<'_>>) -> Result<Addr, Failure> {
    let f = facts.ok_or(Failure::GroupGone)?;
    if f.master_down {
        return Err(Failure::MasterDown);
    }
    if let Some(hold) = f.readiness.holds.first() {
        return Err(Failure::NotReady(hold.clone()));
    }
    if let Err(e) = &f.readiness.manual {
        return Err(Failure::NoReplica(e.clone()));
    }
    if !f.unlinked.is_empty() {
        return Err(Failure::Unlinked(f.unlinked.clone()));
    }
    if let FenceView::Relaxed { in_force, full } = f.readiness.fence {
        return Err(Failure::FenceRelaxed { in_force, full });
    }
    Ok(f.master.clone())
}

impl Plan {
    /// A plan made at `now`, nothing started yet.
    pub fn new(spec: PlanSpec, now: Millis) -> Result<Plan, PlanError> {
        if spec.groups.is_empty() {
            return Err(PlanError::NoGroups);
        }
        if spec.concurrency == 0 {
            return Err(PlanError::NoConcurrency);
        }
        if spec.window.end.is_some_and(|end| end <= spec.window.start) {
            return Err(PlanError::EmptyWindow);
        }
        let mut seen = std::collections::BTreeSet::new();
        for g in &spec.groups {
            if !seen.insert(g) {
                return Err(PlanError::Duplicate(g.clone()));
            }
        }
        Ok(Plan {
            steps: vec![Step::Waiting; spec.groups.len()],
            spec,
            stop: None,
            created: now,
            finished: None,
        })
    }

    /// Moves the plan on at `now`, from each group's facts (`None`: no
    /// such group): returns the switchovers to ask for now.
    pub fn step<'a>(
        &mut self,
        now: Millis,
        facts: impl Fn(&str) -> Option<Facts<'a>>,
    ) -> Vec<Action> {
        if self.finished.is_some() {
            return Vec::new();
        }
        for i in 0..self.steps.len() {
            let f = facts(&self.spec.groups[i]);
            self.follow(i, now, f.as_ref());
        }
        if self.stop.is_none()
            && self.spec.window.end.is_some_and(|end| now >= end)
            && self.steps.contains(&Step::Waiting)
        {
            self.stop = Some(Stop::WindowClosed);
        }
        let mut actions = Vec::new();
        if self.stop.is_none() && now >= self.spec.window.start {
            let mut running = self.running();
            for i in 0..self.steps.len() {
                if running >= self.spec.concurrency {
                    break;
                }
                if self.steps[i] != Step::Waiting {
                    continue;
                }
                let group = &self.spec.groups[i];
                match preflight(facts(group).as_ref()) {
                    Ok(from) => {
                        actions.push(Action {
                            group: group.clone(),
                            from: from.clone(),
                        });
                        self.steps[i] = Step::Switching {
                            from,
                            since: now,
                            accepted: false,
                            seen_running: false,
                        };
                        running += 1;
                    }
                    Err(failure) => {
                        self.fail(i, failure);
                        break;
                    }
                }
            }
        }
        let waiting = self.steps.contains(&Step::Waiting);
        if self.running() == 0 && (self.stop.is_some() || !waiting) {
            self.finished = Some(now);
        }
        actions
    }

    /// Follows group `i`'s switchover, if one runs.
    fn follow(&mut self, i: usize, now: Millis, facts: Option<&Facts<'_>>) {
        let Step::Switching {
            from,
            since,
            accepted,
            seen_running,
        } = &self.steps[i]
        else {
            return;
        };
        let (from, since, accepted) = (from.clone(), *since, *accepted);
        let Some(f) = facts else {
            self.fail(i, Failure::GroupGone);
            return;
        };
        if *f.master != from && !f.failover_running {
            self.steps[i] = Step::Done {
                from,
                to: f.master.clone(),
                took: now.saturating_sub(since),
            };
            return;
        }
        let seen = *seen_running || f.failover_running;
        // An aborted switchover leaves the master and opens the back-off
        // window: either is its end, once the request was accepted.
        let backed_off = f
            .readiness
            .holds
            .iter()
            .any(|h| matches!(h, Reason::Window { .. }));
        let after = now.saturating_sub(since);
        if accepted && !f.failover_running && (seen || backed_off) {
            self.fail(i, Failure::Aborted);
        } else if after > f.failover_timeout {
            self.fail(i, Failure::TimedOut { after });
        } else if let Step::Switching { seen_running, .. } = &mut self.steps[i] {
            *seen_running = seen;
        }
    }

    fn fail(&mut self, i: usize, failure: Failure) {
        self.steps[i] = Step::Failed(failure);
        if self.stop.is_none() {
            self.stop = Some(Stop::Failed {
                group: self.spec.groups[i].clone(),
            });
        }
    }

    /// The answer to the switchover request of `group`: accepted, or
    /// refused with the refusal's text.
    pub fn answered(&mut self, group: &str, answer: Result<(), String>) {
        let Some(i) = self.spec.groups.iter().position(|g| g == group) else {
            return;
        };
        match (&mut self.steps[i], answer) {
            (Step::Switching { accepted, .. }, Ok(())) => *accepted = true,
            (Step::Switching { .. }, Err(text)) => self.fail(i, Failure::Refused(text)),
            _ => {}
        }
    }

    /// Cancels the plan: no switchover starts any more; the running ones
    /// finish. False when it had already stopped or finished.
    pub fn cancel(&mut self) -> bool {
        if self.finished.is_some() || self.stop.is_some() {
            return false;
        }
        self.stop = Some(Stop::Cancelled);
        true
    }

    /// Switchovers asked for and not ended.
    pub fn running(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Switching { .. }))
            .count()
    }

    /// What it was asked to do.
    pub fn spec(&self) -> &PlanSpec {
        &self.spec
    }

    /// Each group with where it is, in the plan's order.
    pub fn steps(&self) -> impl Iterator<Item = (&str, &Step)> {
        self.spec.groups.iter().map(String::as_str).zip(&self.steps)
    }

    /// Why it stopped early, if it did.
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// When it was made.
    pub fn created(&self) -> Millis {
        self.created
    }

    /// When it ended: every group done, or stopped with none running.
    pub fn finished(&self) -> Option<Millis> {
        self.finished
    }
}
