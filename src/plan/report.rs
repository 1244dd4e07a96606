//! A plan as the admin API and the status page show it (the schema in
//! docs/operations.md), and the log lines of its progress.

use serde_json::{Value, json};

use crate::core::Millis;
use crate::core::plan::{Plan, Step};

/// What the book keeps of a plan besides the plan.
pub(super) struct Shown<'a> {
    pub(super) id: u64,
    pub(super) asked: &'a Value,
    pub(super) submitted_ms: u64,
}

/// The report of plan `p` at `now` (the core's clock), when the wall
/// clock reads `wall`.
pub(super) fn plan(p: &Plan, shown: Shown<'_>, now: Millis, wall: u64) -> Value {
    let at = |t: Millis| {
        if t >= now {
            wall.saturating_add(t - now)
        } else {
            wall.saturating_sub(now - t)
        }
    };
    let mut counts = [0usize; 4];
    let groups: Vec<Value> = p
        .steps()
        .map(|(name, step)| {
            let (i, shown) = group(name, step, now);
            counts[i] += 1;
            shown
        })
        .collect();
    let stopped = p.stop().map(|stop| {
        let mut shown = json!({ "reason": stop.label() });
        if let Some((group, failure)) = p.failure() {
            shown["group"] = json!(group);
            shown["why"] = json!(failure.label());
            shown["describe"] = json!(failure.describe(now));
        }
        shown
    });
    let window = p.spec().window;
    json!({
        "id": shown.id,
        "state": p.state(now).label(),
        "submitted_ms": shown.submitted_ms,
        "finished_ms": p.finished().map(at),
        "concurrency": p.spec().concurrency,
        "window": { "start_ms": at(window.start), "end_ms": window.end.map(at) },
        "asked": shown.asked,
        "stopped": stopped,
        "counts": {
            "waiting": counts[0],
            "switching": counts[1],
            "done": counts[2],
            "failed": counts[3],
        },
        "groups": groups,
    })
}

/// One group's line, with its count's index (waiting, switching, done,
/// failed).
fn group(name: &str, step: &Step, now: Millis) -> (usize, Value) {
    match step {
        Step::Waiting => (0, json!({ "name": name, "step": "waiting" })),
        Step::Switching { from, since, .. } => (
            1,
            json!({
                "name": name,
                "step": "switching",
                "from": from.to_string(),
                "for_ms": now.saturating_sub(*since),
            }),
        ),
        Step::Done { from, to, took } => (
            2,
            json!({
                "name": name,
                "step": "done",
                "from": from.to_string(),
                "to": to.to_string(),
                "took_ms": took,
            }),
        ),
        Step::Failed(failure) => (
            3,
            json!({
                "name": name,
                "step": "failed",
                "why": failure.label(),
                "describe": failure.describe(now),
            }),
        ),
    }
}

/// Logs what changed between `before` and `after`: each group's end and
/// the plan's.
pub(super) fn log_changes(id: u64, before: &Plan, after: &Plan, now: Millis) {
    for ((name, old), (_, new)) in before.steps().zip(after.steps()) {
        if old == new {
            continue;
        }
        match new {
            Step::Switching { from, .. } if matches!(old, Step::Waiting) => {
                tracing::info!("plan {id}: {name}: switching over from {from}");
            }
            Step::Done { from, to, took } => {
                tracing::info!("plan {id}: {name}: {from} -> {to} in {took} ms");
            }
            Step::Failed(failure) => {
                tracing::warn!("plan {id}: {name}: {}", failure.describe(now));
            }
            _ => {}
        }
    }
    if before.finished().is_none() && after.finished().is_some() {
        tracing::info!("plan {id}: {}", after.state(now).label());
    }
}
