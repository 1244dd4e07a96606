//! The readiness verdicts the topology carries: the core's
//! [`Readiness`] of each group, judged when its view was rebuilt, with
//! the times needed to show it.
//!
//! They sit beside the views, not in them: a verdict changes with the
//! clock (a window closing), and a view's revision must not.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::core::{Core, Millis, Readiness, Reason};

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
