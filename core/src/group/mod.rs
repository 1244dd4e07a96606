//! One monitored group (a master and its replicas): observations, failure
//! detection, and the failover state machine.
//!
//! # Failover, step by step
//!
//! 1. The master is SDOWN (no valid reply for `down-after`). A connection
//!    that merely *stalled* waits for the link's fresh connect to classify
//!    it. If the master is only *unreachable* (connects time out, or no
//!    failure was classified), fresh INFO from the replicas we can reach
//!    is awaited: if a majority still has an up link with recent I/O from
//!    it, or no replica is reachable at all, we are the ones cut off and
//!    nothing happens. A dead (refused/reset) or hung (a fresh connect
//!    that answers nothing) master needs no witnesses. TILT, the mass-failure pause, (in [`Core`](super::Core)) holds
//!    everything back while more than half of all masters are unreachable.
//! 2. A replica is chosen ([`select`](super::select)), the epoch is
//!    incremented, and the state is persisted *before* `REPLICAOF NO ONE`
//!    is sent. Within an epoch the chosen replica never changes.
//! 3. The promoted replica's own INFO confirms the promotion. The new master is persisted,
//!    then advertised (`+switch-master`), its clients are killed so they
//!    reconnect, and the other replicas are pointed at it `parallel-syncs`
//!    at a time.
//! 4. The old master is marked demoted: whenever it answers as a master it
//!    is told `REPLICAOF <new master>`, and it is only trusted again once it
//!    reports a synced link to the current master.
//!
//! The **empty-restart guard** starts step 2 at once, whatever the timers,
//! when the master's run id changed and its offset fell behind its replicas
//! or its keyspace went empty: replicas must not resync from it.
//!
//! # Where each rule lives
//!
//! - [`state`]: the group's data, its constructor and its persisted view;
//! - [`observe`]: PING, INFO and command replies applied to that data;
//! - [`guard`]: the empty-restart guard (a master that lost its data);
//! - [`detect`]: SDOWN, the classification of a silent master, the
//!   witnesses' verdict, the reboot period, the role-mismatch rule;
//! - [`failover`]: where a failover starts ([`Group::start_failover`]),
//!   and its steps up to the confirmed promotion; deadlines, resumption;
//! - [`holds`]: the rules that hold a failover back (the back-off window,
//!   the picture, the epoch guard, `SENTINEL FAILOVER`'s checks), shared
//!   with [`readiness`], the verdict "what would a failure now do";
//! - [`refusal`]: one structured reason for every hold, veto, abort and
//!   refused request, reported as [`Output::Refused`];
//! - [`reconf`]: pointing the other replicas at the new master;
//! - [`fence`]: demoting stray and returning masters;
//! - [`reconcile`]: adopting the master the others follow.
//!
//! This file holds what they share: how commands, events, logs and
//! persistence leave the group, and `SENTINEL RESET`.

pub mod at_risk;
mod detect;
mod failover;
mod fence;
mod guard;
mod holds;
mod observe;
pub mod readiness;
mod reconcile;
mod reconf;
pub mod refusal;
mod state;
mod switchover;
pub mod write_fence;

pub use at_risk::{AtRisk, Fenced};
pub use detect::{VetoCause, WITNESS_IO_SECS, WitnessVerdict};
pub use failover::{MAX_FAILOVER_WAIT, PROMOTION_POLL, Trigger};
pub use fence::RESEND_AFTER;
pub use readiness::{Candidate, FenceView, QuorumView, Readiness, Reason, ReplicaVerdict};
pub use refusal::{Abort, Op, Outcome, Refusal, SwitchoverAbort};
pub use state::{Failover, FailoverPhase, Group, GroupSpec, Instance, Reconf, Timeline};
pub use switchover::{ALIGN_MAX, ALIGN_PACE, ALIGN_ROUNDS, PAUSE_MAX};
pub use write_fence::{FenceMode, FenceSetting, WriteFence};

use super::events;
use super::types::Addr;
use super::{Command, Out, Output, Step};
use crate::Channel;

impl Group {
    pub(super) fn persist(&self, out: &mut Out) {
        out.push(Output::Persist {
            group: self.spec.name.clone(),
            state: self.persisted(),
        });
    }

    pub(super) fn log(&self, out: &mut Out, message: String) {
        out.push(Output::Log {
            group: self.spec.name.clone(),
            message,
        });
    }

    pub(super) fn send(&mut self, cx: &mut Step<'_>, to: &Addr, command: Command) {
        if matches!(&command, Command::ReplicaOf(target) if target == to) {
            // Whatever led here, an instance told to replicate from itself
            // stops taking writes and serves nothing.
            self.log(cx.out, format!("not telling {to} to replicate from itself"));
            return;
        }
        let t = *cx.token;
        *cx.token += 1;
        self.awaiting.insert(t, (to.clone(), command.clone()));
        cx.out.push(Output::Send {
            group: self.spec.name.clone(),
            to: to.clone(),
            token: t,
            command,
        });
    }

    pub(super) fn kill_clients(&mut self, cx: &mut Step<'_>, to: &Addr) {
        self.send(cx, to, Command::KillNormalClients);
        self.send(cx, to, Command::KillPubsubClients);
    }

    /// Promotes `to`, and disconnects the clients it served as a replica in
    /// the same breath: the link runs an instance's commands in order, so
    /// the kills land before the INFO that confirms the promotion, and a
    /// client that follows the advertisement is never cut (killing after
    /// advertising cut exactly the clients that followed fastest). The
    /// INFO that confirms the promotion goes in the same breath too: it
    /// answers right after the `+OK`, without a step of this daemon
    /// between (a round trip on the path of every write stall).
    pub(super) fn promote(&mut self, cx: &mut Step<'_>, to: &Addr) {
        self.send(cx, to, Command::ReplicaOfNoOne);
        self.kill_clients(cx, to);
        self.send(cx, to, Command::AskInfo);
    }

    /// The event payload for `addr`: master form for the master, replica
    /// form (with ` @ name master`) otherwise.
    pub(super) fn payload_of(&self, addr: &Addr) -> String {
        if *addr == self.master {
            events::master(&self.spec.name, addr)
        } else {
            events::replica(addr, &self.spec.name, &self.master)
        }
    }

    /// `SENTINEL RESET`: forget every replica (they are rediscovered from
    /// the master's next INFO) and the transient failure state. What must
    /// survive — epochs, the advertised master, fenced old masters, a lost
    /// master — is kept, and a group in the middle of a failover is left
    /// alone: abandoning a promotion halfway could leave two masters.
    /// Returns whether the group was reset.
    pub(crate) fn reset(&mut self, out: &mut Out) -> bool {
        if self.failover.is_some() || self.election.is_some() {
            self.log(
                out,
                "SENTINEL RESET skipped: a failover is in progress".to_string(),
            );
            return false;
        }
        let master = self.master.clone();
        let forgotten: Vec<Addr> = self
            .instances
            .values()
            .filter(|i| i.addr != master && !i.demoted)
            .map(|i| i.addr.clone())
            .collect();
        for addr in &forgotten {
            self.instances.remove(addr);
            out.push(Output::Unwatch {
                group: self.spec.name.clone(),
                addr: addr.clone(),
            });
        }
        self.awaiting.retain(|_, (a, _)| !forgotten.contains(a));
        self.decided_down = false;
        self.retry_at = 0;
        self.no_good_at = None;
        // Peers are forgotten too, as Sentinel does (they come back with
        // their next hellos); peer mode is kept.
        if !self.peers.is_empty() {
            self.peers.clear();
            self.persist(out);
            out.push(Output::Peers);
        }
        out.event(
            Channel::ResetMaster,
            events::master(&self.spec.name, &master),
        );
        out.push(Output::Topology {
            group: self.spec.name.clone(),
        });
        true
    }
}
