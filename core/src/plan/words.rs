//! The words of a plan: where it is ([`State`]) and why a group failed
//! ([`Failure::label`], bounded, and [`Failure::describe`]).

use super::{Failure, Plan, Step, Stop};
use crate::Millis;

/// Where a plan is, in one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Its window has not opened.
    Scheduled,
    /// Starting switchovers.
    Running,
    /// Stopped (failed, cancelled or out of its window), with switchovers
    /// still running.
    Stopping,
    /// Every group switched over.
    Completed,
    /// A group failed; the rest were left untouched.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
    /// Its window closed before every group started.
    WindowClosed,
}

impl State {
    /// The word, as the API shows it.
    pub fn label(self) -> &'static str {
        match self {
            State::Scheduled => "scheduled",
            State::Running => "running",
            State::Stopping => "stopping",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::WindowClosed => "window_closed",
        }
    }
}

impl Plan {
    /// Where it is at `now`.
    pub fn state(&self, now: Millis) -> State {
        match (&self.stop, self.finished) {
            (None, Some(_)) => State::Completed,
            (Some(_), None) => State::Stopping,
            (Some(Stop::Failed { .. }), Some(_)) => State::Failed,
            (Some(Stop::Cancelled), Some(_)) => State::Cancelled,
            (Some(Stop::WindowClosed), Some(_)) => State::WindowClosed,
            (None, None) if now < self.spec.window.start && self.running() == 0 => State::Scheduled,
            (None, None) => State::Running,
        }
    }

    /// The group that stopped it and why, if one did.
    pub fn failure(&self) -> Option<(&str, &Failure)> {
        self.steps().find_map(|(g, s)| match s {
            Step::Failed(f) if self.stop == Some(Stop::Failed { group: g.into() }) => Some((g, f)),
            _ => None,
        })
    }
}

impl Stop {
    /// The word, as the API shows it.
    pub fn label(&self) -> &'static str {
        match self {
            Stop::Failed { .. } => "failed",
            Stop::Cancelled => "cancelled",
            Stop::WindowClosed => "window_closed",
        }
    }
}

impl Failure {
    /// One bounded word (a metric label).
    pub fn label(&self) -> &'static str {
        match self {
            Failure::GroupGone => "group_gone",
            Failure::MasterDown => "master_down",
            Failure::NotReady(_) => "not_ready",
            Failure::NoReplica(_) => "no_replica",
            Failure::Unlinked(_) => "replicas_not_in_sync",
            Failure::FenceRelaxed { .. } => "fence_relaxed",
            Failure::Refused(_) => "refused",
            Failure::Aborted => "aborted",
            Failure::TimedOut { .. } => "timed_out",
        }
    }

    /// In a sentence; `now` places the deadlines of a verdict's hold.
    pub fn describe(&self, now: Millis) -> String {
        match self {
            Failure::GroupGone => "the group is no longer monitored".into(),
            Failure::MasterDown => "the master is down: a switchover would be a failover".into(),
            Failure::NotReady(hold) => format!("not ready: {}", hold.describe(now)),
            Failure::NoReplica(e) => {
                let text = e.to_string();
                let why = text.split_once(' ').map_or(text.as_str(), |(_, t)| t);
                format!("no replica to promote: {why}")
            }
            Failure::Unlinked(addrs) => {
                let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
                format!(
                    "replicas not in sync (their link to the master is not up): {}",
                    list.join(", ")
                )
            }
            Failure::FenceRelaxed { in_force, full } => {
                format!("the write fence is relaxed: {in_force} replica(s) required, not {full}")
            }
            Failure::Refused(text) => format!("the switchover was refused: {text}"),
            Failure::Aborted => "the switchover was aborted; the master is unchanged".into(),
            Failure::TimedOut { after } => {
                format!("no new master after {after} ms (the group's failover-timeout)")
            }
        }
    }
}
