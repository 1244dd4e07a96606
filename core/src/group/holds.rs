//! The rules that hold a failover back, each one function: the failover
//! path ([`failover`](super::failover), [`election`](crate::peering::election))
//! and the readiness verdict ([`readiness`](super::readiness)) call the
//! same ones, so the verdict cannot drift from what a failure would meet.
//!
//! - the back-off window after an aborted attempt, a candidacy or a vote
//!   ([`Group::window`]);
//! - the picture a choice waits for ([`Group::missing_reports`]);
//! - the epoch guard ([`Group::epoch_exhausted`]);
//! - the checks of `SENTINEL FAILOVER` ([`Group::manual_check`]).

use super::Group;
use crate::peering::epoch_available;
use crate::{Addr, AdminError, Millis, Step, select};

impl Group {
    /// Until when no new failover (in peer mode, no candidacy) starts:
    /// the back-off after an aborted attempt, our own candidacy, a vote
    /// for another sentinel or a split vote. `None` once it has passed.
    pub(crate) fn window(&self, now: Millis) -> Option<Millis> {
        (now < self.retry_at).then_some(self.retry_at)
    }

    /// The instances a choice still waits for: every one not known to be
    /// down must have reported at least once (right after a daemon
    /// restart they have not), so the choice is not made on part of the
    /// group.
    pub(crate) fn missing_reports(&self) -> Vec<Addr> {
        self.instances
            .values()
            .filter(|i| {
                i.addr != self.master && i.info.is_none() && !i.sdown && i.failure.is_none()
            })
            .map(|i| i.addr.clone())
            .collect()
    }

    /// Whether a replica may be chosen ([`Group::missing_reports`] is
    /// empty).
    pub(crate) fn picture_complete(&self) -> bool {
        self.missing_reports().is_empty()
    }

    /// Every failover needs an epoch of its own: at `u64::MAX` none can
    /// start (a state file refuses epochs that large, so only a hand-made
    /// one gets here). Logged at most once per `failover-timeout`.
    pub(crate) fn epoch_exhausted(&mut self, cx: &mut Step<'_>) -> bool {
        if epoch_available(cx.daemon.current_epoch) {
            return false;
        }
        if self
            .no_good_at
            .is_none_or(|t| cx.now.saturating_sub(t) >= self.failover_deadline())
        {
            self.no_good_at = Some(cx.now);
            self.log(
                cx.out,
                "the failover epoch is at its maximum: no failover can start".to_string(),
            );
        }
        true
    }

    /// The replica `SENTINEL FAILOVER` promotes. The operator's choice
    /// waits for the picture an automatic one waits for (a replica not
    /// heard from yet may hold the data), and it is the automatic choice:
    /// after the master lost its data, never a replica that resynced from
    /// it. With the master up (a switchover), a replica whose link is up
    /// comes first ([`select::choose_linked`]).
    pub(crate) fn manual_choice(&self, now: Millis) -> Result<Addr, AdminError> {
        if !self.picture_complete() {
            return Err(AdminError::NotEveryReplicaReported);
        }
        let lost = self.master_lost.as_deref();
        let chosen = if self.master_reachable() {
            select::choose_linked(self, now, lost)
        } else {
            self.candidate(now, lost)
        };
        chosen.ok_or(AdminError::NoGoodReplica)
    }

    /// Whether `SENTINEL FAILOVER` would start now, and towards whom (in
    /// peer mode: whether its election would start). The checks in the
    /// order each mode has always made them, so the first error is the
    /// one the operator gets.
    pub(crate) fn manual_check(&self, now: Millis, current_epoch: u64) -> Result<Addr, AdminError> {
        if self.failover.is_some() {
            return Err(AdminError::InProgress);
        }
        if self.paused {
            return Err(AdminError::Paused);
        }
        if self.peer_mode() {
            if self.election.is_some() {
                return Err(AdminError::InProgress);
            }
            let candidate = self.manual_choice(now)?;
            if !epoch_available(current_epoch) {
                return Err(AdminError::EpochExhausted);
            }
            return Ok(candidate);
        }
        if !epoch_available(current_epoch) {
            return Err(AdminError::EpochExhausted);
        }
        self.manual_choice(now)
    }
}
