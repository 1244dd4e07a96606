//! What the shell hands the script runner (`src/scripts/`): the
//! notification script of a group for each of its WARNING events that
//! names an instance, once published, and the client-reconfig script for
//! each [`Output::ClientReconfig`](crate::core::Output::ClientReconfig).
//! The paths are read from the configuration when the job is queued; a
//! group's `-monitor` comes after `SENTINEL REMOVE` took it out, so the
//! request hands its path over ([`Shell::notify_removed`]).

use super::shell::Shell;
use crate::core::{Addr, Event, ReconfRole};
use crate::scripts::{ScriptTimers, Scripts};

/// Starts the runner in `dir`, its `-script-*` events published on
/// `events`, counted and logged as the core's are.
pub(super) fn runner(
    dir: &std::path::Path,
    timers: &crate::core::Timers,
    events: crate::events::EventBus,
) -> std::io::Result<Scripts> {
    Scripts::spawn(dir.to_path_buf(), ScriptTimers::from(timers), move |e| {
        crate::metrics::event(&e);
        tracing::warn!(channel = e.channel.as_str(), "{}", e.payload);
        events.send(e);
    })
}

impl Shell {
    /// Queues the notification script of the event's group, if the event
    /// is one that runs it and the group has one.
    pub(super) fn notify_script(&self, e: &Event) {
        if !e.channel.notifies() {
            return;
        }
        let Some(path) = e
            .group
            .as_deref()
            .and_then(|g| self.config.group(g))
            .and_then(|g| g.notification_script.as_deref())
        else {
            return;
        };
        self.scripts.notify(path, e.channel, &e.payload);
    }

    /// Queues `group`'s client-reconfig script, if it has one:
    /// `<path> <master> <leader|observer> start <from-ip> <from-port>
    /// <to-ip> <to-port>`.
    pub(super) fn reconfig_script(&self, group: &str, role: ReconfRole, from: &Addr, to: &Addr) {
        let Some(path) = self
            .config
            .group(group)
            .and_then(|g| g.client_reconfig_script.clone())
        else {
            return;
        };
        self.scripts.run(vec![
            path,
            group.to_string(),
            role.as_str().to_string(),
            "start".to_string(),
            from.host.clone(),
            from.port.to_string(),
            to.host.clone(),
            to.port.to_string(),
        ]);
    }

    /// Queues `path`, the notification script of a group just removed,
    /// for the `-monitor` among `outputs`.
    pub(super) fn notify_removed(&self, path: &str, outputs: &[crate::core::Output]) {
        for o in outputs {
            if let crate::core::Output::Event(e) = o
                && e.channel == crate::core::Channel::MonitorRemoved
            {
                self.scripts.notify(path, e.channel, &e.payload);
            }
        }
    }
}
