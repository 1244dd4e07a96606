//! How a refusal is said: a bounded label per value (metrics, the event's
//! JSON) and plain words (the log, the event's `text`).

use std::fmt;

use super::{Abort, Op, Outcome, Refusal, SwitchoverAbort};
use crate::Millis;
use crate::readiness::Reason;

impl Op {
    /// `failover` or `switchover`.
    pub fn label(self) -> &'static str {
        match self {
            Op::Failover => "failover",
            Op::Switchover => "switchover",
        }
    }
}

impl Outcome {
    /// `held`, `vetoed`, `aborted` or `refused`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Held => "held",
            Outcome::Vetoed => "vetoed",
            Outcome::Aborted => "aborted",
            Outcome::Refused => "refused",
        }
    }
}

impl Refusal {
    /// Every label [`Refusal::label`] returns: the verdict's holds (not
    /// `ready`), the causes of an abort, and `master_moved`.
    pub const LABELS: &'static [&'static str] = &[
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
        "promotion_timeout",
        "candidate_down",
        "candidate_lost_data",
        "never_promoted",
        "not_elected",
        "epoch_moved",
        "superseded",
        "pause_refused",
        "master_not_master",
        "master_restarted",
        "catch_up_timeout",
        "candidate_not_replica",
        "master_down",
        "demotion_refused",
        "promotion_refused",
        "master_moved",
    ];

    /// A stable word for metric labels and the event: the hold's label,
    /// the abort's cause, or `master_moved`.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Hold(r) => r.label(),
            Refusal::Aborted(a) => a.label(),
            Refusal::MasterMoved => "master_moved",
        }
    }

    /// In plain words, with times relative to `now`.
    pub fn describe(&self, now: Millis) -> String {
        match self {
            Refusal::Hold(r) => r.describe(now),
            Refusal::Aborted(a) => a.to_string(),
            Refusal::MasterMoved => "the master is no longer the one to switch over from".into(),
        }
    }

    /// The hold, when it is one.
    pub fn hold(&self) -> Option<&Reason> {
        match self {
            Refusal::Hold(r) => Some(r),
            _ => None,
        }
    }
}

impl Abort {
    /// A stable word: `promotion_timeout`, `candidate_down`,
    /// `candidate_lost_data`, `never_promoted`, `not_elected`,
    /// `epoch_moved`, `superseded`, or the switchover's cause.
    pub fn label(&self) -> &'static str {
        match self {
            Abort::PromotionTimeout => "promotion_timeout",
            Abort::CandidateDown => "candidate_down",
            Abort::CandidateLostData => "candidate_lost_data",
            Abort::NeverPromoted => "never_promoted",
            Abort::NotElected { .. } => "not_elected",
            Abort::EpochMoved => "epoch_moved",
            Abort::Superseded { .. } => "superseded",
            Abort::Switchover(s) => s.label(),
        }
    }
}

impl fmt::Display for Abort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Abort::PromotionTimeout => {
                f.write_str("the chosen replica did not report itself master in time")
            }
            Abort::CandidateDown => {
                f.write_str("the chosen replica went down before its promotion was confirmed")
            }
            Abort::CandidateLostData => {
                f.write_str("the chosen replica lost its data before its promotion")
            }
            Abort::NeverPromoted => f.write_str(
                "the failover interrupted by a restart was abandoned: \
                 its replica was never promoted",
            ),
            Abort::NotElected { split: true } => {
                f.write_str("not elected: the votes are split, nobody can win")
            }
            Abort::NotElected { split: false } => {
                f.write_str("not elected: the election timed out")
            }
            Abort::EpochMoved => f.write_str(
                "the election was given up: the current epoch moved past it \
                 (another sentinel runs a newer one)",
            ),
            Abort::Superseded { config_epoch } => write!(
                f,
                "superseded by a peer's configuration of epoch {config_epoch}"
            ),
            Abort::Switchover(s) => write!(f, "switchover abandoned: {s}"),
        }
    }
}

impl SwitchoverAbort {
    /// A stable word: `pause_refused`, `master_not_master`,
    /// `master_restarted`, `catch_up_timeout`, `candidate_not_replica`,
    /// `candidate_down`, `master_down`, `demotion_refused`,
    /// `promotion_refused`.
    pub fn label(&self) -> &'static str {
        match self {
            SwitchoverAbort::PauseRefused { .. } => "pause_refused",
            SwitchoverAbort::MasterNotMaster => "master_not_master",
            SwitchoverAbort::MasterRestarted => "master_restarted",
            SwitchoverAbort::CatchUpTimeout => "catch_up_timeout",
            SwitchoverAbort::CandidateNotReplica => "candidate_not_replica",
            SwitchoverAbort::CandidateDown => "candidate_down",
            SwitchoverAbort::MasterDown => "master_down",
            SwitchoverAbort::DemotionRefused { .. } => "demotion_refused",
            SwitchoverAbort::PromotionRefused { .. } => "promotion_refused",
        }
    }
}

/// The log's text of each cause, unchanged from when it was a string.
impl fmt::Display for SwitchoverAbort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchoverAbort::PauseRefused { by, error } => {
                write!(f, "{by} refused CLIENT PAUSE: {error}")
            }
            SwitchoverAbort::MasterNotMaster => {
                f.write_str("the master no longer reports the master role")
            }
            SwitchoverAbort::MasterRestarted => {
                f.write_str("the master restarted since it last reported")
            }
            SwitchoverAbort::CatchUpTimeout => {
                f.write_str("the chosen replica did not catch up in time")
            }
            SwitchoverAbort::CandidateNotReplica => {
                f.write_str("the chosen replica no longer reports the replica role")
            }
            SwitchoverAbort::CandidateDown => f.write_str("the chosen replica went down"),
            SwitchoverAbort::MasterDown => f.write_str("the master went down"),
            SwitchoverAbort::DemotionRefused { by, error } => {
                write!(f, "{by} refused its demotion (REPLICAOF): {error}")
            }
            SwitchoverAbort::PromotionRefused { by, error } => {
                write!(f, "{by} refused its promotion (REPLICAOF NO ONE): {error}")
            }
        }
    }
}
