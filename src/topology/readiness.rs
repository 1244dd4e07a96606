//! The readiness verdicts the topology carries: the core's
//! [`Readiness`] of each group, judged when its view was rebuilt, with
//! the times needed to show it.
//!
//! They sit beside the views, not in them: a verdict changes with the
//! clock (a window closing), and a view's revision must not.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::core::{Core, Millis, Readiness, Reason, VetoCause};

/// One group's verdict, as judged at `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The core's verdict.
    pub readiness: Readiness,
    /// The core's time it was judged at.
    pub at: Millis,
    /// The wall clock then, in Unix milliseconds: deadlines are shown as
    /// wall-clock times.
    pub wall_ms: u64,
}

impl Verdict {
    /// The verdict of group `name` at `now`; `held` (its decisions wait
    /// for the state file) puts [`Reason::StateUnwritable`] first.
    pub(super) fn judge(core: &Core, name: &str, now: Millis, held: bool) -> Option<Verdict> {
        let mut readiness = core.readiness(name, now)?;
        if held {
            readiness.holds.insert(0, Reason::StateUnwritable);
            readiness.ready = false;
        }
        Some(Verdict {
            readiness,
            at: now,
            wall_ms: wall_ms(),
        })
    }

    /// The verdict in one line ([`Readiness::describe`]).
    pub fn text(&self) -> String {
        self.readiness.describe(self.at)
    }

    /// The core's time `t` on the wall clock, in Unix milliseconds.
    pub fn wall(&self, t: Millis) -> u64 {
        if t >= self.at {
            self.wall_ms.saturating_add(t - self.at)
        } else {
            self.wall_ms.saturating_sub(self.at - t)
        }
    }
}

/// Milliseconds since the Unix epoch.
#[allow(clippy::disallowed_methods)] // shown to people, never compared with the core's clock
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A hold's data, by field name: the same in the status API's verdict
/// and in the `valkyrie:failover-reason` event. `at` turns a core time
/// into wall-clock milliseconds.
pub fn hold_data(hold: &Reason, put: &mut impl FnMut(&str, Value), at: impl Fn(Millis) -> u64) {
    match hold {
        Reason::FailoverRunning { epoch, promoted } => {
            put("running_epoch", json!(epoch));
            put("promoted", json!(promoted.to_string()));
        }
        Reason::ElectionRunning { epoch } => put("running_epoch", json!(epoch)),
        Reason::Window { until } | Reason::WitnessWait { until } => {
            put("until_ms", json!(at(*until)));
        }
        Reason::PendingConfig {
            master,
            config_epoch,
            until,
        } => {
            put("master", json!(master.to_string()));
            put("config_epoch", json!(config_epoch));
            put("until_ms", json!(at(*until)));
        }
        Reason::WitnessVeto(cause) => {
            put("cause", json!(cause.label()));
            match cause {
                VetoCause::NoWitness => {}
                VetoCause::Vouched { vouching, fresh } => {
                    put("vouching", json!(vouching));
                    put("fresh", json!(fresh));
                }
                VetoCause::FenceHolds { silent, needed } => {
                    put("silent", json!(silent));
                    put("needed", json!(needed));
                }
            }
        }
        Reason::Tilt { since, until } => {
            put("since_ms", json!(at(*since)));
            if let Some(until) = until {
                put("until_ms", json!(at(*until)));
            }
        }
        Reason::QuorumUnreachable { usable, quorum } => {
            put("usable", json!(usable));
            put("quorum", json!(quorum));
        }
        Reason::ElectionUnwinnable {
            usable,
            needed,
            known,
        } => {
            put("usable", json!(usable));
            put("votes_needed", json!(needed));
            put("known", json!(known));
        }
        Reason::AwaitingReports { missing } => {
            let missing: Vec<String> = missing.iter().map(ToString::to_string).collect();
            put("missing", json!(missing));
        }
        Reason::Paused
        | Reason::EpochExhausted
        | Reason::NoEligibleReplica
        | Reason::StateUnwritable => {}
    }
}
