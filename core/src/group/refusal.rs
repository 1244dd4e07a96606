//! One structured reason for every failover or switchover that was held
//! back, vetoed, given up or refused ([`Output::Refused`]).
//!
//! The holds are the verdict's own [`Reason`]s, passed as the step tested
//! them, so the log, the event and the status page say the same words.
//! The causes of a given-up attempt ([`Abort`]) are not holds: they are
//! here, apart from the verdict's [`Reason`], whose labels stay the
//! verdict's. A hold is reported on its transitions only
//! ([`Group::report_hold`]): a TILT that lasts an hour gives one report.
//! The words ([`Refusal::label`], [`Refusal::describe`]) are in `words`.

mod words;

use super::{Failover, Group};
use crate::readiness::Reason;
use crate::{Addr, AdminError, Output, Step};

/// What was held back, vetoed, given up or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A failover of a master that is down (or lost its data), or
    /// `SENTINEL FAILOVER` with the master down.
    Failover,
    /// A planned switchover: `SENTINEL FAILOVER` with the master up.
    Switchover,
}

/// How it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Not started yet: a hold stands in the way.
    Held,
    /// Not started: the witnesses veto it.
    Vetoed,
    /// Started, then given up.
    Aborted,
    /// An operator's request refused.
    Refused,
}

/// Why.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// One of the verdict's holds.
    Hold(Reason),
    /// An attempt given up.
    Aborted(Abort),
    /// A switchover asked away from a master that is no longer the
    /// master.
    MasterMoved,
}

/// Why a failover, an election or a switchover was given up.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Abort {
    /// The chosen replica did not report itself master in time.
    PromotionTimeout,
    /// The chosen replica went down before its promotion was confirmed.
    CandidateDown,
    /// The chosen replica resynced (lost its data) before its promotion.
    CandidateLostData,
    /// A failover interrupted by a restart: its promotion never happened.
    NeverPromoted,
    /// Our election was not won: timed out, or `split` (nobody can win).
    NotElected {
        /// The votes were split so that nobody could win any more.
        split: bool,
    },
    /// Our election was given up: the current epoch moved past it.
    EpochMoved,
    /// A peer's configuration of a newer epoch was adopted.
    Superseded {
        /// Its config epoch.
        config_epoch: u64,
    },
    /// A planned switchover given up before any promotion.
    Switchover(SwitchoverAbort),
}

/// Why a planned switchover was given up (the master is unpaused and
/// stays the master). Its `Display` is the log's text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SwitchoverAbort {
    /// The master answered `CLIENT PAUSE` with an error.
    PauseRefused {
        /// The master.
        by: Addr,
        /// Its error reply.
        error: String,
    },
    /// The master no longer reports the master role.
    MasterNotMaster,
    /// The master restarted since it last reported.
    MasterRestarted,
    /// The chosen replica did not catch up within half the pause.
    CatchUpTimeout,
    /// The chosen replica no longer reports the replica role.
    CandidateNotReplica,
    /// The chosen replica went down.
    CandidateDown,
    /// The master went down.
    MasterDown,
    /// The paused master answered its demotion (`REPLICAOF <chosen>`,
    /// sent before the promotion) with an error.
    DemotionRefused {
        /// The master.
        by: Addr,
        /// Its error reply.
        error: String,
    },
    /// The chosen replica answered `REPLICAOF NO ONE` with an error; the
    /// old master, demoted already, is made master again.
    PromotionRefused {
        /// The chosen replica.
        by: Addr,
        /// Its error reply.
        error: String,
    },
}

/// The label of the hold last reported. It decides only whether a report
/// is said again, never what the group does: two groups that differ only
/// here are the same group, so it takes no part in equality or hashing
/// (the models' state spaces do not grow with it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Reported(pub(crate) Option<&'static str>);

impl PartialEq for Reported {
    fn eq(&self, _: &Reported) -> bool {
        true
    }
}

impl Eq for Reported {}

impl std::hash::Hash for Reported {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl Group {
    /// The output that reports `reason` for this group.
    pub fn refused(&self, op: Op, outcome: Outcome, epoch: u64, reason: Refusal) -> Output {
        Output::Refused {
            group: self.spec.name.clone(),
            op,
            outcome,
            epoch,
            reason,
        }
    }

    /// What `SENTINEL FAILOVER` is for this group now: a switchover while
    /// the master answers (or one is running), a failover otherwise.
    pub fn manual_op(&self) -> Op {
        match &self.failover {
            Some(f) => op_of(f),
            None if self.master_reachable() => Op::Switchover,
            None => Op::Failover,
        }
    }

    /// Reports a hold of an automatic failover, once per change of its
    /// label ([`Group::forget_hold`] clears it).
    pub(crate) fn report_hold(&mut self, cx: &mut Step<'_>, outcome: Outcome, reason: Reason) {
        if self.reported_hold.0 == Some(reason.label()) {
            return;
        }
        self.report_hold_again(cx, outcome, reason);
    }

    /// Reports a hold even when its label was the last reported (a hold
    /// rate-limited at its call site, as `-failover-abort-no-good-slave`).
    pub(crate) fn report_hold_again(
        &mut self,
        cx: &mut Step<'_>,
        outcome: Outcome,
        reason: Reason,
    ) {
        self.reported_hold.0 = Some(reason.label());
        let out = self.refused(Op::Failover, outcome, self.epoch, Refusal::Hold(reason));
        cx.out.push(out);
    }

    /// Reports an attempt of `epoch` given up.
    pub(crate) fn report_abort(&mut self, cx: &mut Step<'_>, op: Op, epoch: u64, why: Abort) {
        let out = self.refused(op, Outcome::Aborted, epoch, Refusal::Aborted(why));
        cx.out.push(out);
    }

    /// Forgets the hold last reported once the master is neither SDOWN
    /// nor known to have lost its data: the next failure reports its
    /// holds afresh. An attempt that starts forgets it too.
    pub(crate) fn forget_hold(&mut self) {
        let master_down = self.master_instance().is_some_and(|m| m.sdown);
        if !master_down && self.master_lost.is_none() {
            self.reported_hold.0 = None;
        }
    }
}

/// What a running failover is: one that paused its master is a
/// switchover.
pub(crate) fn op_of(f: &Failover) -> Op {
    if f.paused_until.is_some() {
        Op::Switchover
    } else {
        Op::Failover
    }
}

impl AdminError {
    /// Why `SENTINEL FAILOVER` of `group` was refused with this error, as
    /// a [`Refusal`]; `None` for errors that are no refusal of a failover
    /// (an unknown or duplicate group).
    pub fn refusal(&self, group: &Group) -> Option<Refusal> {
        let hold = match self {
            AdminError::InProgress => match (&group.failover, &group.election) {
                (Some(f), _) => Reason::FailoverRunning {
                    epoch: f.epoch,
                    promoted: f.promoted.clone(),
                },
                (None, Some(e)) => Reason::ElectionRunning { epoch: e.epoch },
                (None, None) => Reason::ElectionRunning { epoch: group.epoch },
            },
            AdminError::NoGoodReplica => Reason::NoEligibleReplica,
            AdminError::NotEveryReplicaReported => Reason::AwaitingReports {
                missing: group.missing_reports(),
            },
            AdminError::EpochExhausted => Reason::EpochExhausted,
            AdminError::Paused => Reason::Paused,
            AdminError::MasterMoved => return Some(Refusal::MasterMoved),
            AdminError::NoSuchMaster | AdminError::DuplicateMaster => return None,
        };
        Some(Refusal::Hold(hold))
    }
}
