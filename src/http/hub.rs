//! The status hub: what the status page and its JSON API show, kept by
//! one task per daemon from the runtime's advertised topology and its
//! event bus.
//!
//! It keeps a bounded ring of recent events (the Sentinel channels'
//! events, numbered and timestamped), each group's history of config
//! epochs, and each group's recent failovers as timelines of their steps
//! (`+sdown` … `+failover-end`, `+switch-master`). The groups document is
//! built from the index port's own publication
//! ([`crate::index::spawn_feed`], one per daemon: the very snapshots
//! and version numbers an index subscriber receives, not computed again)
//! plus the advertised details the index protocol leaves out (offsets,
//! links, epochs history, timelines). Every change is also sent to the
//! server-sent event stream ([`Update`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

pub use super::records::{EpochRecord, EventRecord, Step, Timeline};
use crate::core::{Channel, Event};
use crate::events::EventBus;
use crate::index::publish::Published;
use crate::topology::Topology;

/// Events kept for `/api/v1/events`.
pub const EVENT_RING: usize = 1000;
/// Config epochs kept per group.
pub const EPOCH_HISTORY: usize = 50;
/// Failover timelines kept per group.
pub const TIMELINES: usize = 20;
/// Steps kept per timeline (a failover of a large group reconfigures
/// many replicas).
const STEPS: usize = 200;
/// How often offsets and lags are re-sent to the stream when nothing
/// else changed.
const REFRESH: Duration = Duration::from_secs(1);
/// How long a change waits for others before the document is rebuilt.
const COALESCE: Duration = Duration::from_millis(50);

/// What the stream sends.
#[derive(Debug, Clone)]
pub enum Update {
    /// The whole groups document, as `/api/v1/groups` returns it.
    Groups(Arc<String>),
    /// One event, as `/api/v1/events` lists it.
    Event(Arc<String>),
}

#[derive(Debug, Default)]
struct History {
    /// The index port's publication as last read.
    published: Arc<Published>,
    events: VecDeque<Arc<EventRecord>>,
    next_id: u64,
    epochs: BTreeMap<String, VecDeque<EpochRecord>>,
    /// Per group: finished timelines, then the open one (if any) last.
    timelines: BTreeMap<String, VecDeque<Timeline>>,
    /// The document last sent to the stream.
    last_sent: Arc<String>,
    /// The planned switchovers' reports, newest first (`None`: the hub
    /// has no book of plans, and the document no `plans`).
    plans: Option<Arc<Value>>,
}

impl History {
    /// The index publication and the epochs' history, brought up to
    /// `topology`.
    fn update(&mut self, topology: &Topology, published: &Arc<Published>) {
        self.published = published.clone();
        let now = wall_ms();
        for (name, g) in &topology.groups {
            let list = self.epochs.entry(name.clone()).or_default();
            let master = g.master.to_string();
            if list
                .back()
                .is_none_or(|e| e.epoch != g.config_epoch || e.master != master)
            {
                list.push_back(EpochRecord {
                    epoch: g.config_epoch,
                    master,
                    time_ms: now,
                });
                if list.len() > EPOCH_HISTORY {
                    list.pop_front();
                }
            }
        }
        self.epochs.retain(|n, _| topology.groups.contains_key(n));
    }

    /// The groups document (see `api::groups_document`).
    fn document(&self, topology: &Topology) -> String {
        let mut doc = super::document::groups_document(
            topology,
            &self.published,
            &self.epochs,
            &self.timelines,
        );
        if let Some(plans) = &self.plans {
            doc["plans"] = plans.as_ref().clone();
        }
        doc.to_string()
    }
}

/// The hub. Cheap to share.
#[derive(Debug)]
pub struct Hub {
    topology: watch::Receiver<Arc<Topology>>,
    /// The index port's publication (`index::spawn_feed`): the
    /// snapshots and versions the index port serves, computed once.
    published: watch::Receiver<Arc<Published>>,
    history: Mutex<History>,
    updates: broadcast::Sender<Update>,
    /// Cancelled when the feeding task ends (the runtime stopped): the
    /// streams end then, so no page shows a frozen topology as live.
    ended: CancellationToken,
}

pub use crate::topology::wall_ms;

impl Hub {
    /// A hub fed by `topology` and `events`; its task runs until the
    /// topology's sender is gone (the runtime stopped) or it is dropped.
    pub fn start(
        topology: watch::Receiver<Arc<Topology>>,
        published: watch::Receiver<Arc<Published>>,
        events: &EventBus,
        plans: Option<watch::Receiver<Arc<Value>>>,
    ) -> Arc<Hub> {
        let (updates, _) = broadcast::channel(1024);
        let hub = Arc::new(Hub {
            topology: topology.clone(),
            published: published.clone(),
            history: Mutex::default(),
            updates,
            ended: CancellationToken::new(),
        });
        hub.history()
            .update(&hub.topology.borrow(), &hub.published.borrow());
        let rx = events.subscribe();
        let ended = hub.ended.clone();
        if let Some(p) = &plans {
            hub.history().plans = Some(p.borrow().clone());
        }
        let feed = run(Arc::downgrade(&hub), topology, published, rx, plans);
        tokio::spawn(async move {
            feed.await;
            ended.cancel();
        });
        hub
    }

    /// Resolves once the hub is no longer fed (the runtime stopped).
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver of every later update.
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.updates.subscribe()
    }

    /// The groups document now.
    pub fn groups(&self) -> Arc<String> {
        let topology = self.topology.borrow().clone();
        let published = self.published.borrow().clone();
        let mut h = self.history();
        h.update(&topology, &published);
        Arc::new(h.document(&topology))
    }

    /// Events numbered above `since`, oldest first, and the number to ask
    /// from next time.
    pub fn events_since(&self, since: u64) -> Value {
        let h = self.history();
        let events: Vec<&EventRecord> = h
            .events
            .iter()
            .filter(|e| e.id > since)
            .map(|e| e.as_ref())
            .collect();
        json!({
            "next": h.next_id,
            "oldest": h.events.front().map_or(h.next_id + 1, |e| e.id),
            "events": events,
        })
    }

    /// Brings the history up to the topology and, when someone follows
    /// the stream and the document changed, sends it.
    fn refresh(&self) {
        let topology = self.topology.borrow().clone();
        let published = self.published.borrow().clone();
        let mut h = self.history();
        h.update(&topology, &published);
        if self.updates.receiver_count() == 0 {
            return;
        }
        let doc = h.document(&topology);
        if doc == *h.last_sent {
            return;
        }
        let doc = Arc::new(doc);
        h.last_sent = doc.clone();
        drop(h);
        let _ = self.updates.send(Update::Groups(doc));
    }

    /// Records one event: in the ring, in its group's timeline, and on
    /// the stream.
    fn record(&self, event: &Event) {
        let now = wall_ms();
        let mut h = self.history();
        h.next_id += 1;
        let record = Arc::new(EventRecord {
            id: h.next_id,
            time_ms: now,
            channel: event.channel.as_str(),
            group: event.group.clone(),
            payload: event.payload.clone(),
        });
        h.events.push_back(record.clone());
        if h.events.len() > EVENT_RING {
            h.events.pop_front();
        }
        if let Some(group) = &event.group {
            let list = h.timelines.entry(group.clone()).or_default();
            step(list, event, now);
            if list.len() > TIMELINES {
                list.pop_front();
            }
        }
        if event.channel == Channel::MonitorRemoved
            && let Some(group) = &event.group
        {
            h.timelines.remove(group);
        }
        drop(h);
        if let Ok(text) = serde_json::to_string(record.as_ref()) {
            let _ = self.updates.send(Update::Event(Arc::new(text)));
        }
    }
}

/// Adds `event` to a group's timelines: a master's `+sdown` or a
/// `+try-failover` opens one; later events of the group are its steps;
/// `+failover-end` (or its timeout) or an abort closes it, and a
/// `+switch-master` just after still joins it (Sentinel sends it after
/// `+failover-end`); `-sdown` of the master before any failover step
/// drops it (nothing was done), unless a `valkyrie:failover-reason` said
/// why nothing was done: then it closes `vetoed` or `held`. A reason with
/// no timeline open starts one (a refused request: closed at once).
fn step(list: &mut VecDeque<Timeline>, event: &Event, now: u64) {
    let channel = event.channel;
    let is_master = event.payload.starts_with("master ");
    let reason = (channel == Channel::FailoverReason)
        .then(|| serde_json::from_str::<Value>(&event.payload).ok())
        .flatten();
    let step = Step {
        channel: channel.as_str(),
        time_ms: now,
        payload: event.payload.clone(),
    };
    let open = list.back().is_some_and(|t| t.end_ms.is_none());
    match list.back_mut() {
        Some(t) if open => {
            let tried = t.steps.iter().any(|s| s.channel == "+try-failover");
            if channel == Channel::SdownCleared && is_master && !tried {
                match t.reason.as_ref() {
                    // Nothing was done, and the history says why.
                    Some(r) => {
                        let outcome = not_tried(r);
                        t.steps.push(step);
                        t.end_ms = Some(now);
                        t.outcome = outcome;
                    }
                    None => {
                        list.pop_back();
                    }
                }
                return;
            }
            if t.steps.len() < STEPS {
                t.steps.push(step);
            }
            if reason.is_some() {
                t.reason = reason;
            }
            let aborted = channel.as_str().starts_with("-failover-abort");
            if matches!(
                channel,
                Channel::FailoverEnd | Channel::FailoverEndForTimeout
            ) || aborted
            {
                t.end_ms = Some(now);
                t.outcome = match (aborted, tried, t.reason.as_ref()) {
                    (false, _, _) => "done",
                    // No attempt began: a hold (no good replica) ends it.
                    (true, false, Some(r)) => not_tried(r),
                    (true, _, _) => "aborted",
                };
            }
        }
        Some(t)
            if channel == Channel::SwitchMaster
                && t.outcome == "done"
                && !t.steps.iter().any(|s| s.channel == "+switch-master") =>
        {
            t.steps.push(step);
            t.end_ms = Some(now);
        }
        _ if (channel == Channel::Sdown && is_master) || channel == Channel::TryFailover => {
            list.push_back(Timeline {
                start_ms: now,
                end_ms: None,
                outcome: "running",
                steps: vec![step],
                reason: None,
            });
        }
        _ => {
            if let Some(r) = reason {
                // A refused request or a lone abort is over at once; a
                // hold or a veto runs until the master is back.
                let over = match r.get("outcome").and_then(Value::as_str) {
                    Some("refused") => Some("refused"),
                    Some("aborted") => Some("aborted"),
                    _ => None,
                };
                list.push_back(Timeline {
                    start_ms: now,
                    end_ms: over.map(|_| now),
                    outcome: over.unwrap_or("running"),
                    steps: vec![step],
                    reason: Some(r),
                });
            }
        }
    }
}

/// The outcome of a timeline that closes without any `+try-failover`,
/// from its last reason: `vetoed`, `refused`, `aborted`, else `held`.
fn not_tried(reason: &Value) -> &'static str {
    match reason.get("outcome").and_then(Value::as_str) {
        Some("vetoed") => "vetoed",
        Some("refused") => "refused",
        Some("aborted") => "aborted",
        _ => "held",
    }
}

/// Feeds the hub until the runtime stops or the hub is dropped. Events
/// are recorded (and streamed) as they come; the groups document is
/// rebuilt at most every [`COALESCE`] after changes, and every
/// [`REFRESH`] for offsets and lags, so a burst over many groups costs
/// one rebuild, not one per event.
async fn run(
    hub: std::sync::Weak<Hub>,
    mut topology: watch::Receiver<Arc<Topology>>,
    mut published: watch::Receiver<Arc<Published>>,
    mut events: broadcast::Receiver<Event>,
    mut plans: Option<watch::Receiver<Arc<Value>>>,
) {
    use tokio::time::Instant;
    let mut every = tokio::time::interval(REFRESH);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pending: Option<Instant> = None;
    loop {
        let due = pending;
        tokio::select! {
            biased;
            changed = topology.changed() => {
                if changed.is_err() {
                    return;
                }
                pending.get_or_insert_with(|| Instant::now() + COALESCE);
            }
            // A new version follows the topology change that made it.
            changed = published.changed() => {
                if changed.is_err() {
                    return;
                }
                pending.get_or_insert_with(|| Instant::now() + COALESCE);
            }
            changed = async { plans.as_mut()?.changed().await.ok() }, if plans.is_some() => {
                let Some(hub) = hub.upgrade() else { return };
                match (changed, &plans) {
                    (Some(()), Some(p)) => {
                        hub.history().plans = Some(p.borrow().clone());
                        pending.get_or_insert_with(|| Instant::now() + COALESCE);
                    }
                    // The book is gone: its last reports stay shown.
                    _ => plans = None,
                }
            }
            received = events.recv() => {
                let Some(hub) = hub.upgrade() else { return };
                match received {
                    Ok(event) => {
                        hub.record(&event);
                        // A failover's steps change the document too.
                        pending.get_or_insert_with(|| Instant::now() + COALESCE);
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!("status page: {n} events missed (burst)");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                pending = None;
                let Some(hub) = hub.upgrade() else { return };
                hub.refresh();
            }
            _ = every.tick() => {
                let Some(hub) = hub.upgrade() else { return };
                // Offsets and lags only matter to a follower; epochs
                // change with the advertised topology, which wakes us.
                if hub.updates.receiver_count() > 0 {
                    hub.refresh();
                }
            }
        }
    }
}
