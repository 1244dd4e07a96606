//! The failover itself: where it starts, and its steps up to a confirmed
//! promotion.
//!
//! - **Where a failover starts**: [`Group::start_failover`], and nowhere
//!   else, with its [`Trigger`]: [`Group::step`] for an objectively down
//!   master (`Odown`) or a master that lost its data and could not be
//!   replaced yet (`LostData`), the empty-restart guard
//!   ([`guard`](super::guard), `LostData`), and `SENTINEL FAILOVER`
//!   (`Manual`).
//! - **Begin**: a replica is chosen ([`select`]), the epoch is
//!   incremented, and the state is persisted *before* `REPLICAOF NO ONE`
//!   is sent. Within an epoch the chosen replica never changes. Choice
//!   waits for a complete picture: every instance not known to be down
//!   must have reported once (right after a daemon restart they have not).
//! - **Confirm**: the chosen replica's own INFO must report the master
//!   role with an offset at least the one it had when chosen (one that
//!   resynced from an empty master in between is refused, distrusted and
//!   another is chosen). The new master is persisted, then advertised
//!   (`+switch-master`), its clients are killed so they reconnect, and the
//!   reconfiguration of the other replicas starts.
//! - **Manual failover** (`SENTINEL FAILOVER`): with the master up, a
//!   planned switchover ([`switchover`](super::switchover): writes paused,
//!   the replica caught up, promoted, the old master demoted, then
//!   unpaused); with the master down, a forced failover as above.
//! - **Deadlines**: every phase has one, `failover-timeout` capped at
//!   [`MAX_FAILOVER_WAIT`]; a promotion whose chosen replica goes SDOWN is
//!   abandoned too, and the next attempt uses a new epoch.
//! - **Resume**: a failover in flight when the daemon stopped resumes with
//!   the same epoch and the same replica — never a second promotion — and
//!   is abandoned if the promotion turns out not to have happened.
//! - **The epoch guard**: every failover needs an epoch of its own, so
//!   none starts with the epoch at `u64::MAX`; epochs never go back.
//!
//! The rules that hold a start back (the back-off window, the picture,
//! the epoch guard, `SENTINEL FAILOVER`'s checks) are in
//! [`holds`](super::holds), where the readiness verdict calls them too.

use super::refusal::{Abort, Outcome, op_of};
use super::{Failover, FailoverPhase, Group, Instance};
use crate::Channel;
use crate::events;
use crate::readiness::Reason;
use crate::select;
use crate::{
    Addr, AdminError, Command, CrashPoint, FailoverResult, InfoReport, Millis, Output, ReconfRole,
    Role, Step,
};

/// How often the promoted replica's INFO is asked while its promotion is
/// awaited.
pub const PROMOTION_POLL: Millis = 100;

/// The longest any failover phase waits, and the longest `FAILOVER …
/// TIMEOUT` sent to Valkey, whatever `failover-timeout` says: every
/// failover has a deadline of its own (an operator may set the timeout to
/// `i64::MAX`, and Valkey overflows on such a `FAILOVER` timeout).
pub const MAX_FAILOVER_WAIT: Millis = 3_600_000;

/// What starts a failover ([`Group::start_failover`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The master is objectively down: SDOWN, and not vetoed by the
    /// witnesses ([`detect`](super::detect)).
    Odown,
    /// The advertised master lost its data ([`guard`](super::guard));
    /// `replid` is its new, empty history: replicas that share it are
    /// excluded, and a stray master that kept the data may be promoted.
    LostData {
        /// The replication id of the empty history.
        replid: String,
    },
    /// `SENTINEL FAILOVER`: a coordinated switchover through Valkey's
    /// `FAILOVER` when the master is up, a forced failover otherwise.
    Manual,
}

impl Group {
    pub(crate) fn resume(&mut self, cx: &mut Step<'_>) {
        let Some(f) = &self.failover else {
            return;
        };
        let (promoted, epoch) = (f.promoted.clone(), f.epoch);
        self.log(
            cx.out,
            format!("resuming failover epoch {epoch} towards {promoted} after a restart"),
        );
        if f.phase == FailoverPhase::Reconfiguring {
            self.start_reconfiguration();
        } else {
            // The promotion may or may not have happened before we stopped:
            // ask, and abandon the failover if it did not.
            self.send(cx, &promoted, Command::AskInfo);
            if let Some(f) = &mut self.failover {
                f.promotion_asked = cx.now;
            }
        }
    }

    /// Advances timers and the failover.
    pub(crate) fn step(&mut self, cx: &mut Step<'_>) {
        self.forget_hold();
        if self.peer_mode() {
            self.step_peered(cx);
            return;
        }
        let tilt = cx.daemon.tilt;
        if self.failover.is_some() {
            self.step_failover(cx);
            return;
        }
        if self.paused {
            // Detection goes on (`+sdown`, `+odown`); nothing starts.
            if self.judge_down(cx) {
                self.report_hold(cx, Outcome::Held, Reason::Paused);
            }
            return;
        }
        if let Some(replid) = self.master_lost.clone()
            && self.window(cx.now).is_none()
        {
            // The advertised master lost its data and an earlier attempt to
            // replace it failed: try again, whatever TILT says
            // (the master answers; only its data is gone).
            // Automatic: nobody to answer (see `start_failover`).
            let _ = self.start_failover(cx, Trigger::LostData { replid });
            return;
        }
        if !self.judge_down(cx) {
            return;
        }
        if tilt {
            let why = cx.daemon.tilt_reason(cx.now);
            self.report_hold(cx, Outcome::Held, why);
            return;
        }
        if let Some(until) = self.window(cx.now) {
            self.report_hold(cx, Outcome::Held, Reason::Window { until });
            return;
        }
        // Automatic: nobody to answer (see `start_failover`).
        let _ = self.start_failover(cx, Trigger::Odown);
    }

    /// Where a failover starts: the one entry point of every [`Trigger`].
    ///
    /// An automatic trigger ([`Trigger::Odown`], [`Trigger::LostData`])
    /// never returns an error: it starts the failover, or says in events
    /// and logs why it could not (no good replica, the epoch exhausted),
    /// and [`Group::step`] tries again. A manual one answers the operator
    /// with Sentinel's error.
    pub(crate) fn start_failover(
        &mut self,
        cx: &mut Step<'_>,
        trigger: Trigger,
    ) -> Result<(), AdminError> {
        if self.failover.is_some() {
            return Err(AdminError::InProgress);
        }
        if self.paused && trigger != Trigger::Manual {
            // The empty-restart guard starts here from a report, not
            // from the step: the pause holds it back too (the manual
            // trigger answers the operator, `manual_check`).
            self.report_hold(cx, Outcome::Held, Reason::Paused);
            return Ok(());
        }
        if self.peer_mode() {
            // Every promotion goes through an election once a peer was
            // known ([`peering::election`](crate::peering::election)).
            if trigger == Trigger::Manual {
                return self.elect_for_manual(cx);
            }
            // The back-off holds automatic candidacies back (after our
            // last one, or a vote for someone else).
            if self.election.is_none() && self.window(cx.now).is_none() {
                self.start_election(cx, trigger);
            }
            return Ok(());
        }
        let exclude_replid = match &trigger {
            Trigger::Manual => return self.start_manual_in(cx, None),
            Trigger::Odown => None,
            Trigger::LostData { replid } => Some(replid.as_str()),
        };
        self.start_automatic_in(cx, exclude_replid, None);
        Ok(())
    }

    /// Picks a replica, takes the epoch (`elected`, or a new one when we
    /// are the only authority), persists, sends `REPLICAOF NO ONE`.
    /// `exclude_replid` keeps out replicas that already resynced from a
    /// master that lost its data. Returns whether the failover started.
    pub(crate) fn start_automatic_in(
        &mut self,
        cx: &mut Step<'_>,
        exclude_replid: Option<&str>,
        elected: Option<u64>,
    ) -> bool {
        let missing = self.missing_reports();
        if !missing.is_empty() {
            self.report_hold(cx, Outcome::Held, Reason::AwaitingReports { missing });
            return false;
        }
        if elected.is_none() && self.epoch_exhausted(cx) {
            self.report_hold(cx, Outcome::Held, Reason::EpochExhausted);
            return false;
        }
        let Some(candidate) = self.candidate(cx.now, exclude_replid) else {
            if self
                .no_good_at
                .is_none_or(|t| cx.now.saturating_sub(t) >= self.spec.failover_timeout)
            {
                self.no_good_at = Some(cx.now);
                // Before the abort event: the status history files it in
                // the attempt that event closes.
                self.report_hold_again(cx, Outcome::Held, Reason::NoEligibleReplica);
                cx.out.event(
                    Channel::FailoverAbortNoGoodSlave,
                    events::master(&self.spec.name, &self.master),
                );
            }
            return false;
        };
        self.begin(cx, candidate.clone(), FailoverPhase::SendNoOne, elected);
        self.fence_before_promotion(cx, &candidate);
        self.promote(cx, &candidate);
        true
    }

    pub(crate) fn candidate(&self, now: Millis, exclude_replid: Option<&str>) -> Option<Addr> {
        // When the master lost its data, replicas that share its new (empty)
        // history are out, and a stray master that kept the data is as good
        // a candidate as a replica (promoting it again is a no-op).
        select::choose_with(self, now, exclude_replid)
    }

    pub(super) fn begin(
        &mut self,
        cx: &mut Step<'_>,
        candidate: Addr,
        phase: FailoverPhase,
        elected: Option<u64>,
    ) {
        self.epoch = elected.unwrap_or_else(|| cx.daemon.next_epoch());
        self.no_good_at = None;
        // An attempt started: what holds the next one is news again.
        self.reported_hold.0 = None;
        self.fence_at_failover = self.fence_setting();
        let min_offset = self
            .instances
            .get(&candidate)
            .and_then(|i| i.info.as_ref())
            .map_or(0, |i| i.offset);
        self.failover = Some(Failover {
            epoch: self.epoch,
            old_master: self.master.clone(),
            promoted: candidate.clone(),
            phase,
            started: cx.now,
            resumed: false,
            promotion_asked: cx.now,
            min_offset,
            paused_offset: 0,
            paused_until: None,
            align_offset: 0,
            align_seen: None,
            align_idle: None,
            demoted_first: false,
            timeline: super::Timeline::default(),
        });
        // Durable before acting on it.
        self.persist(cx.out);
        cx.out.push(Output::FailoverStarted {
            group: self.spec.name.clone(),
            epoch: self.epoch,
        });
        if elected.is_none() {
            // The only authority: the election is ours at once.
            let m = events::master(&self.spec.name, &self.master);
            cx.out.event(Channel::NewEpoch, self.epoch.to_string());
            cx.out.event(Channel::TryFailover, m.clone());
            cx.out.event(
                Channel::VoteForLeader,
                format!("{} {}", cx.daemon.myid, self.epoch),
            );
            cx.out.event(Channel::ElectedLeader, m.clone());
            cx.daemon.crash_if_asked(CrashPoint::AfterElection, cx.out);
            cx.out.event(Channel::FailoverStateSelectSlave, m);
        }
        cx.out
            .event(Channel::SelectedSlave, self.payload_of(&candidate));
        if phase == FailoverPhase::SendNoOne {
            cx.out.event(
                Channel::FailoverStateSendSlaveofNoone,
                self.payload_of(&candidate),
            );
        }
    }

    /// `SENTINEL FAILOVER`: a coordinated switchover through Valkey's
    /// `FAILOVER` when the master is up, a forced failover when it is down.
    /// Alone, every check of [`Group::manual_check`]; `elected` in an
    /// election's epoch, only the choice ([`Group::manual_choice`]).
    pub(crate) fn start_manual_in(
        &mut self,
        cx: &mut Step<'_>,
        elected: Option<u64>,
    ) -> Result<(), AdminError> {
        let checked = match elected {
            None => self.manual_check(cx.now, cx.daemon.current_epoch),
            Some(_) => self.manual_choice(cx.now),
        };
        if checked == Err(AdminError::EpochExhausted) {
            // Logged, at most once per failover timeout.
            self.epoch_exhausted(cx);
        }
        let candidate = checked?;
        if !self.master_reachable() {
            // Nobody to coordinate with: a forced failover.
            self.begin(cx, candidate.clone(), FailoverPhase::SendNoOne, elected);
            self.fence_before_promotion(cx, &candidate);
            self.promote(cx, &candidate);
            return Ok(());
        }
        self.start_switchover(cx, candidate, elected);
        Ok(())
    }

    pub(crate) fn step_failover(&mut self, cx: &mut Step<'_>) {
        let Some(f) = self.failover.clone() else {
            return;
        };
        match f.phase {
            FailoverPhase::Routing
            | FailoverPhase::Aligning
            | FailoverPhase::Pausing
            | FailoverPhase::CatchingUp
            | FailoverPhase::Demoting => {
                self.step_switchover(cx, &f);
            }
            FailoverPhase::SendNoOne | FailoverPhase::WaitPromotion => {
                // Past the deadline, or the chosen replica died on the
                // way: nothing will confirm this promotion any more.
                let candidate_down = self.instances.get(&f.promoted).is_some_and(|i| i.sdown);
                let timed_out = cx.now.saturating_sub(f.started) > self.failover_deadline();
                if timed_out || candidate_down {
                    let why = if timed_out {
                        Abort::PromotionTimeout
                    } else {
                        Abort::CandidateDown
                    };
                    // Before the abort event, which closes the attempt in
                    // the status history.
                    self.report_abort(cx, op_of(&f), f.epoch, why);
                    cx.out.event(
                        Channel::FailoverAbortSlaveTimeout,
                        self.payload_of(&f.promoted),
                    );
                    self.failover = None;
                    self.retry_at = cx.now.saturating_add(self.failover_deadline());
                    self.persist(cx.out);
                    // A switchover demoted its old master first: it is
                    // the master again.
                    if f.demoted_first {
                        self.restore_old_master(cx, &f);
                    }
                    self.failover_ended(cx, &f);
                    return;
                }
                if f.phase == FailoverPhase::WaitPromotion
                    && cx.now.saturating_sub(f.promotion_asked) >= PROMOTION_POLL
                {
                    if let Some(x) = &mut self.failover {
                        x.promotion_asked = cx.now;
                    }
                    self.send(cx, &f.promoted, Command::AskInfo);
                }
            }
            FailoverPhase::Reconfiguring => self.step_reconf(cx, &f),
        }
    }

    /// Says that failover `f`, just taken out of the group, ended: the
    /// one place that decides how (the configuration reached its epoch or
    /// not).
    pub(crate) fn failover_ended(&self, cx: &mut Step<'_>, f: &Failover) {
        let result = if self.config_epoch >= f.epoch {
            FailoverResult::Succeeded
        } else {
            FailoverResult::Aborted
        };
        cx.out.push(Output::FailoverEnded {
            group: self.spec.name.clone(),
            epoch: f.epoch,
            result,
            duration: cx.now.saturating_sub(f.started),
        });
        // A switchover given up may have moved the route to its chosen
        // replica: back to the master, which stayed.
        if result == FailoverResult::Aborted && self.spec.route_wait > 0 {
            cx.out.push(Output::Route {
                group: self.spec.name.clone(),
                to: self.master.clone(),
                confirm: false,
            });
        }
    }

    /// `failover-timeout`, capped at [`MAX_FAILOVER_WAIT`].
    pub(crate) fn failover_deadline(&self) -> Millis {
        self.spec.failover_timeout.min(MAX_FAILOVER_WAIT)
    }

    /// The promoted replica's INFO, while its promotion is awaited:
    /// confirms the promotion, or abandons the epoch. Returns whether the
    /// report is settled here (the replica reports itself master).
    pub(super) fn promotion_report(
        &mut self,
        cx: &mut Step<'_>,
        addr: &Addr,
        info: &InfoReport,
        fork: Option<u64>,
    ) -> bool {
        if let Some(f) = &self.failover
            && f.promoted == *addr
            && f.phase != FailoverPhase::Reconfiguring
        {
            let (min_offset, resumed, phase) = (f.min_offset, f.resumed, f.phase);
            match info.role {
                Role::Master if info.offset >= min_offset => {
                    self.confirm(cx, fork.unwrap_or(min_offset).max(min_offset));
                }
                Role::Master => {
                    // It resynced from somewhere (an empty restarted
                    // master) between being chosen and being promoted:
                    // its data is gone. Never advertise it; choose again,
                    // and do not trust it until it has resynced.
                    if let Some(i) = self.instances.get_mut(addr) {
                        i.demoted = true;
                    }
                    self.log(
                        cx.out,
                        format!(
                            "{addr} lost its data before its promotion (offset {} < {min_offset}); \
                             abandoning epoch {}",
                            info.offset, self.epoch
                        ),
                    );
                    let ended = self.failover.take();
                    self.retry_at = cx.now;
                    self.persist(cx.out);
                    if let Some(f) = ended {
                        self.report_abort(cx, op_of(&f), f.epoch, Abort::CandidateLostData);
                        self.failover_ended(cx, &f);
                    }
                }
                Role::Replica { .. } if resumed && phase == FailoverPhase::WaitPromotion => {
                    // The promotion never happened before the daemon
                    // restarted: give this epoch up; a new one starts if
                    // the master is still down.
                    self.log(
                        cx.out,
                        format!("abandoning the interrupted failover: {addr} was never promoted"),
                    );
                    let ended = self.failover.take();
                    self.persist(cx.out);
                    if let Some(f) = ended {
                        self.report_abort(cx, op_of(&f), f.epoch, Abort::NeverPromoted);
                        self.failover_ended(cx, &f);
                    }
                }
                Role::Replica { .. } => {}
            }
            if matches!(info.role, Role::Master) {
                return true;
            }
        }
        false
    }

    /// The chosen replica reports itself master: persist, advertise,
    /// reconfigure.
    pub(super) fn confirm(&mut self, cx: &mut Step<'_>, fork: u64) {
        // While the old master is still the advertised one.
        self.record_at_risk(fork);
        let Some(f) = &mut self.failover else {
            return;
        };
        f.phase = FailoverPhase::Reconfiguring;
        f.started = cx.now;
        let epoch = f.epoch;
        let old = f.old_master.clone();
        let new = f.promoted.clone();
        self.raise_config_epoch(cx.daemon, epoch);
        // The back-off of the failure this resolves no longer holds.
        self.retry_at = 0;
        self.quick_retries = 0;
        self.master_lost = None;
        // Promotion event in terms of the old topology.
        cx.out.event(Channel::PromotedSlave, self.payload_of(&new));
        self.master = new.clone();
        self.forget_answers();
        self.instances
            .entry(new.clone())
            .or_insert_with(|| Instance::new(new.clone(), cx.now))
            .demoted = false;
        if let Some(o) = self.instances.get_mut(&old) {
            o.demoted = true;
            o.fix_sent_at = None;
        }
        self.decided_down = false;
        // Durable before anyone is told.
        self.persist(cx.out);
        cx.daemon.crash_if_asked(CrashPoint::AfterPromotion, cx.out);
        cx.out.event(
            Channel::FailoverStateReconfSlaves,
            events::master(&self.spec.name, &old),
        );
        // Sentinel calls the leader's script right here.
        cx.out.push(Output::ClientReconfig {
            group: self.spec.name.clone(),
            role: ReconfRole::Leader,
            from: old.clone(),
            to: new.clone(),
        });
        cx.out.event(
            Channel::SwitchMaster,
            events::switch_master(&self.spec.name, &old, &new),
        );
        self.log_at_risk(cx);
        cx.out.push(Output::Topology {
            group: self.spec.name.clone(),
        });
        // Peers hear of the new configuration at once, not at the next
        // hello period.
        cx.out.push(Output::HelloNow {
            group: self.spec.name.clone(),
        });
        self.start_reconfiguration();
        if self
            .failover
            .as_ref()
            .is_some_and(|f| f.paused_until.is_some())
        {
            // A planned switchover: the paused old master is demoted now,
            // and unpaused once it acknowledged.
            self.demote_paused(cx, &old);
        } else if self
            .instances
            .get(&old)
            .is_some_and(|o| !o.sdown && o.failure.is_none() && o.reports_master())
        {
            // The old master, if it answers, is demoted right away.
            self.demote(cx, &old);
        }
    }
}
