//! Planned switchovers across many groups, carried out: the book of
//! plans ([`Plans`]: one running at a time, the last [`KEPT`] finished
//! ones), and one task per plan that steps the core's
//! [`Plan`](crate::core::plan::Plan) on every topology change (and every
//! [`TICK`]), asks its switchovers through the runtime
//! ([`Handle::switch_over`], the zero-loss path of `SENTINEL FAILOVER`)
//! and reports each answer back.
//!
//! The decisions (order, pre-flight, stop) are the core's; this module
//! only reads the facts from the advertised topology ([`facts`]) and
//! publishes each plan's report ([`report`]) for the admin API and the
//! status page. A plan lives in this daemon's memory: a restart ends it
//! (the switchovers it started finish in the core as any other).

mod report;
mod request;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

pub use request::{PlanRequest, RequestError, Targets};

use crate::core::plan::{Facts, Plan, PlanError, PlanSpec};
use crate::runtime::Handle;
use crate::topology::{SelectionError, Topology};

/// Finished plans kept for the API.
pub const KEPT: usize = 16;
/// How often a running plan steps when the topology does not change.
pub const TICK: Duration = Duration::from_millis(100);

/// Why a plan was not made, or not cancelled.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The request is malformed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Its groups could not be chosen.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The core refused the plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Another plan has not finished.
    #[error("plan {0} has not finished: cancel it first")]
    Busy(u64),
    /// No plan has that number.
    #[error("no plan {0}")]
    NoSuchPlan(u64),
    /// The runtime refused (Sentinel's texts).
    #[error(transparent)]
    Runtime(#[from] crate::runtime::Refusal),
}

/// One plan in the book.
#[derive(Debug)]
struct Entry {
    id: u64,
    plan: Plan,
    /// What the operator asked, as shown back.
    asked: Value,
    /// The wall clock when it was made, in Unix milliseconds.
    submitted_ms: u64,
}

impl Entry {
    fn report(&self, now: crate::core::Millis, wall: u64) -> Value {
        let shown = report::Shown {
            id: self.id,
            asked: &self.asked,
            submitted_ms: self.submitted_ms,
        };
        report::plan(&self.plan, shown, now, wall)
    }
}

#[derive(Debug, Default)]
struct Book {
    /// Oldest first; only the last may be unfinished.
    plans: VecDeque<Entry>,
    next_id: u64,
}

/// The plans of this daemon. Cheap to share.
#[derive(Debug)]
pub struct Plans {
    handle: Handle,
    book: Mutex<Book>,
    /// The reports of every kept plan, newest first; sent on each change.
    reports: watch::Sender<Arc<Value>>,
}

impl Plans {
    /// An empty book over the runtime behind `handle`.
    pub fn new(handle: Handle) -> Arc<Plans> {
        let (reports, _) = watch::channel(Arc::new(Value::Array(Vec::new())));
        Arc::new(Plans {
            handle,
            book: Mutex::default(),
            reports,
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reports of every kept plan, newest first, kept current.
    pub fn watch(&self) -> watch::Receiver<Arc<Value>> {
        self.reports.subscribe()
    }

    /// The reports now.
    pub fn reports(&self) -> Arc<Value> {
        self.reports.borrow().clone()
    }

    /// Makes the plan `request` asks for, over the groups it selects now,
    /// and starts it. Returns its report.
    pub fn submit(self: &Arc<Self>, request: PlanRequest) -> Result<Value, Refusal> {
        let now = self.handle.now_ms();
        let wall = crate::topology::wall_ms();
        let topology = self.handle.topology.borrow().clone();
        let groups = request.selection()?.resolve(&topology)?;
        let spec = PlanSpec {
            groups,
            concurrency: request.concurrency(),
            window: request.window(now, wall)?,
        };
        let plan = Plan::new(spec, now)?;
        let mut book = self.book();
        if let Some(last) = book.plans.back()
            && last.plan.finished().is_none()
        {
            return Err(Refusal::Busy(last.id));
        }
        book.next_id += 1;
        let id = book.next_id;
        tracing::info!(
            "plan {id}: switchovers of {} group(s), {} at once, submitted",
            plan.spec().groups.len(),
            plan.spec().concurrency
        );
        book.plans.push_back(Entry {
            id,
            plan,
            asked: request.shown(),
            submitted_ms: wall,
        });
        while book.plans.len() > KEPT + 1 {
            book.plans.pop_front();
        }
        let shown = self.publish(&book);
        drop(book);
        let me = self.clone();
        tokio::spawn(async move { me.run(id).await });
        Ok(shown)
    }

    /// Pauses (`paused`) or resumes the groups `targets` selects now;
    /// answered once the change is persisted. Returns the groups.
    pub async fn pause(&self, targets: &Targets, paused: bool) -> Result<Vec<String>, Refusal> {
        let topology = self.handle.topology.borrow().clone();
        let groups = targets.selection()?.resolve(&topology)?;
        self.handle.pause(groups.clone(), paused).await?;
        Ok(groups)
    }

    /// Cancels plan `id`: no switchover starts any more; those running
    /// finish. Returns its report.
    pub fn cancel(&self, id: u64) -> Result<Value, Refusal> {
        let mut book = self.book();
        let entry = book
            .plans
            .iter_mut()
            .find(|e| e.id == id)
            .ok_or(Refusal::NoSuchPlan(id))?;
        if entry.plan.cancel() {
            tracing::info!("plan {id}: cancelled by an operator");
        }
        let now = self.handle.now_ms();
        let shown = entry.report(now, crate::topology::wall_ms());
        self.publish(&book);
        Ok(shown)
    }

    /// Sends the reports of `book`; returns the newest.
    fn publish(&self, book: &Book) -> Value {
        let now = self.handle.now_ms();
        let wall = crate::topology::wall_ms();
        let all: Vec<Value> = book
            .plans
            .iter()
            .rev()
            .map(|e| e.report(now, wall))
            .collect();
        let newest = all.first().cloned().unwrap_or(Value::Null);
        self.reports.send_replace(Arc::new(Value::Array(all)));
        newest
    }

    /// Steps plan `id` until it finishes.
    async fn run(&self, id: u64) {
        let mut topology = self.handle.topology.clone();
        loop {
            let (actions, finished) = {
                let mut book = self.book();
                let Some(entry) = book.plans.iter_mut().find(|e| e.id == id) else {
                    return;
                };
                let seen = topology.borrow_and_update().clone();
                let before = entry.plan.clone();
                let actions = entry.plan.step(self.handle.now_ms(), |g| facts(&seen, g));
                report::log_changes(id, &before, &entry.plan, self.handle.now_ms());
                let finished = entry.plan.finished().is_some();
                self.publish(&book);
                (actions, finished)
            };
            for action in actions {
                let answer = self
                    .handle
                    .switch_over(action.group.clone(), action.from)
                    .await
                    .map_err(|e| e.to_string());
                if let Err(text) = &answer {
                    tracing::warn!("plan {id}: {}: switchover refused: {text}", action.group);
                }
                let mut book = self.book();
                if let Some(entry) = book.plans.iter_mut().find(|e| e.id == id) {
                    entry.plan.answered(&action.group, answer);
                }
            }
            if finished {
                return;
            }
            tokio::select! {
                changed = topology.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }
}

/// What the plan needs of group `name`, from the advertised topology.
fn facts<'a>(topology: &'a Topology, name: &str) -> Option<Facts<'a>> {
    let view = topology.groups.get(name)?;
    let verdict = topology.readiness.get(name)?;
    let unlinked = view
        .replicas
        .iter()
        .filter(|r| !r.retiring)
        .filter(|r| r.down || r.disconnected || !r.upstream.as_ref().is_some_and(|u| u.link_up))
        .map(|r| r.addr.clone())
        .collect();
    Some(Facts {
        master: &view.master,
        master_down: view.master_down,
        failover_running: view.failover_in_progress,
        readiness: &verdict.readiness,
        unlinked,
        failover_timeout: view.failover_timeout,
    })
}
