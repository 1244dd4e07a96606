//! TILT: the daemon's pause. While it holds, no failover starts and no
//! vote is granted; monitoring goes on. Two things trip it:
//!
//! - **mass failure**: more than half of the masters (of two or more) are
//!   unreachable at once — the likelier story is that we are the one cut
//!   off. It lasts as long as that holds;
//! - **a stall** (Sentinel's own TILT): two turns of the shell's loop
//!   ([`Core::pulse`]) more than `tilt-trigger` apart. The loop turns at
//!   least every 100 ms, so such a gap means the daemon did not run —
//!   stopped by a signal, starved, a frozen machine — and every timeout
//!   it now sees may be its own fault. It lasts `tilt-period` after the
//!   last such gap. A wait the shell chooses and bounds itself (a
//!   failover step's role hook, at most 2 s) is not a stall
//!   ([`Core::waited`]).
//!
//! `+tilt` when TILT begins, `-tilt` when neither holds any more.

use crate::readiness::Reason;
use crate::{Channel, Core, Daemon, Millis, Out, Output};

impl Core {
    /// The shell's loop turned at `now` (it does at least every 100 ms,
    /// before it feeds the core anything): a gap of more than
    /// `tilt-trigger` since the previous turn enters TILT for
    /// `tilt-period`. Returns the `+tilt` event when TILT begins.
    pub fn pulse(&mut self, now: Millis) -> Vec<Output> {
        let timers = self.daemon.timers;
        let stalled = self
            .daemon
            .last_pulse
            .is_some_and(|last| now.saturating_sub(last) > timers.tilt_trigger);
        self.daemon.last_pulse = Some(now);
        if !stalled {
            return Vec::new();
        }
        self.daemon.stalled_until = Some(now.saturating_add(timers.tilt_period));
        let mut out = Out::default();
        self.update_tilt(now, &mut out);
        out.outputs
    }

    /// The shell waited on purpose until `now`, within a bound it chose
    /// (a failover step's role hook): the time since the last pulse is
    /// not a stall, and the next pulse measures from here.
    pub fn waited(&mut self, now: Millis) {
        if self.daemon.last_pulse.is_some() {
            self.daemon.last_pulse = Some(now);
        }
    }

    /// Sets TILT from its two causes (see the module's documentation):
    /// `+tilt` when it begins, `-tilt` when it ends.
    pub(crate) fn update_tilt(&mut self, now: Millis, out: &mut Out) {
        let total = self.groups.len();
        let mass = total >= 2 && self.unreachable.len() * 2 > total;
        let stalled = self.daemon.stalled_until.is_some_and(|until| now < until);
        if !stalled {
            self.daemon.stalled_until = None;
        }
        let trip = mass || stalled;
        out.within(None);
        if trip != self.daemon.tilt {
            self.daemon.tilt = trip;
            self.daemon.tilt_since = trip.then_some(now);
            if trip {
                out.event(Channel::Tilt, "#tilt mode entered".into());
            } else {
                out.event(Channel::TiltCleared, "#tilt mode exited".into());
            }
        }
    }
}

impl Daemon {
    /// Why TILT holds a failover back, as of `now` (`until`: the end of a
    /// stall's TILT, when one holds).
    pub(crate) fn tilt_reason(&self, now: Millis) -> Reason {
        Reason::Tilt {
            since: self.tilt_since.unwrap_or(now),
            until: self.stalled_until.filter(|until| now < *until),
        }
    }
}
