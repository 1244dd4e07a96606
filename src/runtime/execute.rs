//! Carrying out the core's outputs, in order, and the state file's
//! writes they depend on.
//!
//! "Persist before act": a `Persist` is written (fsync and all, on a
//! blocking thread so the event loop keeps serving) before anything after
//! it runs. If it cannot be written, the group is *unsaved*: what the core
//! decided after it is not carried out — commands are not sent (the core
//! sees them as lost, which it already tolerates: a failover waiting for
//! a promotion times out and aborts), events are not published, and the
//! group's advertised topology stays as it was — while monitoring goes on
//! for every group. The write is retried every [`SAVE_RETRY`]; once it
//! succeeds the decisions are durable and the group acts again. The
//! failure is logged at error level, counted
//! (`valkyrie_state_write_failures_total`), shown by
//! `valkyrie_state_file_writable` and by `/healthz`'s body.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::Health;
use super::shell::Shell;
use crate::core::{Addr, Input, Output};
use crate::link::{self, LinkSpec};
use crate::state::StateError;
use crate::topology::Changed;

/// What one step's outputs leave to do once they are carried out.
#[derive(Default)]
struct Carried {
    /// The groups whose advertised view must be rebuilt.
    changed: Changed,
    /// The gauges are set once a second, and at once when a group goes
    /// (its series are freed then) or a failover ends.
    gauges_now: bool,
    /// Events to publish, after the topology.
    publish: Vec<crate::core::Event>,
}

/// How often the metrics' gauges are set from the core: a scrape is
/// seconds apart, and setting every series of every instance is as costly
/// as building the view.
pub(super) const GAUGES_REFRESH: Duration = Duration::from_secs(1);

/// How often an unsaved state is written again.
pub const SAVE_RETRY: Duration = Duration::from_secs(1);

/// The group an output concerns (`None`: the whole daemon).
fn group_of(output: &Output) -> Option<&str> {
    match output {
        Output::Persist { group, .. }
        | Output::Forget { group }
        | Output::Unwatch { group, .. }
        | Output::Send { group, .. }
        | Output::Topology { group }
        | Output::Watch { group, .. }
        | Output::Log { group, .. }
        | Output::PeerRefused { group, .. }
        | Output::AskPeer { group, .. }
        | Output::HelloNow { group }
        | Output::FailoverStarted { group, .. }
        | Output::FailoverEnded { group, .. } => Some(group),
        Output::Peers => None,
        Output::Event(e) => e.group.as_deref(),
    }
}

/// The positions of the `Persist`s that may be written before every other
/// output of `outputs` ([`Shell::persist_together`]): each group's first,
/// when no output of that group comes before it, up to the first
/// daemon-wide output.
pub(super) fn hoistable_persists(outputs: &[Output]) -> Vec<usize> {
    let mut touched = std::collections::BTreeSet::new();
    let mut hoisted = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        let Some(group) = group_of(output) else {
            break;
        };
        if matches!(output, Output::Persist { .. }) && !touched.contains(group) {
            hoisted.push(i);
        }
        touched.insert(group);
    }
    hoisted
}

impl Shell {
    /// Ticks off an instance's first probe outcome; releases the
    /// readiness latch when none is left.
    pub(super) fn probed(&mut self, input: Option<&Input>) {
        if *self.ready.borrow() {
            return;
        }
        if let Some(
            Input::PingOk { group, addr }
            | Input::Report { group, addr, .. }
            | Input::LinkDown { group, addr, .. },
        ) = input
        {
            self.probing.remove(&(group.clone(), addr.clone()));
        }
        if self.probing.is_empty() {
            tracing::info!("ready: every configured instance probed once");
            crate::metrics::set_ready(true);
            self.ready.send_replace(true);
        }
    }

    /// A group's epoch and the instance a failover step concerns when the
    /// step itself names none: the replica being promoted, else the master.
    pub(super) fn subject(&self, group: &str) -> (u64, Option<Addr>) {
        self.core.groups().get(group).map_or((0, None), |g| {
            let instance = g
                .failover
                .as_ref()
                .map_or_else(|| g.master.clone(), |f| f.promoted.clone());
            (g.epoch, Some(instance))
        })
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

    /// Writes the state again after a failure (every [`SAVE_RETRY`]).
    pub(super) async fn retry_save(&mut self) {
        match self.save().await {
            Ok(()) => {
                self.saved();
                // The groups held back show their decisions now.
                self.refresh(&Changed {
                    all: true,
                    ..Changed::default()
                });
            }
            Err(e) => {
                crate::metrics::state_write_failed();
                tracing::error!("cannot write the state file (retrying): {e}");
                self.health.send_replace(Health {
                    state_error: Some(e.to_string()),
                });
            }
        }
    }

    /// Carries out `outputs` in order.
    ///
    /// Events are published last, after the topology is advertised: a
    /// client that asks right after `+switch-master` must already be told
    /// the new master (go-redis's failover cluster client re-reads it then,
    /// and keeps what it read until the next event), as with Sentinel,
    /// whose single thread changes the address before any client can ask.
    pub(super) async fn execute(&mut self, outputs: Vec<Output>) {
        let mut step = Carried::default();
        let outputs = self.persist_together(outputs).await;
        for output in outputs {
            let held = group_of(&output).is_some_and(|g| self.unsaved.contains(g));
            match output {
                Output::Persist { group, state } => self.persist(group, state).await,
                Output::Forget { group } => {
                    self.forget(&group).await;
                    // Its series are freed with the gauges.
                    step.gauges_now = true;
                    step.changed.groups.insert(group);
                }
                Output::Unwatch { group, addr } => {
                    self.links.remove(&(group, addr));
                }
                Output::Send {
                    group, to, command, ..
                } if held => {
                    tracing::warn!(group = %group, instance = %to, ?command, "not sent: the state file could not be written");
                }
                Output::Send {
                    group,
                    to,
                    token,
                    command,
                } => self.send(group, to, token, command),
                Output::Event(e) => {
                    if let Some(e) = self.announce(e, held) {
                        // Down/up flags show in the topology too (TILT,
                        // of no group, the advertiser sees itself).
                        if let Some(group) = &e.group {
                            step.changed.groups.insert(group.clone());
                        }
                        step.publish.push(e);
                    }
                }
                Output::Topology { group } => {
                    step.changed.groups.insert(group);
                }
                Output::Watch { group, addr } => self.watch(group, addr),
                Output::AskPeer { .. } | Output::Peers | Output::HelloNow { .. } => {
                    self.peering(output);
                }
                Output::PeerRefused { group, reason } => {
                    crate::metrics::peer_refused(&group, reason);
                }
                Output::FailoverStarted { group, .. } => crate::metrics::failover_started(&group),
                Output::FailoverEnded {
                    group,
                    epoch,
                    result,
                    duration,
                } => {
                    let duration = Duration::from_millis(duration);
                    crate::metrics::failover_ended(&group, result, duration);
                    let (_, master) = self.subject(&group);
                    let instance = master.as_ref().map(ToString::to_string);
                    tracing::info!(
                        group = %group,
                        epoch,
                        instance = instance.as_deref().unwrap_or(""),
                        result = result.label(),
                        "failover ended"
                    );
                    // Its epochs' gauges move with its counter.
                    step.gauges_now = true;
                }
                Output::Log { group, message } => {
                    let (epoch, instance) = self.subject(&group);
                    let instance = instance.as_ref().map(ToString::to_string);
                    tracing::warn!(
                        group = %group,
                        epoch,
                        instance = instance.as_deref().unwrap_or(""),
                        "{message}"
                    );
                }
            }
        }
        self.after_step(step).await;
    }

    /// A group's state, written before anything after it runs.
    async fn persist(&mut self, group: String, state: crate::core::GroupState) {
        self.state.groups.insert(group.clone(), state);
        // The global current epoch goes with every save: it only grows, so
        // the core's latest value is never too old.
        self.state.current_epoch = self.core.current_epoch();
        match self.save().await {
            Ok(()) => self.saved(),
            Err(e) => self.save_failed(Some(&group), &e),
        }
    }

    /// A removed group: its links, flags and saved state go.
    async fn forget(&mut self, group: &str) {
        self.links.retain(|(g, _), _| g != group);
        self.urgent.remove(group);
        self.state.groups.remove(group);
        self.unsaved.remove(group);
        match self.save().await {
            Ok(()) => self.saved(),
            Err(e) => self.save_failed(None, &e),
        }
    }

    /// Hands a command to the instance's link.
    fn send(&self, group: String, to: Addr, token: u64, command: crate::core::Command) {
        let (epoch, _) = self.subject(&group);
        tracing::info!(group = %group, epoch, instance = %to, ?command, "sending");
        let key = (group, to);
        match self.links.get(&key) {
            Some(link) => {
                let _ = link.send(link::Job::Command { token, command });
            }
            None => tracing::warn!(group = %key.0, instance = %key.1, "no link"),
        }
    }

    /// Logs and counts an event; returns it to be published at the end of
    /// the step, or `None` when its group is unsaved (held back).
    fn announce(&self, e: crate::core::Event, held: bool) -> Option<crate::core::Event> {
        let group = e.group.clone();
        let (epoch, instance) = match &group {
            Some(group) => {
                let (epoch, subject) = self.subject(group);
                let instance = e.instance().or(subject);
                let instance = instance.as_ref().map(ToString::to_string);
                (epoch, instance.unwrap_or_default())
            }
            None => (0, String::new()),
        };
        if held {
            tracing::warn!(
                group = group.as_deref().unwrap_or(""),
                epoch,
                instance,
                channel = e.channel.as_str(),
                "not published (the state file could not be written): {}",
                e.payload
            );
            return None;
        }
        crate::metrics::event(&e);
        match &group {
            Some(group) => tracing::info!(
                group = %group,
                epoch,
                instance,
                channel = e.channel.as_str(),
                "{}",
                e.payload
            ),
            None => tracing::info!(channel = e.channel.as_str(), "{}", e.payload),
        }
        Some(e)
    }

    /// After a step's outputs: the urgent-INFO flags, the gauges, the
    /// advertised topology, then the events.
    async fn after_step(&mut self, step: Carried) {
        for (name, g) in self.core.groups() {
            let trouble = g.failover.is_some() || g.master_instance().is_none_or(|m| m.sdown);
            if let Some(tx) = self.urgent.get(name) {
                tx.send_if_modified(|u| std::mem::replace(u, trouble) != trouble);
            }
        }
        if step.gauges_now {
            self.set_gauges();
        }
        self.refresh(&step.changed);
        for e in step.publish {
            self.before_publishing(&e).await;
            let _ = self.events.send(e);
        }
    }

    /// Writes, in one write, each group's first `Persist` of the batch that
    /// no output of its own precedes; returns the outputs left to carry out.
    ///
    /// One tick can start failovers in many groups at once (a rack lost),
    /// each with a `Persist` before its commands. Written one after the
    /// other, each a whole file and an fsync, the last group waited for all
    /// the others: 220 ms for the twentieth of 33 groups
    /// (`benches/scale_real`). A group's `Persist` may go ahead of other
    /// groups' outputs, which it says nothing about, but never ahead of its
    /// own: the file never holds a decision whose earlier steps were not
    /// carried out. A daemon-wide output (no group) ends the hoisting.
    async fn persist_together(&mut self, outputs: Vec<Output>) -> Vec<Output> {
        let hoisted = hoistable_persists(&outputs);
        if hoisted.len() < 2 {
            return outputs;
        }
        let mut groups = Vec::new();
        let mut rest = Vec::with_capacity(outputs.len() - hoisted.len());
        for (i, output) in outputs.into_iter().enumerate() {
            match output {
                Output::Persist { group, state } if hoisted.contains(&i) => {
                    self.state.groups.insert(group.clone(), state);
                    groups.push(group);
                }
                other => rest.push(other),
            }
        }
        self.state.current_epoch = self.core.current_epoch();
        match self.save().await {
            Ok(()) => self.saved(),
            Err(e) => {
                for group in &groups {
                    self.save_failed(Some(group), &e);
                }
            }
        }
        rest
    }

    /// Rebuilds the advertised views of the groups that changed at once,
    /// and of every group each refresh period (`topology::Advertiser`).
    /// An unsaved group keeps showing what was last durable. The metrics'
    /// gauges are set every [`GAUGES_REFRESH`].
    pub(super) fn refresh(&mut self, changed: &Changed) {
        if self.gauges_set.elapsed() >= GAUGES_REFRESH {
            self.set_gauges();
        }
        self.advertiser.refresh(&self.core, changed, &self.unsaved);
    }

    fn set_gauges(&mut self) {
        self.gauges_set = Instant::now();
        self.observer.gauges(&self.core, self.now());
        for (group, outbound) in &self.group_tls {
            crate::tls::group::record_expiry(group, outbound);
        }
    }

    pub(super) fn watch(&mut self, group: String, addr: Addr) {
        let key = (group.clone(), addr.clone());
        if self.links.contains_key(&key) {
            return;
        }
        let tls = self.link_tls(&group);
        let Some(g) = self.config.group(&group) else {
            return;
        };
        let urgent = self
            .urgent
            .entry(group.clone())
            .or_insert_with(|| watch::channel(false).0)
            .subscribe();
        let spec = LinkSpec {
            group,
            addr,
            down_after: g.down_after,
            auth_user: g.auth_user.clone(),
            auth_pass: g.auth_pass.clone(),
            renamed: g
                .renamed_commands
                .iter()
                .map(|(from, to)| (from.to_ascii_lowercase(), to.clone()))
                .collect(),
            urgent,
            myid: self.core.myid().to_string(),
            tls,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        self.tasks.spawn(link::run(spec, rx, self.input_tx.clone()));
        self.links.insert(key, tx);
    }
}
