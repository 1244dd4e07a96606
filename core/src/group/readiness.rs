//! The readiness verdict: if the master failed now, which replica would be
//! promoted, and what would hold the failover back
//! ([`Core::readiness`](crate::Core::readiness)).
//!
//! It is pure (no output, no state change) and built only from the
//! predicates the failover path itself calls: the replica choice
//! ([`select::assess`], [`select::best`]), the witnesses' verdict, the
//! back-off window, the picture and the epoch guard (`holds`), TILT, and
//! in peer mode the quorum, the pending configuration and the election's
//! reach. The holds are listed in the order the step meets them; the
//! first one is the primary reason.
//!
//! It is hypothetical in one respect only: "the master is up" holds
//! nothing here. The witnesses are judged only once the master is SDOWN
//! or its link fails as unreachable: a master that answers is vouched for
//! by its replicas, and a failure would not be. Peers' own TILT or vetoes
//! cannot be seen from here. The words ([`Reason::label`],
//! [`Reason::describe`]) are in `words`.

mod words;

use super::detect::{VetoCause, WitnessVerdict};
use super::write_fence::FenceMode;
use super::{Group, Instance, Trigger};
use crate::peering::epoch_available;
use crate::select::{self, Skip};
use crate::{Addr, AdminError, Daemon, Millis, Role};

/// What would hold a failover back now. Bounded: [`Reason::label`] is a
/// metric label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A failover (or switchover) is running.
    FailoverRunning {
        /// Its epoch.
        epoch: u64,
        /// The replica it promotes.
        promoted: Addr,
    },
    /// An election of ours is running.
    ElectionRunning {
        /// Its epoch.
        epoch: u64,
    },
    /// An operator paused the group (`VALKYRIE PAUSE`).
    Paused,
    /// The back-off after an aborted attempt, a candidacy, a vote for
    /// another sentinel or a split vote.
    Window {
        /// When it ends.
        until: Millis,
    },
    /// A peer's newer configuration, not adopted yet, holds our candidacy.
    PendingConfig {
        /// The master it names.
        master: Addr,
        /// Its config epoch.
        config_epoch: u64,
        /// When the hold ends at the latest.
        until: Millis,
    },
    /// The witnesses have not all reported since the master went silent.
    WitnessWait {
        /// When the wait ends at the latest.
        until: Millis,
    },
    /// The witnesses veto the failover.
    WitnessVeto(VetoCause),
    /// TILT: more than half of the masters are unreachable at once, or
    /// the daemon stalled (`tilt-trigger`).
    Tilt {
        /// When TILT was entered.
        since: Millis,
        /// A stall's TILT holds until then (`None`: only the mass
        /// failure holds it).
        until: Option<Millis>,
    },
    /// Peer mode: fewer sentinels are reachable than the quorum needs to
    /// agree that the master is down.
    QuorumUnreachable {
        /// Sentinels not SDOWN, ourselves included.
        usable: usize,
        /// The configured quorum.
        quorum: usize,
    },
    /// Peer mode: no election can be won (more votes needed than
    /// sentinels reachable, or known).
    ElectionUnwinnable {
        /// Sentinels not SDOWN, ourselves included.
        usable: usize,
        /// Votes needed ([`Group::vote_threshold`]).
        needed: usize,
        /// Sentinels known, ourselves included.
        known: usize,
    },
    /// The failover epoch is at its maximum.
    EpochExhausted,
    /// Replicas that have not reported since Valkyrie started.
    AwaitingReports {
        /// Their addresses.
        missing: Vec<Addr>,
    },
    /// No replica may be promoted ([`Readiness::replicas`] says why).
    NoEligibleReplica,
    /// The state file cannot be written: the shell holds every decision
    /// back (set by the shell, never by the core).
    StateUnwritable,
}

/// The replica a failover would promote now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its address.
    pub addr: Addr,
    /// Its `replica-priority`.
    pub priority: u32,
    /// Its replication offset, as last reported.
    pub offset: u64,
    /// How far it is behind the master, in bytes, from both last reports
    /// (sampled at different times: approximate). `None` when the master's
    /// last report is not a master's, or the master lost its data (its
    /// offset counts another history).
    pub lag_bytes: Option<u64>,
}

/// One replica in the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaVerdict {
    /// Its address.
    pub addr: Addr,
    /// Its `replica-priority`, once reported.
    pub priority: Option<u32>,
    /// Its replication offset, once reported.
    pub offset: Option<u64>,
    /// Why it would not be promoted; `None`: it may be.
    pub skip: Option<Skip>,
}

/// Peer mode: the sentinels a failover needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuorumView {
    /// Sentinels not SDOWN, ourselves included (`SENTINEL CKQUORUM`'s).
    pub usable: usize,
    /// The configured quorum.
    pub quorum: usize,
    /// Votes an election needs.
    pub needed: usize,
    /// Sentinels known, ourselves included.
    pub known: usize,
}

/// The write fence on the advertised master, as the verdict shows it. It
/// holds a failover back only through the witnesses
/// ([`VetoCause::FenceHolds`]); a relaxed or refused fence is a risk, not
/// a hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceView {
    /// The mode is off.
    Off,
    /// No setting requiring a replica is acknowledged by the master's
    /// current process: sent and not answered yet, or none required.
    NotInForce,
    /// The master answered the fence with an error (an ACL, a renamed
    /// `CONFIG`).
    Refused,
    /// In force.
    InForce {
        /// `min-replicas-to-write`.
        replicas: u64,
    },
    /// Auto: in force, but fewer replicas are required than a majority of
    /// the known ones (some left): the master acknowledges writes that a
    /// minority of the group holds.
    Relaxed {
        /// `min-replicas-to-write` in force.
        in_force: u64,
        /// A majority of the known replicas.
        full: u64,
    },
}

/// The verdict on one group at one time
/// ([`Core::readiness`](crate::Core::readiness)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// Nothing holds a failover back: `holds` is empty.
    pub ready: bool,
    /// What would hold it back, in the order the step meets them; the
    /// first is the primary reason.
    pub holds: Vec<Reason>,
    /// What would start it: ODOWN, or the master's lost data.
    pub trigger: Trigger,
    /// The replica it would promote, even while held.
    pub candidate: Option<Candidate>,
    /// Every replica, in the order of choice (those that may be promoted
    /// first), with why it may not be.
    pub replicas: Vec<ReplicaVerdict>,
    /// Peer mode: the sentinels a failover needs.
    pub quorum: Option<QuorumView>,
    /// The write fence.
    pub fence: FenceView,
    /// The witnesses' verdict, when judged (see the module docs).
    pub witnesses: Option<WitnessVerdict>,
    /// What `SENTINEL FAILOVER` would do now: the replica it would
    /// promote, or the error it would answer.
    pub manual: Result<Addr, AdminError>,
}

impl Group {
    /// The verdict at `now` (see the module docs): pure.
    pub(crate) fn readiness(
        &self,
        now: Millis,
        daemon: &Daemon,
        tilt_since: Option<Millis>,
    ) -> Readiness {
        let lost = self.master_lost.as_deref();
        let mut assessed = select::assess(self, now, lost);
        let candidate = select::best(&assessed).and_then(|i| self.candidate_view(i));
        let witnesses = lost.is_none().then(|| self.witness_preview(now)).flatten();
        let holds = self.holds(now, daemon, tilt_since, witnesses, candidate.is_some());
        assessed.sort_by(|(a, av), (b, bv)| match (av.is_ok(), bv.is_ok()) {
            (true, true) => select::rank(a, b),
            (x, y) => y.cmp(&x),
        });
        Readiness {
            ready: holds.is_empty(),
            holds,
            trigger: match lost {
                Some(replid) => Trigger::LostData {
                    replid: replid.to_string(),
                },
                None => Trigger::Odown,
            },
            candidate,
            replicas: assessed
                .into_iter()
                .map(|(i, verdict)| ReplicaVerdict {
                    addr: i.addr.clone(),
                    priority: i.info.as_ref().map(|x| x.priority),
                    offset: i.info.as_ref().map(|x| x.offset),
                    skip: verdict.err(),
                })
                .collect(),
            quorum: self.peer_mode().then(|| self.quorum_view()),
            fence: self.fence_view(),
            witnesses,
            manual: self.manual_check(now, daemon.current_epoch),
        }
    }

    /// The holds, in the order [`Group::step`] (alone) or
    /// `step_peered` (peer mode) meets them.
    fn holds(
        &self,
        now: Millis,
        daemon: &Daemon,
        tilt_since: Option<Millis>,
        witnesses: Option<WitnessVerdict>,
        has_candidate: bool,
    ) -> Vec<Reason> {
        let peer = self.peer_mode();
        let mut holds = Vec::new();
        if let Some(f) = &self.failover {
            holds.push(Reason::FailoverRunning {
                epoch: f.epoch,
                promoted: f.promoted.clone(),
            });
        }
        if let Some(e) = &self.election {
            holds.push(Reason::ElectionRunning { epoch: e.epoch });
        }
        if self.paused {
            holds.push(Reason::Paused);
        }
        // Peer mode tests the window and a pending configuration before
        // anything else; alone, after the witnesses and TILT.
        if peer {
            holds.extend(self.window(now).map(|until| Reason::Window { until }));
            holds.extend(self.pending_hold(now, daemon.timers.stale_window()));
        }
        // A master that lost its data answers: neither the witnesses,
        // nor the quorum, nor TILT hold its replacement back.
        if self.master_lost.is_none() {
            match witnesses {
                Some(WitnessVerdict::Wait { until }) => holds.push(Reason::WitnessWait { until }),
                Some(WitnessVerdict::Veto(cause)) => holds.push(Reason::WitnessVeto(cause)),
                Some(WitnessVerdict::Go) | None => {}
            }
            // Peers would say "down" once they see it too; only those
            // that can still answer count.
            let (usable, _) = self.quorum_counts();
            if peer && !self.quorum_reached(usable) {
                holds.push(Reason::QuorumUnreachable {
                    usable,
                    quorum: self.quorum(),
                });
            }
            if daemon.tilt {
                holds.push(Reason::Tilt {
                    since: tilt_since.unwrap_or(now),
                    until: daemon.stalled_until.filter(|until| now < *until),
                });
            }
        }
        if !peer {
            holds.extend(self.window(now).map(|until| Reason::Window { until }));
        }
        // The candidacy: an epoch, and an election that can be won.
        if peer {
            if !epoch_available(daemon.current_epoch) {
                holds.push(Reason::EpochExhausted);
            }
            let q = self.quorum_view();
            if self.election_unwinnable() || q.usable < q.needed {
                holds.push(Reason::ElectionUnwinnable {
                    usable: q.usable,
                    needed: q.needed,
                    known: q.known,
                });
            }
        }
        // The failover's own start: the picture, the epoch, a replica.
        let missing = self.missing_reports();
        if !missing.is_empty() {
            holds.push(Reason::AwaitingReports { missing });
        }
        if !peer && !epoch_available(daemon.current_epoch) {
            holds.push(Reason::EpochExhausted);
        }
        if !has_candidate {
            holds.push(Reason::NoEligibleReplica);
        }
        holds
    }

    fn candidate_view(&self, inst: &Instance) -> Option<Candidate> {
        let info = inst.info.as_ref()?;
        let master_offset = self
            .master_instance()
            .and_then(|m| m.info.as_ref())
            .filter(|m| m.role == Role::Master && self.master_lost.is_none())
            .map(|m| m.offset);
        Some(Candidate {
            addr: inst.addr.clone(),
            priority: info.priority,
            offset: info.offset,
            lag_bytes: master_offset.map(|m| m.saturating_sub(info.offset)),
        })
    }

    pub(crate) fn quorum_view(&self) -> QuorumView {
        let (usable, known) = self.quorum_counts();
        QuorumView {
            usable,
            quorum: self.quorum(),
            needed: self.vote_threshold(),
            known,
        }
    }

    /// The write fence as the verdict shows it, from the governor's own
    /// predicates ([`write_fence`](super::write_fence)).
    pub fn fence_view(&self) -> FenceView {
        if self.spec.fence.mode == FenceMode::Off {
            return FenceView::Off;
        }
        if self
            .fence
            .as_ref()
            .is_some_and(|f| f.addr == self.master && f.refused)
        {
            return FenceView::Refused;
        }
        let full = self.fence_for_replica().map_or(0, |s| s.replicas);
        match self.fence_setting() {
            Some(s) if self.spec.fence.mode == FenceMode::Auto && s.replicas < full => {
                FenceView::Relaxed {
                    in_force: s.replicas,
                    full,
                }
            }
            Some(s) => FenceView::InForce {
                replicas: s.replicas,
            },
            None => FenceView::NotInForce,
        }
    }
}
