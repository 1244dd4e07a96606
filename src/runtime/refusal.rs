//! Carrying out the core's `Output::Refused`: why a failover or a
//! switchover was held back, vetoed, given up or refused. It becomes a
//! warning in the log, the counter `valkyrie_failover_refusals_total`, and
//! an event on `valkyrie:failover-reason` whose JSON payload is built
//! here (the core has no serde); the status history takes it from the
//! event.

use serde_json::{Map, Value, json};

use super::shell::Shell;
use crate::core::{Abort, Channel, Event, Millis, Op, Outcome, Output, Refusal, SwitchoverAbort};

/// One refusal, as the shell reports it.
pub(super) struct Refused {
    pub(super) group: String,
    pub(super) op: Op,
    pub(super) outcome: Outcome,
    pub(super) epoch: u64,
    pub(super) reason: Refusal,
}

impl Shell {
    /// The output that reports `SENTINEL FAILOVER` of `group` refused for
    /// `why` (none for a group the core does not know).
    pub(super) fn refused_request(&self, group: &str, why: Refusal) -> Vec<Output> {
        self.core
            .groups()
            .get(group)
            .map(|g| g.refused(g.manual_op(), Outcome::Refused, g.epoch, why))
            .into_iter()
            .collect()
    }

    /// Logs and counts a refusal; returns its event, to be published with
    /// the step's others.
    pub(super) fn refusal(&self, r: &Refused) -> Event {
        let now = self.now();
        let text = r.reason.describe(now);
        let label = r.reason.label();
        tracing::warn!(
            group = %r.group,
            epoch = r.epoch,
            op = r.op.label(),
            outcome = r.outcome.label(),
            reason = label,
            "{} {}: {text}",
            r.op.label(),
            r.outcome.label()
        );
        crate::metrics::failover_refused(&r.group, r.op.label(), r.outcome.label(), label);
        let mut event = Event::new(
            Channel::FailoverReason,
            payload(r, &text, now, crate::topology::wall_ms()).to_string(),
        );
        event.group = Some(r.group.clone());
        event
    }
}

/// The event's JSON: `group`, `op`, `outcome`, `epoch`, `reason` (the
/// label), `text`, and the reason's data (times as Unix milliseconds,
/// from the core's `now` and the wall clock `wall`).
pub(super) fn payload(r: &Refused, text: &str, now: Millis, wall: u64) -> Value {
    let mut out = Map::new();
    out.insert("group".into(), json!(r.group));
    out.insert("op".into(), json!(r.op.label()));
    out.insert("outcome".into(), json!(r.outcome.label()));
    out.insert("epoch".into(), json!(r.epoch));
    out.insert("reason".into(), json!(r.reason.label()));
    out.insert("text".into(), json!(text));
    let at = |t: Millis| {
        if t >= now {
            wall.saturating_add(t - now)
        } else {
            wall.saturating_sub(now - t)
        }
    };
    let mut put = |key: &str, value: Value| {
        out.insert(key.into(), value);
    };
    match &r.reason {
        Refusal::Hold(hold) => crate::topology::hold_data(hold, &mut put, at),
        Refusal::Aborted(abort) => match abort {
            Abort::NotElected { split } => put("split", json!(split)),
            Abort::Superseded { config_epoch } => put("config_epoch", json!(config_epoch)),
            Abort::Switchover(
                SwitchoverAbort::PauseRefused { by, error }
                | SwitchoverAbort::DemotionRefused { by, error }
                | SwitchoverAbort::PromotionRefused { by, error },
            ) => {
                put("by", json!(by.to_string()));
                put("error", json!(error));
            }
            _ => {}
        },
        Refusal::MasterMoved => {}
    }
    Value::Object(out)
}
