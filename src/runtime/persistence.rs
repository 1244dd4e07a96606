//! The shell's first part: the state file, what is not written yet, and
//! its health.
//!
//! "Persist before act": a `Persist` is written (fsync and all, on a
//! blocking thread so the event loop keeps serving) before anything after
//! it runs. If it cannot be written, the group is *unsaved* (held): what
//! the core decided after it is not carried out — commands are not sent
//! (the core sees them as lost, which it already tolerates: a failover
//! waiting for a promotion times out and aborts), events are not
//! published, and the group's advertised topology stays as it was — while
//! monitoring goes on for every group. The write is retried every
//! [`SAVE_RETRY`]; once it succeeds the decisions are durable and the
//! group acts again. The failure is logged at error level, counted
//! (`valkyrie_state_write_failures_total`), shown by
//! `valkyrie_state_file_writable` and by `/healthz`'s body.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::watch;

use super::handle::Health;
use crate::core::{GroupState, State};
use crate::state::{RuntimeConfig, StateError, StateFile};

/// How often an unsaved state is written again.
pub const SAVE_RETRY: Duration = Duration::from_secs(1);

/// The state file and what the daemon holds of it.
pub(super) struct Persistence {
    pub(super) file: StateFile,
    /// Monitoring as changed at runtime; `None` until it first is.
    pub(super) runtime_config: Option<RuntimeConfig>,
    /// What the file holds, or will once written.
    pub(super) state: State,
    /// Groups whose last decision could not be written: they do not act
    /// until a write succeeds.
    pub(super) unsaved: BTreeSet<String>,
    /// The state in memory is newer than the file.
    pub(super) dirty: bool,
    /// Shown by `/healthz`.
    pub(super) health: watch::Sender<Health>,
}

impl Persistence {
    /// Whether `group`'s decisions are held back (not written yet).
    pub(super) fn holds(&self, group: &str) -> bool {
        self.unsaved.contains(group)
    }

    /// Writes the state and runtime configuration, off the event loop.
    pub(super) async fn save(&self) -> Result<(), StateError> {
        let file = self.file.clone();
        let state = self.state.clone();
        let config = self.runtime_config.clone();
        match tokio::task::spawn_blocking(move || file.save_with(&state, config.as_ref())).await {
            Ok(r) => r,
            Err(e) => Err(StateError::Io {
                path: self.file.path().display().to_string(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }

    /// Writes the state after `groups` changed (the current epoch, which
    /// only grows, goes with every write); they are held when it fails.
    pub(super) async fn write(&mut self, groups: &[String], current_epoch: u64) {
        self.state.current_epoch = current_epoch;
        match self.save().await {
            Ok(()) => self.saved(),
            Err(e) if groups.is_empty() => self.save_failed(None, &e),
            Err(e) => {
                for group in groups {
                    self.save_failed(Some(group), &e);
                }
            }
        }
    }

    /// A group's new state, written before anything after it runs. A
    /// state the file already holds is not written again: one step often
    /// persists twice with nothing changed between (a switchover's
    /// promotion, then its demotion of the paused master), and every write
    /// is two fsyncs on the path of a write stall.
    pub(super) async fn persist(&mut self, group: String, state: GroupState, current_epoch: u64) {
        if self.holds_already(&group, &state, current_epoch) {
            return;
        }
        self.state.groups.insert(group.clone(), state);
        self.write(&[group], current_epoch).await;
    }

    /// Whether the file already holds `state` for `group` and
    /// `current_epoch`, nothing is waiting to be written again, so writing
    /// would change nothing on disk.
    pub(super) fn holds_already(
        &self,
        group: &str,
        state: &GroupState,
        current_epoch: u64,
    ) -> bool {
        !self.dirty
            && self.state.current_epoch == current_epoch
            && self.state.groups.get(group) == Some(state)
    }

    /// A removed group: its saved state goes.
    pub(super) async fn forget(&mut self, group: &str) {
        self.state.groups.remove(group);
        self.unsaved.remove(group);
        let epoch = self.state.current_epoch;
        self.write(&[], epoch).await;
    }

    /// Records a failed write: logged loudly, counted, shown by the health
    /// endpoint; `group` (if any) stops acting until a write succeeds.
    pub(super) fn save_failed(&mut self, group: Option<&str>, e: &StateError) {
        if let Some(g) = group {
            self.unsaved.insert(g.to_string());
        }
        self.dirty = true;
        crate::metrics::state_write_failed();
        let message = e.to_string();
        tracing::error!(
            group = group.unwrap_or(""),
            "cannot write the state file: {message}; not acting on decisions that could be \
             forgotten (monitoring goes on; retrying every {}s)",
            SAVE_RETRY.as_secs()
        );
        self.health.send_replace(Health {
            state_error: Some(message),
        });
    }

    /// A write succeeded: everything decided so far is durable.
    pub(super) fn saved(&mut self) {
        if self.dirty {
            tracing::warn!(
                groups = ?self.unsaved,
                "state file written again: acting on decisions again"
            );
            self.health.send_replace(Health::default());
        }
        crate::metrics::set_state_file_writable(true);
        self.dirty = false;
        self.unsaved.clear();
    }

    /// Writes the state again after a failure (every [`SAVE_RETRY`]);
    /// returns whether it worked, and so the held groups act again.
    pub(super) async fn retry(&mut self) -> bool {
        match self.save().await {
            Ok(()) => {
                self.saved();
                true
            }
            Err(e) => {
                crate::metrics::state_write_failed();
                tracing::error!("cannot write the state file (retrying): {e}");
                self.health.send_replace(Health {
                    state_error: Some(e.to_string()),
                });
                false
            }
        }
    }
}
