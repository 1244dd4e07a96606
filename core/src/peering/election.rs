//! ODOWN by quorum and the election, in peer mode (a group that has known a
//! peer): every promotion — ODOWN, the empty-restart guard, `SENTINEL
//! FAILOVER` — goes through an election.
//!
//! - **Asking**: while our own view of the master is SDOWN, every peer
//!   whose link is up is asked `is-master-down-by-addr` every 100 ms
//!   until it says "down", then every `ask-period` (a second, as
//!   Sentinel; [`Timers::ask_period`](crate::Timers::ask_period)); at the
//!   start of a candidacy, at once, with our run id.
//! - **ODOWN**: our own SDOWN (not vetoed by the replica witnesses) plus
//!   fresh "down" answers reach `quorum`.
//! - **Candidacy**: on ODOWN, after a random delay (`0..JITTER_RANGE`)
//!   so that daemons that saw the failure together do not split the vote,
//!   and not before the back-off: `failover_epoch = ++current_epoch`, our
//!   own vote, persisted, then the vote requests.
//! - **Winning**: votes *for the failover's own epoch* (Sentinel counts the
//!   current epoch) from a majority of every sentinel ever known and at
//!   least `quorum`. Then the failover steps run in that epoch.
//! - **Losing**: `-failover-abort-not-elected` after
//!   `min(election-timeout, failover-timeout)` (10 s by default); at once when the votes are split so that nobody
//!   can win any more (then a new candidacy after a random delay, rather
//!   than Sentinel's two failover timeouts); and the attempt is given up
//!   silently when the current epoch moves past it (someone else runs a
//!   newer election).
//! - **Back-off**: no candidacy within two failover timeouts of our last
//!   one, or of a vote for somebody else.

use crate::group::refusal::{Abort, Op, Outcome, op_of};
use crate::group::{Trigger, WitnessVerdict};
use crate::readiness::Reason;
use crate::{
    Addr, AdminError, Channel, Command, CrashPoint, Group, Millis, Output, ReconfRole, Step, events,
};

/// How many split elections in a row are retried at once (after
/// [`SPLIT_RETRY_MIN`] plus a random delay) before falling back to the
/// back-off of two failover timeouts.
pub const MAX_QUICK_RETRIES: u32 = 3;

/// The least wait before retrying a split election.
pub const SPLIT_RETRY_MIN: Millis = 50;

/// A split election is retried after [`SPLIT_RETRY_MIN`] plus up to this
/// many times the candidacy's random delay.
pub const SPLIT_SPREAD: Millis = 3;

/// A replica report this long after a configuration naming that node as
/// master was first heard refutes it. Not at once: a report sent just
/// before an honest promotion can arrive after the hello announcing it.
pub const REFUTE_AFTER: Millis = 1_000;

/// An election we run (Sentinel's `WAIT_START` state).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Election {
    /// Its epoch (`failover_epoch`).
    pub epoch: u64,
    /// When it started.
    pub started: Millis,
    /// What it is for.
    pub trigger: Trigger,
    /// Won: the failover steps are being started.
    pub won: bool,
}

/// A configuration heard in a hello, waiting for its master to be seen
/// reporting the master role.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PendingConfig {
    /// The master it names.
    pub master: Addr,
    /// Its config epoch.
    pub config_epoch: u64,
    /// The peer that sent it.
    pub from: String,
    /// That peer's address.
    pub from_addr: Addr,
    /// When a hello first carried it.
    pub first_heard: Millis,
    /// When a hello last carried it (peers repeat it every hello).
    pub heard_at: Millis,
    /// Its master's INFO was asked at once: otherwise we would learn the
    /// role at the next INFO period (a second) and name the old master
    /// on the Sentinel port until then.
    pub asked: bool,
}

impl PendingConfig {
    /// Until when it holds our own candidacy back, if it does. A peer has
    /// already failed the master over in a newer epoch; electing
    /// ourselves now would promote a second node and lose what the first
    /// one took. The hold ends when peers stop repeating it
    /// (`stale_window`, [`Timers::stale_window`](crate::Timers::stale_window)),
    /// when the master it names is down in our view, or after one
    /// failover timeout: an address that never answers must not block a
    /// failover forever.
    pub fn held_until(
        &self,
        now: Millis,
        stale_window: Millis,
        failover_timeout: Millis,
        master_down: bool,
    ) -> Option<Millis> {
        let until = self
            .heard_at
            .saturating_add(stale_window)
            .min(self.first_heard.saturating_add(failover_timeout));
        (!master_down && now < until).then_some(until)
    }
}

impl Group {
    /// One step of a group in peer mode.
    pub(crate) fn step_peered(&mut self, cx: &mut Step<'_>) {
        self.try_adopt(cx);
        if self.failover.is_some() {
            self.step_failover(cx);
            return;
        }
        self.ask_peers(cx, false);
        let odown = self.judge_odown(cx);
        if self.paused {
            // Our own candidacy ends with the pause: an election won
            // now would start a promotion.
            self.election = None;
            self.candidacy_at = None;
            if odown {
                self.report_hold(cx, Outcome::Held, Reason::Paused);
            }
            return;
        }
        if self.election.is_some() {
            self.step_election(cx);
            return;
        }
        let held = self
            .window(cx.now)
            .map(|until| Reason::Window { until })
            .or_else(|| self.pending_hold(cx.now, cx.daemon.timers.stale_window()));
        if let Some(hold) = held {
            self.candidacy_at = None;
            // Only while a failover is wanted: the window also follows
            // our own candidacy or a vote while the master is up.
            if odown || self.master_lost.is_some() {
                self.report_hold(cx, Outcome::Held, hold);
            }
            return;
        }
        if let Some(replid) = self.master_lost.clone() {
            // The master lost its data: no ODOWN to wait for, but a vote
            // all the same.
            self.start_election(cx, Trigger::LostData { replid });
            return;
        }
        if !odown || cx.daemon.tilt {
            if odown {
                let why = cx.daemon.tilt_reason(cx.now);
                self.report_hold(cx, Outcome::Held, why);
            }
            self.candidacy_at = None;
            return;
        }
        match self.candidacy_at {
            None if cx.daemon.jitter > 0 => {
                self.candidacy_at = Some(cx.now.saturating_add(cx.daemon.jitter));
            }
            Some(at) if cx.now < at => {}
            _ => {
                self.candidacy_at = None;
                self.start_election(cx, Trigger::Odown);
            }
        }
    }

    /// A newer configuration heard from a peer, not adopted yet, that
    /// holds our candidacy back ([`PendingConfig::held_until`]).
    ///
    /// Only while the node it names may be a master: a node that reported
    /// itself a replica [`REFUTE_AFTER`] or more after the configuration
    /// was first heard refutes it, so a forged configuration naming a
    /// replica holds nothing back for longer than one report, however
    /// often it is repeated with ever higher epochs.
    pub(crate) fn pending_hold(&self, now: Millis, stale_window: Millis) -> Option<Reason> {
        let pc = self.pending_config.as_ref()?;
        let master_down = self.instances.get(&pc.master).is_some_and(|i| i.sdown);
        if pc.config_epoch <= self.config_epoch || self.refuted(pc) {
            return None;
        }
        let until = pc.held_until(now, stale_window, self.spec.failover_timeout, master_down)?;
        Some(Reason::PendingConfig {
            master: pc.master.clone(),
            config_epoch: pc.config_epoch,
            until,
        })
    }

    /// Whether the node a held configuration names has reported itself a
    /// replica [`REFUTE_AFTER`] or more after the configuration was first
    /// heard: it holds nothing back, and any configuration may replace it.
    pub(crate) fn refuted(&self, pc: &PendingConfig) -> bool {
        self.instances.get(&pc.master).is_some_and(|i| {
            i.info.is_some()
                && !i.reports_master()
                && i.info_at >= pc.first_heard.saturating_add(REFUTE_AFTER)
        })
    }

    /// Our own view: SDOWN, and not vetoed by the replica witnesses.
    pub(crate) fn own_down(&self, now: Millis) -> bool {
        self.master_instance().is_some_and(|m| m.sdown) && self.verdict_is_go(now)
    }

    /// ODOWN by Sentinel's rule, with `+odown #quorum n/q` / `-odown`.
    fn judge_odown(&mut self, cx: &mut Step<'_>) -> bool {
        let fresh_down = self.voters().filter(|p| p.master_down).count();
        let count = 1 + fresh_down;
        // Our own view ([`Group::own_down`]), with the witnesses' hold
        // reported as tested.
        let master_sdown = self.master_instance().is_some_and(|m| m.sdown);
        let own_down = master_sdown
            && match self.verdict(cx.now) {
                WitnessVerdict::Go => true,
                WitnessVerdict::Wait { until } => {
                    self.report_hold(cx, Outcome::Held, Reason::WitnessWait { until });
                    false
                }
                WitnessVerdict::Veto(cause) => {
                    self.report_hold(cx, Outcome::Vetoed, Reason::WitnessVeto(cause));
                    false
                }
            };
        let odown = own_down && self.quorum_reached(count);
        if odown != self.decided_down {
            self.decided_down = odown;
            let m = events::master(&self.spec.name, &self.master);
            if odown {
                cx.out.event(
                    Channel::Odown,
                    format!("{m} #quorum {count}/{}", self.spec.quorum),
                );
            } else {
                cx.out.event(Channel::OdownCleared, m);
            }
        }
        odown
    }

    /// Asks peers whether the master is down (and, during an election,
    /// for their vote).
    pub(crate) fn ask_peers(&mut self, cx: &mut Step<'_>, forced: bool) {
        // Only while we see the master down ourselves (peers take the
        // question as our "down" report), or for an election (a manual
        // failover, a master that lost its data: votes do not depend on
        // the master's state).
        if !self.own_down(cx.now) && self.election.is_none() {
            return;
        }
        let candidate = self
            .election
            .as_ref()
            .map(|_| cx.daemon.myid.to_ascii_lowercase());
        let mut asks = Vec::new();
        for p in self.peers.values_mut() {
            if !p.link_up || !p.verified {
                continue;
            }
            let period = cx.daemon.timers.ask_period(p.master_down);
            if forced || cx.now.saturating_sub(p.asked_at) >= period {
                p.asked_at = cx.now;
                asks.push(p.runid.clone());
            }
        }
        for runid in asks {
            cx.out.push(Output::AskPeer {
                group: self.spec.name.clone(),
                runid,
                master: self.master.clone(),
                epoch: cx.daemon.current_epoch,
                candidate: candidate.clone(),
            });
        }
    }

    /// A peer's answer to `is-master-down-by-addr`.
    pub(crate) fn down_reply(&mut self, now: Millis, runid: &str, answer: crate::DownAnswer) {
        if let Some(p) = self.peers.get_mut(runid).filter(|p| p.verified) {
            p.answered_at = now;
            p.master_down = answer.down;
            if let Some(leader) = answer.leader {
                p.leader = Some(leader.to_ascii_lowercase());
                p.leader_epoch = answer.leader_epoch;
            }
        }
    }

    /// Starts a candidacy: a new epoch, our own vote, persisted, then the
    /// vote requests.
    pub(crate) fn start_election(&mut self, cx: &mut Step<'_>, trigger: Trigger) {
        if self.epoch_exhausted(cx) {
            self.report_hold(cx, Outcome::Held, Reason::EpochExhausted);
            return;
        }
        if self.election_unwinnable() {
            let q = self.quorum_view();
            let hold = Reason::ElectionUnwinnable {
                usable: q.usable,
                needed: q.needed,
                known: q.known,
            };
            self.report_hold(cx, Outcome::Held, hold);
            // `quorum` is above the number of sentinels we know (after a
            // `SENTINEL RESET`, or misconfigured): no election can be won,
            // so none is started — every attempt would burn an epoch.
            if self
                .no_good_at
                .is_none_or(|t| cx.now.saturating_sub(t) >= self.failover_deadline())
            {
                self.no_good_at = Some(cx.now);
                self.log(
                    cx.out,
                    format!(
                        "no election can be won: quorum {} needs more sentinels than the {} known",
                        self.spec.quorum,
                        self.voters().count() + 1
                    ),
                );
            }
            return;
        }
        let epoch = cx.daemon.next_epoch();
        self.epoch = epoch;
        self.candidacy_at = None;
        // An attempt started: what holds the next one is news again.
        self.reported_hold.0 = None;
        self.election = Some(Election {
            epoch,
            started: cx.now,
            trigger,
            won: false,
        });
        let hold = self.failover_deadline().saturating_mul(2);
        self.retry_at = cx.now.saturating_add(hold).saturating_add(cx.daemon.jitter);
        self.leader = Some(cx.daemon.myid.to_ascii_lowercase());
        self.leader_epoch = epoch;
        // Durable before any vote request leaves.
        self.persist(cx.out);
        let m = events::master(&self.spec.name, &self.master);
        cx.out.event(Channel::NewEpoch, epoch.to_string());
        cx.out.event(Channel::TryFailover, m);
        cx.out.event(
            Channel::VoteForLeader,
            format!("{} {epoch}", cx.daemon.myid.to_ascii_lowercase()),
        );
        self.ask_peers(cx, true);
        self.step_election(cx);
    }

    /// Counts votes; wins, loses, or waits.
    fn step_election(&mut self, cx: &mut Step<'_>) {
        let Some(e) = self.election.clone() else {
            return;
        };
        if !e.won {
            if cx.daemon.current_epoch > e.epoch {
                self.log(
                    cx.out,
                    format!(
                        "giving up the election of epoch {}: the current epoch moved to {}",
                        e.epoch, cx.daemon.current_epoch
                    ),
                );
                self.election = None;
                self.report_abort(cx, election_op(self, &e), e.epoch, Abort::EpochMoved);
                return;
            }
            let me = cx.daemon.myid.to_ascii_lowercase();
            let tally = self.tally(e.epoch);
            let threshold = self.vote_threshold();
            let mine = tally.iter().find(|(c, _)| *c == me).map_or(0, |(_, n)| *n);
            if mine >= threshold {
                if let Some(x) = &mut self.election {
                    x.won = true;
                }
                self.quick_retries = 0;
                let m = events::master(&self.spec.name, &self.master);
                cx.out.event(Channel::ElectedLeader, m.clone());
                cx.daemon.crash_if_asked(CrashPoint::AfterElection, cx.out);
                cx.out.event(Channel::FailoverStateSelectSlave, m);
            } else {
                let voters = self.voters().count() + 1;
                let undecided = voters.saturating_sub(self.decided_voters(e.epoch));
                let best = tally.iter().map(|(_, n)| *n).max().unwrap_or(0);
                let split = best + undecided < threshold;
                let timeout = cx
                    .daemon
                    .timers
                    .election_timeout
                    .min(self.failover_deadline());
                if split || cx.now.saturating_sub(e.started) > timeout {
                    // Before the abort event, which closes the attempt in
                    // the status history.
                    let op = election_op(self, &e);
                    self.report_abort(cx, op, e.epoch, Abort::NotElected { split });
                    cx.out.event(
                        Channel::FailoverAbortNotElected,
                        events::master(&self.spec.name, &self.master),
                    );
                    self.election = None;
                    if split && self.quick_retries < MAX_QUICK_RETRIES {
                        // Nobody can win this epoch: try again soon, in a
                        // new one, after a random delay — a few times,
                        // then at Sentinel's pace.
                        self.quick_retries += 1;
                        self.log(
                            cx.out,
                            format!("the votes of epoch {} are split: trying again", e.epoch),
                        );
                        // The candidates of a split saw it at about the
                        // same time: a wider spread than a candidacy's.
                        self.retry_at = cx
                            .now
                            .saturating_add(SPLIT_RETRY_MIN)
                            .saturating_add(cx.daemon.jitter.saturating_mul(SPLIT_SPREAD));
                    }
                }
                return;
            }
        }
        // Won: start the failover in this epoch.
        let started = match &e.trigger {
            Trigger::Manual => self.start_manual_in(cx, Some(e.epoch)).is_ok(),
            // The master may have been found to have lost its data since
            // the election began: its new history is out all the same.
            Trigger::Odown => {
                let lost = self.master_lost.clone();
                self.start_automatic_in(cx, lost.as_deref(), Some(e.epoch))
            }
            Trigger::LostData { replid } => {
                self.start_automatic_in(cx, Some(replid.as_str()), Some(e.epoch))
            }
        };
        if started || cx.now.saturating_sub(e.started) > self.failover_deadline() {
            self.election = None;
        }
    }

    /// Votes of `epoch`, per candidate, ours included.
    fn tally(&self, epoch: u64) -> Vec<(String, usize)> {
        let mut tally: Vec<(String, usize)> = Vec::new();
        let own = (self.leader_epoch == epoch)
            .then_some(self.leader.as_deref())
            .flatten();
        let reported = self
            .voters()
            .filter(|p| p.leader_epoch == epoch)
            .filter_map(|p| p.leader.as_deref());
        for c in own.into_iter().chain(reported) {
            match tally.iter_mut().find(|(x, _)| x == c) {
                Some((_, n)) => *n += 1,
                None => tally.push((c.to_string(), 1)),
            }
        }
        tally
    }

    /// Voters whose vote in `epoch` cannot come to us: they voted in it or
    /// in a later one, or we cannot reach them (link down, or SDOWN).
    /// Ourselves included. Only used to see a split early: an unreachable
    /// peer that votes after all is simply a vote in a dead epoch.
    fn decided_voters(&self, epoch: u64) -> usize {
        usize::from(self.leader_epoch >= epoch)
            + self
                .voters()
                .filter(|p| (p.leader_epoch >= epoch && p.answered_at > 0) || !p.link_up || p.sdown)
                .count()
    }

    /// `SENTINEL FAILOVER` in peer mode: checked like Sentinel's
    /// ([`Group::manual_check`]), then an election.
    pub(crate) fn elect_for_manual(&mut self, cx: &mut Step<'_>) -> Result<(), AdminError> {
        self.manual_check(cx.now, cx.daemon.current_epoch)?;
        self.start_election(cx, Trigger::Manual);
        Ok(())
    }

    /// Adopts a configuration heard in a hello once its master reports
    /// the master role (a replica or an unreachable address is never
    /// adopted); an unknown address is watched first.
    pub(crate) fn try_adopt(&mut self, cx: &mut Step<'_>) {
        let Some(pc) = self.pending_config.clone() else {
            return;
        };
        if pc.config_epoch <= self.config_epoch
            || self
                .failover
                .as_ref()
                .is_some_and(|f| f.epoch >= pc.config_epoch)
        {
            self.pending_config = None;
            return;
        }
        let Some(target) = self.instances.get(&pc.master) else {
            // No history in the group (it may have been removed since the
            // configuration was heard): never dialled, never adopted.
            self.pending_config = None;
            return;
        };
        if target.sdown || !target.reports_master() {
            let master = pc.master.clone();
            let reachable = !target.sdown;
            if let Some(c) = self
                .pending_config
                .as_mut()
                .filter(|c| !c.asked && reachable)
            {
                // Once per configuration: a peer repeats it every hello.
                c.asked = true;
                self.send(cx, &master, Command::AskInfo);
            }
            return;
        }
        self.pending_config = None;
        let old = self.master.clone();
        let new = pc.master.clone();
        let superseded = self.failover.take();
        if let Some(f) = &superseded {
            self.log(
                cx.out,
                format!(
                    "failover of epoch {} superseded by the configuration of epoch {}",
                    f.epoch, pc.config_epoch
                ),
            );
        }
        self.election = None;
        self.candidacy_at = None;
        // A new configuration is a new situation: the back-off of the
        // failure it resolved no longer holds (Sentinel resets it too).
        self.retry_at = 0;
        self.quick_retries = 0;
        self.raise_config_epoch(cx.daemon, pc.config_epoch);
        // While the old master's fence is still the one in force.
        self.record_adopted(cx, &old, &new);
        self.master = new.clone();
        self.forget_answers();
        self.master_lost = None;
        self.decided_down = false;
        if let Some(t) = self.instances.get_mut(&new) {
            t.demoted = false;
        }
        if let Some(o) = self.instances.get_mut(&old) {
            o.demoted = true;
            o.fix_sent_at = None;
        }
        // Durable before anyone is told.
        self.persist(cx.out);
        if let Some(f) = superseded {
            let config_epoch = pc.config_epoch;
            let why = Abort::Superseded { config_epoch };
            self.report_abort(cx, op_of(&f), f.epoch, why);
            self.failover_ended(cx, &f);
        }
        cx.out.event(
            Channel::ConfigUpdateFrom,
            crate::events::sentinel(&pc.from, &pc.from_addr, &self.spec.name, &old),
        );
        cx.out.event(
            Channel::SwitchMaster,
            events::switch_master(&self.spec.name, &old, &new),
        );
        cx.out.push(Output::ClientReconfig {
            group: self.spec.name.clone(),
            role: ReconfRole::Observer,
            from: old,
            to: new,
        });
        cx.out.push(Output::Topology {
            group: self.spec.name.clone(),
        });
    }
}

/// What an election is for: a manual one is a switchover while the master
/// answers.
fn election_op(g: &Group, e: &Election) -> Op {
    match e.trigger {
        Trigger::Manual => g.manual_op(),
        Trigger::Odown | Trigger::LostData { .. } => Op::Failover,
    }
}
