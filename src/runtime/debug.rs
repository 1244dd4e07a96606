//! `SENTINEL DEBUG <param> <value> …` in the shell: the new timers go to
//! the core (its rules read them from the next input on), to every
//! instance link at once (INFO and PING periods, the pub/sub link's idle
//! rule: [`LinkSpec::timers`](crate::link::LinkSpec::timers)), to the hello
//! schedule (the loop re-arms it, `shell.rs`) and, when `ping-period`
//! changed, to the peer links, which are redialled with the new period.
//! `SENTINEL MONITOR` reads `default-down-after` and
//! `default-failover-timeout` through the handle.
//!
//! Not saved: as Sentinel's, the values last until the daemon restarts.

use super::shell::Shell;
use crate::core::Millis;

impl Shell {
    /// Changes the named timers (names of
    /// [`NAMES`](crate::core::timers::NAMES); others are ignored) and puts
    /// them in force everywhere.
    pub(super) fn set_timers(&mut self, changes: &[(&'static str, Millis)]) {
        let before = *self.core.timers();
        let mut timers = before;
        for (name, value) in changes {
            timers.set(name, *value);
        }
        if before == timers {
            return;
        }
        self.core.set_timers(timers);
        self.links.timers.send_replace(timers);
        self.scripts
            .set_timers(crate::scripts::ScriptTimers::from(&timers));
        tracing::info!(?timers, "timers changed (SENTINEL DEBUG)");
        if before.ping_period != timers.ping_period {
            self.redial_peers();
        }
    }
}
