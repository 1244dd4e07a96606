//! A group's readiness verdict in the groups document (`"readiness"`,
//! the schema in docs/readiness.md): the core's words and labels, its
//! deadlines as wall-clock times.

use serde_json::{Map, Value, json};

use crate::core::{FenceView, Readiness, Reason};
use crate::topology::Verdict;

/// The `"readiness"` object of a group; `null` before its first verdict.
pub(super) fn readiness(verdict: Option<&Verdict>) -> Value {
    let Some(v) = verdict else {
        return Value::Null;
    };
    let r: &Readiness = &v.readiness;
    json!({
        "ready": r.ready,
        "reason": r.label(),
        "text": v.text(),
        "holds": r.holds.iter().map(|h| hold(v, h)).collect::<Vec<_>>(),
        "trigger": r.trigger.label(),
        "would_promote": r.candidate.as_ref().map(|c| json!({
            "addr": c.addr.to_string(),
            "priority": c.priority,
            "offset": c.offset,
            "lag_bytes": c.lag_bytes,
        })),
        "replicas": r.replicas.iter().map(|x| json!({
            "addr": x.addr.to_string(),
            "eligible": x.skip.is_none(),
            "reason": x.skip.map(|s| s.label()),
        })).collect::<Vec<_>>(),
        "quorum": r.quorum.map(|q| json!({
            "usable": q.usable,
            "quorum": q.quorum,
            "votes_needed": q.needed,
            "known": q.known,
        })),
        "fence": fence(r.fence),
        "witnesses": r.witnesses.map(|w| w.label()),
        "switchover": match &r.manual {
            Ok(to) => json!({"ready": true, "to": to.to_string()}),
            Err(e) => json!({"ready": false, "error": e.to_string()}),
        },
    })
}

/// One hold: its label, its words, and its data.
fn hold(v: &Verdict, reason: &Reason) -> Value {
    let mut out = Map::new();
    out.insert("reason".into(), reason.label().into());
    out.insert("text".into(), reason.describe(v.at).into());
    let mut put = |key: &str, value: Value| {
        out.insert(key.into(), value);
    };
    crate::topology::hold_data(reason, &mut put, |t| v.wall(t));
    Value::Object(out)
}

/// The write fence: its state, and the replicas it requires.
fn fence(f: FenceView) -> Value {
    match f {
        FenceView::InForce { replicas } => json!({"state": f.label(), "replicas": replicas}),
        FenceView::Relaxed { in_force, full } => {
            json!({"state": f.label(), "replicas": in_force, "full": full})
        }
        FenceView::Off | FenceView::NotInForce | FenceView::Refused => {
            json!({"state": f.label()})
        }
    }
}
