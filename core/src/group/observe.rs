//! Observations: what the links report — valid PING replies, link
//! failures, INFO, and replies to the commands the core sent — applied to
//! the group's data, and handed to the rules that act on them.
//!
//! An INFO report goes through the rules in this order: the reboot period
//! and the empty-restart guard's first triggers ([`detect`](super::detect),
//! [`guard`](super::guard)); `+role-change`; replicas the master lists
//! join the group; the promoted replica's report on its promotion
//! ([`failover`](super::failover)); the guard's last trigger; adoption of
//! the master the others follow ([`reconcile`](super::reconcile)); and
//! only then corrections: demotion of stray masters
//! ([`fence`](super::fence)), reconfiguration progress
//! ([`reconf`](super::reconf)) and `+fix-slave-config` for replicas that
//! follow another node.

use super::{FailoverPhase, Group, Instance};
use crate::Channel;
use crate::{Addr, Command, InfoReport, LinkFailure, Millis, Output, Reply, Role, Step};

impl Group {
    pub(crate) fn ping_ok(&mut self, now: Millis, addr: &Addr) {
        if let Some(i) = self.instances.get_mut(addr) {
            i.last_ok = now;
            i.failure = None;
            i.refused_since = None;
            i.rebooted_at = None;
        }
    }

    /// A PING answered with an error: the first of a run starts the
    /// clock ([`Instance::refused_since`]); only a valid PING reply stops
    /// it, not an INFO reply, which a misconfigured instance still gives.
    pub(crate) fn ping_refused(&mut self, now: Millis, addr: &Addr) {
        if let Some(i) = self.instances.get_mut(addr) {
            i.refused_since.get_or_insert(now);
        }
    }

    pub(crate) fn link_down(&mut self, cx: &mut Step<'_>, addr: &Addr, failure: LinkFailure) {
        if let Some(i) = self.instances.get_mut(addr) {
            let first = i.failure.replace(failure).is_none();
            if first {
                self.fence_replica_lost(cx, addr);
            }
        }
    }

    pub(crate) fn observe_report(&mut self, cx: &mut Step<'_>, addr: &Addr, info: InfoReport) {
        let Some(inst) = self.instances.get_mut(addr) else {
            return;
        };
        inst.last_ok = cx.now;
        inst.failure = None;
        let previous = inst.info.replace(info.clone());
        inst.info_at = cx.now;
        let role_changed = previous
            .as_ref()
            .is_none_or(|p| matches!(p.role, Role::Master) != matches!(info.role, Role::Master));
        if role_changed {
            inst.role_since = cx.now;
        }
        if matches!(info.role, Role::Replica { .. }) {
            inst.replica_offset = Some(info.offset);
        } else if previous.as_ref().is_some_and(|p| p.run_id != info.run_id) {
            // A new process: the old one's offsets say nothing of it.
            inst.replica_offset = None;
        }

        // A restart seen happening (new run id).
        let rebooted = previous.as_ref().is_some_and(|p| p.run_id != info.run_id);
        if rebooted {
            self.saw_reboot(cx, addr);
        }
        if self.guard_report(cx, addr, previous.as_ref(), &info, rebooted) {
            return;
        }
        if let Some(prev) = &previous {
            let was_master = matches!(prev.role, Role::Master);
            let is_master = matches!(info.role, Role::Master);
            if was_master != is_master {
                let role = if is_master { "master" } else { "slave" };
                let payload = format!("{} new reported role is {role}", self.payload_of(addr));
                cx.out.event(Channel::RoleChange, payload);
            }
        }

        // Replicas the master lists join the group.
        if *addr == self.master && matches!(info.role, Role::Master) {
            let joined: Vec<Addr> = info
                .replicas
                .iter()
                .filter(|r| !self.instances.contains_key(&r.addr))
                .map(|r| r.addr.clone())
                .collect();
            for r in &joined {
                self.instances
                    .insert(r.clone(), Instance::new(r.clone(), cx.now));
            }
            if !joined.is_empty() {
                // Their history in the group survives a restart: a peer's
                // configuration may name one once the master is gone.
                self.persist(cx.out);
            }
            for r in joined {
                cx.out.event(Channel::Slave, self.payload_of(&r));
                cx.out.push(Output::Watch {
                    group: self.spec.name.clone(),
                    addr: r,
                });
            }
        }

        // The promoted replica reports on its promotion.
        // Where the promoted replica's new history forks: its last
        // offset as a replica.
        let fork = previous
            .as_ref()
            .filter(|p| matches!(p.role, Role::Replica { .. }))
            .map(|p| p.offset);
        if self.promotion_report(cx, addr, &info, fork) {
            return;
        }

        // The empty-restart guard, once more: a replica's report can
        // reveal an empty master.
        if self.guard_revealed(cx, addr) {
            return;
        }
        // The persisted view may be stale: adopt the master the others
        // follow before correcting anyone.
        self.reconcile(cx);
        self.settle_at_risk(cx, addr, &info);
        match &info.role {
            Role::Master if *addr != self.master => self.demote(cx, addr),
            Role::Master => self.govern_fence(cx),
            // The advertised master itself reports a replica: `reconcile`
            // and the failure detector deal with it, never a REPLICAOF.
            Role::Replica { .. } if *addr == self.master => {}
            Role::Replica {
                master, link_up, ..
            } => self.replica_report(cx, addr, master.clone(), *link_up),
        }
    }

    fn replica_report(&mut self, cx: &mut Step<'_>, addr: &Addr, points_to: Addr, link_up: bool) {
        let master = self.master.clone();
        // Reconfiguration progress.
        if self.reconf_done(cx, addr, &points_to, link_up) {
            return;
        }
        let Some(inst) = self.instances.get_mut(addr) else {
            return;
        };
        if points_to == master {
            if link_up && inst.demoted {
                // A fenced old master has resynced from the current master:
                // it is an ordinary replica again.
                inst.demoted = false;
                self.persist(cx.out);
            }
            return;
        }
        // Pointing elsewhere. Leave it alone while a failover is underway,
        // while the master itself is down (the failover will fix it), and
        // until the master's own report confirms it is one: the replica
        // may know better than a stale view.
        let master_down = self
            .master_instance()
            .is_none_or(|m| m.sdown || m.failure.is_some());
        if self.failover.is_some()
            || master_down
            || !self.master_confirmed()
            || self.master_lost.is_some()
            || self.corrections_held(cx.now, cx.daemon.timers.stale_window())
        {
            return;
        }
        // It follows a node we know nothing about, or one that reports
        // itself master: learn about that node, and let the rules for
        // masters (adoption, the empty-restart guard, demotion) decide
        // first. Pointing a replica that holds data at our master before
        // that could resync it from a node that lost everything.
        match self.instances.get(&points_to) {
            None => {
                self.instances
                    .insert(points_to.clone(), Instance::new(points_to.clone(), cx.now));
                cx.out.push(Output::Watch {
                    group: self.spec.name.clone(),
                    addr: points_to,
                });
                return;
            }
            Some(x) if x.info.is_none() || x.reports_master() => return,
            Some(_) => {}
        }
        if !self.may_resend(addr, cx.now) {
            return;
        }
        cx.out.event(Channel::FixSlaveConfig, self.payload_of(addr));
        self.send(cx, addr, Command::ReplicaOf(master));
    }

    pub(crate) fn reply(&mut self, cx: &mut Step<'_>, addr: &Addr, t: u64, reply: Reply) {
        let Some((to, command)) = self.awaiting.remove(&t) else {
            return;
        };
        if to != *addr {
            return;
        }
        if let Some(i) = self.instances.get_mut(addr)
            && !matches!(reply, Reply::Failed(_))
        {
            i.last_ok = cx.now;
            i.failure = None;
        }
        let phase = self
            .failover
            .as_ref()
            .map(|f| (f.phase, f.promoted.clone()));
        match (command, reply) {
            (Command::ReplicaOfNoOne, Reply::Ok) => {
                if let Some((FailoverPhase::SendNoOne, promoted)) = phase
                    && promoted == *addr
                {
                    if let Some(f) = &mut self.failover {
                        f.phase = FailoverPhase::WaitPromotion;
                        f.promotion_asked = cx.now;
                    }
                    // The INFO that confirms it was sent with the
                    // promotion ([`Group::promote`]).
                    cx.out
                        .event(Channel::FailoverStateWaitPromotion, self.payload_of(addr));
                }
            }
            (Command::AskInfo, Reply::Report(info)) => {
                self.switchover_report(cx, addr, &info);
                self.observe_report(cx, addr, info);
            }
            // A switchover's promotion refused: its old master, demoted
            // first, would otherwise wait out the failover's deadline with
            // no master in the group.
            (Command::ReplicaOfNoOne, Reply::Failed(e))
                if self.failover.as_ref().is_some_and(|f| {
                    f.demoted_first && f.phase == FailoverPhase::SendNoOne && f.promoted == *addr
                }) =>
            {
                self.abort_switchover(
                    cx,
                    super::refusal::SwitchoverAbort::PromotionRefused {
                        by: addr.clone(),
                        error: e,
                    },
                );
            }
            (Command::ReplicaOf(_), Reply::Failed(e))
                if phase
                    .as_ref()
                    .is_some_and(|(p, _)| *p == FailoverPhase::Demoting)
                    && self.paused_master() == Some(addr) =>
            {
                self.abort_switchover(
                    cx,
                    super::refusal::SwitchoverAbort::DemotionRefused {
                        by: addr.clone(),
                        error: e,
                    },
                );
            }
            (Command::PauseWrites { .. }, Reply::Failed(e))
                if phase.is_some_and(|(p, _)| p == FailoverPhase::Pausing) =>
            {
                self.abort_switchover(
                    cx,
                    super::refusal::SwitchoverAbort::PauseRefused {
                        by: addr.clone(),
                        error: e,
                    },
                );
            }
            (Command::SetWriteFence(_), reply) => {
                let ok = reply == Reply::Ok;
                self.fence_acknowledged(addr, t, ok);
                if let Reply::Failed(e) = reply {
                    self.log(
                        cx.out,
                        format!("{addr} refused the write fence (CONFIG SET): {e}"),
                    );
                }
            }
            (Command::ReplicaOf(target), Reply::Ok) => {
                if self.demoted_before_promotion(cx, addr, &target) {
                    return;
                }
                self.reconf_acknowledged(cx, addr, &target);
                self.switchover_demoted(cx, addr, &target);
            }
            (command, Reply::Failed(e)) => {
                self.log(cx.out, format!("{command:?} to {addr} failed: {e}"));
            }
            _ => {}
        }
    }
}
