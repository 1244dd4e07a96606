//! The planned switchover: `SENTINEL FAILOVER` while the master is up.
//!
//! Valkyrie runs it itself rather than through Valkey's `FAILOVER TO`
//! command. Valkey 8 hands over only once the target's periodic
//! replication acknowledgement (sent once a second) shows it caught up:
//! writes stalled about a second at every switchover (983 ms measured,
//! `benches/switchover.rs`). The steps here take milliseconds:
//!
//! 0. **Aligning**, writes going on: the master's `INFO`, then the chosen
//!    replica's, until the replica holds what the master had just before
//!    (at most [`ALIGN_MAX`] or [`ALIGN_ROUNDS`]). A replica a few
//!    kilobytes behind at the pause otherwise caught up inside the write
//!    stall, in 54–331 ms (`benches/plan.rs`, 30 groups under writes). A
//!    replica that stood still between two answers is asked again only
//!    [`ALIGN_PACE`] later: fresh from a diskless full sync, it gets no
//!    stream until its first `REPLCONF ACK`, up to a second away.
//! 0. Before it, **Routing**, for a group with a route (a managed group's
//!    `-master` Service): the route is moved to the chosen replica and
//!    its answer awaited, writes going on (`src/runtime/route.rs`).
//! 1. **Pausing**: `CLIENT PAUSE <ms> WRITE` to the master, then its
//!    `INFO`. Commands on one link run in order, so that INFO shows the
//!    offset the master stopped at: every write it acknowledged is below
//!    it.
//! 2. **CatchingUp**: the chosen replica's `INFO`, asked again at each
//!    answer, until its offset reaches the paused master's. It then holds
//!    every acknowledged write.
//! 3. **Demoting**, before the promotion: the old master, still paused,
//!    is told `REPLICAOF <chosen>` and its acknowledgement awaited. A
//!    replica answers writes `-READONLY`, which Sentinel clients take as
//!    a moved master. Promoted first, the chosen replica's departure left
//!    the old master one good replica short of its write fence until its
//!    demotion, and Valkey checks `min-replicas-to-write` before it holds
//!    a write for a pause: writes arriving then were refused
//!    `-NOREPLICAS`, an error clients take as their own
//!    (`docs/plans/demote-first.md`). For a moment there is no master at
//!    all, never two.
//! 4. `REPLICAOF NO ONE` to the chosen replica and the promotion confirmed
//!    from its own INFO, as in every failover
//!    ([`failover`](super::failover)): the new master is persisted, then
//!    advertised.
//! 5. The old master is told `REPLICAOF <new>` again (it already follows
//!    it: `+OK`) and its clients are killed; once it acknowledged, `CLIENT
//!    UNPAUSE`. Writes that waited in the pause are refused (`-READONLY`)
//!    or their connection is gone: clients ask again and find the new
//!    master.
//!
//! No hello is published to the paused master (a `PUBLISH` waits out the
//! pause, and the link's later commands with it).
//!
//! **If anything goes wrong.** The pause ends by itself after
//! [`PAUSE_MAX`] (or `failover-timeout`, if shorter), so a daemon that
//! dies half way leaves the master taking writes again. The catch-up gives
//! up at half the pause (or when the master or the replica goes down):
//! the master is unpaused and stays the master, so a promotion never races
//! the pause's own end. A master that answers `CLIENT PAUSE` with an error
//! (an ACL, a renamed command) aborts the switchover and nothing changes.
//! A master that refuses its demotion (an ACL without `+replicaof`)
//! aborts it before anything was promoted. A switchover given up while
//! the demotion is on its way, or whose promotion does not come after it,
//! makes the old master master again (`REPLICAOF NO ONE`: it holds every
//! acknowledged write) before unpausing it. The old master is unpaused
//! only after it acknowledged `REPLICAOF <new>`.

use super::refusal::{Abort, Op, SwitchoverAbort};
use super::{Failover, FailoverPhase, Group};
use crate::{Addr, Channel, Command, InfoReport, Millis, Output, Role, Step};

/// The longest the master's writes are paused.
pub const PAUSE_MAX: Millis = 10_000;

/// The longest a switchover waits, writes going on, for the chosen replica
/// to be level with the master before pausing them; past it they are
/// paused anyway and the catch-up runs in the pause.
pub const ALIGN_MAX: Millis = 2_000;

/// The most INFO rounds of that wait (a replica that stays behind on a
/// fast link is not asked without end).
pub const ALIGN_ROUNDS: u32 = 200;

/// How long that wait leaves a replica that stood still between two
/// answers before it asks again (at the group's next input or tick).
pub const ALIGN_PACE: Millis = 10;

impl Group {
    /// The old master of a switchover while its writes are paused: nothing
    /// that a pause holds (a hello's `PUBLISH`) may be sent to it, or the
    /// commands behind it on its link would wait for the pause's end.
    pub fn paused_master(&self) -> Option<&Addr> {
        self.failover
            .as_ref()
            .filter(|f| f.paused_until.is_some())
            .map(|f| &f.old_master)
    }

    /// Whether a switchover has demoted (or is demoting) the old master
    /// and the new one is not confirmed yet: for these milliseconds no
    /// node takes writes, and the master this group names answers them
    /// `-READONLY`. The Sentinel port holds a question for the master's
    /// address until it ends, so that a client just refused is not sent
    /// back to the node that refused it.
    pub fn masterless(&self) -> bool {
        self.failover.as_ref().is_some_and(|f| {
            f.demoted_first
                && matches!(
                    f.phase,
                    FailoverPhase::Demoting
                        | FailoverPhase::SendNoOne
                        | FailoverPhase::WaitPromotion
                )
        })
    }

    /// Starts a planned switchover to `candidate` (the master is up): writes
    /// go on while the group's route moves to it ([`FailoverPhase::Routing`],
    /// when it has one) and it is brought level
    /// ([`FailoverPhase::Aligning`]).
    pub(super) fn start_switchover(
        &mut self,
        cx: &mut Step<'_>,
        candidate: Addr,
        elected: Option<u64>,
    ) {
        let routing = self.spec.route_wait > 0;
        let phase = if routing {
            FailoverPhase::Routing
        } else {
            FailoverPhase::Aligning
        };
        self.begin(cx, candidate.clone(), phase, elected);
        if let Some(f) = &mut self.failover {
            f.timeline.begun = cx.now;
        }
        if routing {
            cx.out.push(Output::Route {
                group: self.spec.name.clone(),
                to: candidate,
                confirm: true,
            });
        } else {
            self.start_aligning(cx);
        }
    }

    /// The route reached `to` ([`Input::Routed`](crate::Input::Routed)):
    /// the switchover routing to it brings it level next. Any other
    /// answer (a route given up, an older switchover's) is ignored.
    pub(crate) fn routed(&mut self, cx: &mut Step<'_>, to: &Addr) {
        if self
            .failover
            .as_ref()
            .is_some_and(|f| f.phase == FailoverPhase::Routing && f.promoted == *to)
        {
            self.start_aligning(cx);
        }
    }

    /// How long a switchover waits for its route: the group's
    /// `route_wait`, at most a quarter of the pause (the alignment and
    /// the catch-up have the rest of the switchover's budget).
    fn route_wait(&self) -> Millis {
        self.spec.route_wait.min(self.switchover_pause() / 4)
    }

    /// Brings the chosen replica level with the master, writes going on.
    fn start_aligning(&mut self, cx: &mut Step<'_>) {
        if let Some(f) = &mut self.failover {
            f.phase = FailoverPhase::Aligning;
            f.timeline.routed = cx.now;
        }
        let master = self.master.clone();
        self.send(cx, &master, Command::AskInfo);
    }

    /// Pauses the master's writes and asks where they stopped.
    fn pause_master(&mut self, cx: &mut Step<'_>) {
        let pause = self.switchover_pause();
        if let Some(f) = &mut self.failover {
            f.phase = FailoverPhase::Pausing;
            f.paused_until = Some(cx.now.saturating_add(pause));
            f.timeline.paused = cx.now;
        }
        let master = self.master.clone();
        self.send(cx, &master, Command::PauseWrites { ms: pause });
        self.send(cx, &master, Command::AskInfo);
    }

    /// How long the master's writes are paused: `failover-timeout`, at most
    /// [`PAUSE_MAX`].
    fn switchover_pause(&self) -> Millis {
        self.failover_deadline().min(PAUSE_MAX)
    }

    /// An answer to the switchover's own `INFO`: the paused master's
    /// offset, or how far the chosen replica got.
    pub(super) fn switchover_report(&mut self, cx: &mut Step<'_>, addr: &Addr, info: &InfoReport) {
        let Some(f) = &mut self.failover else {
            return;
        };
        match f.phase {
            FailoverPhase::Aligning if *addr == f.old_master => {
                if !matches!(info.role, Role::Master) {
                    self.abort_switchover(cx, SwitchoverAbort::MasterNotMaster);
                    return;
                }
                f.align_offset = info.offset;
                let promoted = f.promoted.clone();
                self.send(cx, &promoted, Command::AskInfo);
            }
            FailoverPhase::Aligning if *addr == f.promoted => match &info.role {
                Role::Replica { .. } => {
                    f.timeline.align_rounds += 1;
                    let level = info.offset >= f.align_offset;
                    let still = f.align_seen == Some(info.offset);
                    f.align_seen = Some(info.offset);
                    if level
                        || cx.now.saturating_sub(f.timeline.routed) >= ALIGN_MAX
                        || f.timeline.align_rounds >= ALIGN_ROUNDS
                    {
                        self.pause_master(cx);
                    } else if still {
                        // Nothing arrived since its last answer: a replica
                        // fresh from a full sync gets no stream until its
                        // first `REPLCONF ACK`, up to a second later. Asked
                        // at once, the rounds ran out in 100–170 ms and the
                        // wait moved into the pause (`benches/plan.rs`).
                        f.align_idle = Some(cx.now);
                    } else {
                        let master = f.old_master.clone();
                        self.send(cx, &master, Command::AskInfo);
                    }
                }
                _ => self.abort_switchover(cx, SwitchoverAbort::CandidateNotReplica),
            },
            FailoverPhase::Pausing if *addr == f.old_master => {
                if !matches!(info.role, Role::Master) {
                    self.abort_switchover(cx, SwitchoverAbort::MasterNotMaster);
                    return;
                }
                // A new run id: the master restarted since its last report,
                // perhaps empty. Its offset then counts from another
                // history, and a replica would "catch up" with nothing;
                // the empty-restart guard judges this report next.
                let known_run = self
                    .instances
                    .get(addr)
                    .and_then(|i| i.info.as_ref())
                    .map(|i| i.run_id.as_str());
                if known_run != Some(info.run_id.as_str()) {
                    self.abort_switchover(cx, SwitchoverAbort::MasterRestarted);
                    return;
                }
                f.paused_offset = info.offset;
                f.phase = FailoverPhase::CatchingUp;
                f.timeline.master_offset = cx.now;
                let promoted = f.promoted.clone();
                self.send(cx, &promoted, Command::AskInfo);
            }
            FailoverPhase::CatchingUp if *addr == f.promoted => match &info.role {
                Role::Replica { .. } if info.offset >= f.paused_offset => {
                    f.timeline.rounds += 1;
                    f.timeline.caught_up = cx.now;
                    f.phase = FailoverPhase::Demoting;
                    f.demoted_first = true;
                    let (old, promoted) = (f.old_master.clone(), f.promoted.clone());
                    self.send(cx, &old, Command::ReplicaOf(promoted));
                    // The view says so at once (`Group::masterless`).
                    cx.out.push(Output::Topology {
                        group: self.spec.name.clone(),
                    });
                }
                // Not there yet: ask again at once (a replica on the same
                // network catches up within milliseconds).
                Role::Replica { .. } => {
                    if f.timeline.rounds == 0 {
                        f.timeline.behind = f.paused_offset - info.offset;
                    }
                    f.timeline.rounds += 1;
                    self.send(cx, addr, Command::AskInfo);
                }
                _ => self.abort_switchover(cx, SwitchoverAbort::CandidateNotReplica),
            },
            _ => {}
        }
    }

    /// The paused master acknowledged `REPLICAOF <chosen>`: a replica now,
    /// it answers writes `-READONLY` and counts no fence; the chosen
    /// replica is promoted. Returns whether the reply was that.
    pub(super) fn demoted_before_promotion(
        &mut self,
        cx: &mut Step<'_>,
        addr: &Addr,
        target: &Addr,
    ) -> bool {
        let Some(f) = &mut self.failover else {
            return false;
        };
        if f.phase != FailoverPhase::Demoting || f.old_master != *addr || f.promoted != *target {
            return false;
        }
        f.phase = FailoverPhase::SendNoOne;
        f.timeline.demoted = cx.now;
        let promoted = f.promoted.clone();
        cx.out.event(
            Channel::FailoverStateSendSlaveofNoone,
            self.payload_of(&promoted),
        );
        self.fence_promoted(cx, &promoted);
        self.fence_followers(cx, &promoted);
        self.promote(cx, &promoted);
        true
    }

    /// A switchover whose promotion will not come, after the old master
    /// was demoted: it holds every acknowledged write (the chosen replica
    /// was only level with it), so it is made master again, then
    /// unpaused. Sent whether or not the demotion ran (`REPLICAOF NO ONE`
    /// changes nothing on a master).
    pub(super) fn restore_old_master(&mut self, cx: &mut Step<'_>, f: &super::Failover) {
        self.send(cx, &f.old_master, Command::ReplicaOfNoOne);
        self.send(cx, &f.old_master, Command::Unpause);
    }

    /// The switchover's deadline (half the pause) and its instances'
    /// health, while the master is paused and nothing was promoted.
    pub(super) fn step_switchover(&mut self, cx: &mut Step<'_>, f: &Failover) {
        let down = |a: &Addr| {
            self.instances
                .get(a)
                .is_some_and(|i| i.sdown || i.failure.is_some())
        };
        // The catch-up's budget counts from the pause; the alignment
        // before it has its own (ALIGN_MAX), so this is only a backstop.
        let since = match f.phase {
            FailoverPhase::Routing => f.started,
            FailoverPhase::Aligning => f.timeline.routed,
            _ => f.timeline.paused,
        };
        if f.phase == FailoverPhase::Routing
            && cx.now.saturating_sub(since) >= self.route_wait()
            && !down(&f.promoted)
            && !down(&f.old_master)
        {
            // Not confirmed in time (an API server slow to answer, a
            // route that cannot be checked): clients of the route meet
            // the old behaviour, a moment of `-READONLY` after the move.
            let waited = self.route_wait();
            self.log(
                cx.out,
                format!(
                    "the route did not reach {} within {waited} ms; switching over all the same",
                    f.promoted
                ),
            );
            self.start_aligning(cx);
        } else if cx.now.saturating_sub(since) > self.switchover_pause() / 2 {
            self.abort_switchover(cx, SwitchoverAbort::CatchUpTimeout);
        } else if down(&f.promoted) {
            self.abort_switchover(cx, SwitchoverAbort::CandidateDown);
        } else if down(&f.old_master) {
            self.abort_switchover(cx, SwitchoverAbort::MasterDown);
        } else if f.phase == FailoverPhase::Aligning
            && f.align_idle
                .is_some_and(|idle| cx.now.saturating_sub(idle) >= ALIGN_PACE)
        {
            // The next round of an alignment whose replica stood still.
            if let Some(x) = &mut self.failover {
                x.align_idle = None;
            }
            let master = f.old_master.clone();
            self.send(cx, &master, Command::AskInfo);
        }
    }

    /// Gives the switchover up before any promotion: the master is
    /// unpaused and stays the master.
    pub(super) fn abort_switchover(&mut self, cx: &mut Step<'_>, why: SwitchoverAbort) {
        let Some(f) = self.failover.take() else {
            return;
        };
        let text = why.to_string();
        // Before the abort event, which closes the attempt in the status
        // history.
        self.report_abort(cx, Op::Switchover, f.epoch, Abort::Switchover(why));
        cx.out.event(
            Channel::FailoverAbortSlaveTimeout,
            self.payload_of(&f.promoted),
        );
        self.log(
            cx.out,
            format!("switchover to {} abandoned: {text}", f.promoted),
        );
        // Demoted already (or on its way): master again, then unpaused.
        if f.demoted_first {
            self.restore_old_master(cx, &f);
        } else if f.paused_until.is_some() {
            self.send(cx, &f.old_master, Command::Unpause);
        }
        self.retry_at = cx.now;
        self.persist(cx.out);
        self.failover_ended(cx, &f);
    }

    /// The promotion is confirmed: the paused old master is told to follow
    /// the new one and its clients are killed; it is unpaused once it
    /// acknowledged ([`Group::switchover_demoted`]).
    pub(super) fn demote_paused(&mut self, cx: &mut Step<'_>, old: &Addr) {
        let Some(inst) = self.instances.get_mut(old) else {
            return;
        };
        inst.demoted = true;
        inst.fix_sent_at = Some(cx.now);
        self.persist(cx.out);
        if let Some(f) = &self.failover {
            let message = timeline_line(&f.timeline, cx.now);
            self.log(cx.out, message);
        }
        let master = self.master.clone();
        cx.out.event(Channel::ConvertToSlave, self.payload_of(old));
        self.send(cx, old, Command::ReplicaOf(master));
        self.kill_clients(cx, old);
    }

    /// `REPLICAOF <target>` acknowledged by `addr`: when that is the paused
    /// old master of a switchover following the new master, it is
    /// unpaused.
    pub(super) fn switchover_demoted(&mut self, cx: &mut Step<'_>, addr: &Addr, target: &Addr) {
        let Some(f) = &mut self.failover else {
            return;
        };
        if f.paused_until.is_some() && f.old_master == *addr && *target == self.master {
            f.paused_until = None;
            self.send(cx, addr, Command::Unpause);
        }
    }
}

/// What a switchover's write stall was made of, up to the old master's
/// demotion (its paused clients are disconnected then, and find the new
/// master).
fn timeline_line(t: &super::Timeline, now: Millis) -> String {
    let since = |at: Millis| at.saturating_sub(t.paused);
    format!(
        "switchover: the replica level with the master after {} ms in {} round(s), writes going \
         on; then writes paused {} ms until the demotion (the master's offset after {} ms, \
         the replica caught up after {} ms in {} INFO round(s), {} bytes behind at first; \
         the old master a replica {} ms later; promotion confirmed and persisted in the {} ms \
         after)",
        t.paused.saturating_sub(t.begun),
        t.align_rounds,
        since(now),
        since(t.master_offset),
        since(t.caught_up),
        t.rounds,
        t.behind,
        t.demoted.saturating_sub(t.caught_up),
        now.saturating_sub(t.demoted),
    )
}
