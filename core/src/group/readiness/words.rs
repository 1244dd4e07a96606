//! How the verdict is said: a bounded label per reason (metrics, JSON) and
//! plain words (the status page, the log, the Sentinel port). The words
//! live in the core, beside the values they describe, so every reader
//! says the same thing.

use super::{FenceView, Readiness, Reason, Trigger, VetoCause, WitnessVerdict};
use crate::Millis;

impl Reason {
    /// Every label [`Reason::label`] returns, with `ready` first (the
    /// label of a group nothing holds back): a metric can set them all.
    pub const LABELS: &'static [&'static str] = &[
        "ready",
        "failover_running",
        "election_running",
        "paused",
        "window",
        "pending_config",
        "witness_wait",
        "witness_veto",
        "tilt",
        "quorum_unreachable",
        "election_unwinnable",
        "epoch_exhausted",
        "awaiting_reports",
        "no_eligible_replica",
        "state_unwritable",
    ];

    /// A stable word for metrics labels and documents.
    pub fn label(&self) -> &'static str {
        match self {
            Reason::FailoverRunning { .. } => "failover_running",
            Reason::ElectionRunning { .. } => "election_running",
            Reason::Paused => "paused",
            Reason::Window { .. } => "window",
            Reason::PendingConfig { .. } => "pending_config",
            Reason::WitnessWait { .. } => "witness_wait",
            Reason::WitnessVeto(_) => "witness_veto",
            Reason::Tilt { .. } => "tilt",
            Reason::QuorumUnreachable { .. } => "quorum_unreachable",
            Reason::ElectionUnwinnable { .. } => "election_unwinnable",
            Reason::EpochExhausted => "epoch_exhausted",
            Reason::AwaitingReports { .. } => "awaiting_reports",
            Reason::NoEligibleReplica => "no_eligible_replica",
            Reason::StateUnwritable => "state_unwritable",
        }
    }

    /// In plain words, with times relative to `now`.
    pub fn describe(&self, now: Millis) -> String {
        match self {
            Reason::FailoverRunning { epoch, promoted } => {
                format!("a failover is running (epoch {epoch}, promoting {promoted})")
            }
            Reason::ElectionRunning { epoch } => {
                format!("an election is running (epoch {epoch})")
            }
            Reason::Paused => "paused by an operator: detection goes on, no promotion starts \
                 (VALKYRIE RESUME ends it)"
                .into(),
            Reason::Window { until } => format!(
                "no new failover for {}: the back-off after the last attempt or vote",
                within(now, *until)
            ),
            Reason::PendingConfig {
                master,
                config_epoch,
                until,
            } => format!(
                "a peer's newer configuration (epoch {config_epoch}, master {master}) \
                 holds our candidacy for up to {}",
                within(now, *until)
            ),
            Reason::WitnessWait { until } => format!(
                "waiting up to {} for the replicas to report since the master went silent",
                within(now, *until)
            ),
            Reason::WitnessVeto(cause) => format!("vetoed: {}", cause.describe()),
            Reason::Tilt { since, until: None } => format!(
                "TILT for {}: more than half of the masters are unreachable, \
                 so Valkyrie is more likely the one cut off",
                secs(now.saturating_sub(*since))
            ),
            Reason::Tilt {
                since,
                until: Some(until),
            } => format!(
                "TILT for {}: Valkyrie did not run for longer than tilt-trigger \
                 (stopped, starved or frozen), so its timeouts cannot be trusted \
                 for another {}",
                secs(now.saturating_sub(*since)),
                within(now, *until)
            ),
            Reason::QuorumUnreachable { usable, quorum } => format!(
                "only {usable} sentinel(s) reachable, ourselves included: \
                 the quorum of {quorum} cannot agree that the master is down"
            ),
            Reason::ElectionUnwinnable {
                usable,
                needed,
                known,
            } => format!(
                "no election can be won: it needs {needed} votes, \
                 and {usable} of the {known} known sentinels are reachable"
            ),
            Reason::EpochExhausted => {
                "the failover epoch is at its maximum: reset the state file".into()
            }
            Reason::AwaitingReports { missing } => {
                let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
                format!(
                    "waiting for the first report of {} since Valkyrie started",
                    names.join(", ")
                )
            }
            Reason::NoEligibleReplica => "no replica can be promoted".into(),
            Reason::StateUnwritable => {
                "the state file cannot be written: every decision is held".into()
            }
        }
    }
}

impl VetoCause {
    /// In plain words.
    pub fn describe(self) -> String {
        match self {
            VetoCause::NoWitness => {
                "the master is unreachable from here, and so is every replica".into()
            }
            VetoCause::Vouched { vouching, fresh } => format!(
                "the master is unreachable from here, \
                 but {vouching} of {fresh} replicas still hear from it"
            ),
            VetoCause::FenceHolds { silent, needed } => format!(
                "the write fence requires {needed} replicas and only {silent} stopped \
                 hearing from the master: it may still take writes through the others"
            ),
        }
    }
}

impl VetoCause {
    /// A stable word for documents: `no_witness`, `vouched`,
    /// `fence_holds`.
    pub fn label(self) -> &'static str {
        match self {
            VetoCause::NoWitness => "no_witness",
            VetoCause::Vouched { .. } => "vouched",
            VetoCause::FenceHolds { .. } => "fence_holds",
        }
    }
}

impl WitnessVerdict {
    /// A stable word for documents: `wait`, `veto`, `go`.
    pub fn label(self) -> &'static str {
        match self {
            WitnessVerdict::Wait { .. } => "wait",
            WitnessVerdict::Veto(_) => "veto",
            WitnessVerdict::Go => "go",
        }
    }
}

impl Trigger {
    /// A stable word for documents: `odown`, `lost_data`, `manual`.
    pub fn label(&self) -> &'static str {
        match self {
            Trigger::Odown => "odown",
            Trigger::LostData { .. } => "lost_data",
            Trigger::Manual => "manual",
        }
    }
}

impl FenceView {
    /// A stable word for documents: `off`, `not_in_force`, `refused`,
    /// `in_force`, `relaxed`.
    pub fn label(self) -> &'static str {
        match self {
            FenceView::Off => "off",
            FenceView::NotInForce => "not_in_force",
            FenceView::Refused => "refused",
            FenceView::InForce { .. } => "in_force",
            FenceView::Relaxed { .. } => "relaxed",
        }
    }
}

impl Readiness {
    /// The label of the primary reason, `ready` when nothing holds.
    pub fn label(&self) -> &'static str {
        self.holds.first().map_or("ready", Reason::label)
    }

    /// The verdict in one line: what a failure now would do, or its
    /// primary reason.
    pub fn describe(&self, now: Millis) -> String {
        if let Some(first) = self.holds.first() {
            return first.describe(now);
        }
        match &self.candidate {
            Some(c) => match c.lag_bytes {
                Some(lag) => format!("ready: would promote {} (lag {lag} B)", c.addr),
                None => format!("ready: would promote {}", c.addr),
            },
            // Ready implies a candidate (`NoEligibleReplica` otherwise).
            None => "ready".into(),
        }
    }
}

/// `until` as a time from `now`.
fn within(now: Millis, until: Millis) -> String {
    secs(until.saturating_sub(now))
}

/// Milliseconds as seconds with one decimal.
fn secs(ms: Millis) -> String {
    format!("{}.{} s", ms / 1000, ms % 1000 / 100)
}
