//! Carrying out the core's outputs, in order: each output goes to the
//! part of the shell that owns what it acts on — the state file
//! (`persistence.rs`), the links (`links.rs`), what is shown
//! (`publication.rs`) — and a `Persist` is written before anything after
//! it runs.

use std::time::Duration;

use super::refusal::Refused;
use super::shell::Shell;
use crate::core::{Addr, Outcome, Output};
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
        | Output::ClientReconfig { group, .. }
        | Output::Route { group, .. }
        | Output::FailoverStarted { group, .. }
        | Output::FailoverEnded { group, .. }
        | Output::Refused { group, .. } => Some(group),
        Output::Peers | Output::Crash { .. } => None,
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

    /// Writes the state again after a failure (every
    /// [`SAVE_RETRY`](super::SAVE_RETRY));
    /// once written, the groups held back show their decisions.
    pub(super) async fn retry_save(&mut self) {
        if self.persistence.retry().await {
            self.refresh(&Changed {
                all: true,
                ..Changed::default()
            });
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
            let held = group_of(&output).is_some_and(|g| self.persistence.holds(g));
            match output {
                Output::Persist { group, state } => {
                    let epoch = self.core.current_epoch();
                    self.persistence.persist(group, state, epoch).await;
                }
                Output::Forget { group } => {
                    if let Some(route) = self.routes.remove(&group) {
                        route.abort();
                    }
                    self.links.forget(&group);
                    self.persistence.forget(&group).await;
                    // Its series are freed with the gauges.
                    step.gauges_now = true;
                    step.changed.groups.insert(group);
                }
                Output::Unwatch { group, addr } => {
                    self.links.texts.forget(&group, &addr);
                    self.links.instances.remove(&(group, addr));
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
                Output::Route { group, to, confirm } => self.route(group, to, confirm),
                Output::ClientReconfig {
                    group,
                    role,
                    from,
                    to,
                } if !held => self.reconfig_script(&group, role, &from, &to),
                Output::ClientReconfig { .. } => {}
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
                Output::Refused {
                    group,
                    op,
                    outcome,
                    epoch,
                    reason,
                } => {
                    let r = Refused {
                        group,
                        op,
                        outcome,
                        epoch,
                        reason,
                    };
                    let e = self.refusal(&r);
                    // An abort whose own events wait for the state file
                    // waits with them; a refused request decided nothing.
                    if !held || outcome == Outcome::Refused {
                        crate::metrics::event(&e);
                        step.publish.push(e);
                    }
                }
                Output::Crash { point } => {
                    // Sentinel's line; what came before in this step is
                    // written (the state file included), nothing after.
                    tracing::warn!(
                        point = point.name(),
                        "Sentinel CRASH because of SENTINEL simulate-failure"
                    );
                    std::process::exit(99);
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

    /// Hands a command to the instance's link, logged with the group's
    /// epoch.
    fn send(&self, group: String, to: Addr, token: u64, command: crate::core::Command) {
        let (epoch, _) = self.subject(&group);
        tracing::info!(group = %group, epoch, instance = %to, ?command, "sending");
        self.links.send(group, to, token, command);
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
        self.links.set_urgent(&self.core);
        if step.gauges_now {
            self.set_gauges();
        }
        self.refresh(&step.changed);
        for e in step.publish {
            self.before_publishing(&e).await;
            self.notify_script(&e);
            let _ = self.publication.events.send(e);
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
        let epoch = self.core.current_epoch();
        let unchanged = hoisted.iter().all(|&i| {
            matches!(&outputs[i], Output::Persist { group, state }
                if self.persistence.holds_already(group, state, epoch))
        });
        if unchanged {
            return outputs;
        }
        let mut groups = Vec::new();
        let mut rest = Vec::with_capacity(outputs.len() - hoisted.len());
        for (i, output) in outputs.into_iter().enumerate() {
            match output {
                Output::Persist { group, state } if hoisted.contains(&i) => {
                    self.persistence.state.groups.insert(group.clone(), state);
                    groups.push(group);
                }
                other => rest.push(other),
            }
        }
        self.persistence.write(&groups, epoch).await;
        rest
    }

    /// Rebuilds the advertised views (`publication.rs`); an unsaved group
    /// keeps showing what was last durable.
    pub(super) fn refresh(&mut self, changed: &Changed) {
        let now = self.now();
        self.publication.refresh(
            &self.core,
            now,
            changed,
            &self.persistence.unsaved,
            &self.links.group_tls,
        );
    }

    fn set_gauges(&mut self) {
        let now = self.now();
        self.publication
            .set_gauges(&self.core, now, &self.links.group_tls);
    }

    /// Starts a link to `addr` of `group`, unless one runs.
    pub(super) fn watch(&mut self, group: String, addr: Addr) {
        self.links
            .watch(&self.config, self.core.myid(), group, addr);
    }
}
