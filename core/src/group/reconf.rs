//! Replica reconfiguration: once a promotion is confirmed, the other
//! replicas are told `REPLICAOF <new master>` `parallel-syncs` at a time
//! (`+slave-reconf-sent`, `-inprog` when acknowledged, `-done` when they
//! report an up link to the new master, whose clients are then killed so
//! they reconnect), then `+failover-end`. Replicas that are down are
//! fixed when they come back. One that does not acknowledge the command
//! within `slave-reconf-timeout` (or the failover deadline, if shorter),
//! or does not finish within the failover deadline, is given up on
//! (`-slave-reconf-sent-timeout`) and fixed later.

use super::{Failover, FailoverPhase, Group, Reconf};
use crate::Channel;
use crate::events;
use crate::{Addr, Command, Step};

impl Group {
    pub(super) fn start_reconfiguration(&mut self) {
        let (master, old) = match &self.failover {
            Some(f) => (self.master.clone(), f.old_master.clone()),
            None => return,
        };
        for inst in self.instances.values_mut() {
            inst.reconf = if inst.addr == master || inst.addr == old {
                None
            } else {
                Some(Reconf::Pending)
            };
        }
    }

    pub(super) fn step_reconf(&mut self, cx: &mut Step<'_>, f: &Failover) {
        let timeout = self.failover_deadline();
        let unacknowledged = cx.daemon.timers.replica_reconf_timeout.min(timeout);
        let mut in_flight = 0usize;
        let mut timed_out = Vec::new();
        for inst in self.instances.values_mut() {
            let limit = match inst.reconf {
                Some(Reconf::Sent(_)) => unacknowledged,
                _ => timeout,
            };
            match inst.reconf {
                Some(Reconf::Sent(at) | Reconf::InProgress(at)) => {
                    if cx.now.saturating_sub(at) > limit {
                        inst.reconf = Some(Reconf::Done);
                        timed_out.push(inst.addr.clone());
                    } else {
                        in_flight += 1;
                    }
                }
                Some(Reconf::Pending) if inst.sdown || inst.failure.is_some() => {
                    // Down replicas are fixed when they come back.
                    inst.reconf = Some(Reconf::Done);
                }
                _ => {}
            }
        }
        for addr in timed_out {
            cx.out
                .event(Channel::SlaveReconfSentTimeout, self.payload_of(&addr));
        }
        let pending: Vec<Addr> = self
            .instances
            .values()
            .filter(|i| i.reconf == Some(Reconf::Pending))
            .map(|i| i.addr.clone())
            .collect();
        let slots = (self.spec.parallel_syncs.max(1) as usize).saturating_sub(in_flight);
        for addr in pending.iter().take(slots) {
            if let Some(inst) = self.instances.get_mut(addr) {
                inst.reconf = Some(Reconf::Sent(cx.now));
            }
            cx.out
                .event(Channel::SlaveReconfSent, self.payload_of(addr));
            if let Some(setting) = self.fence_for_replica() {
                self.send(cx, addr, Command::SetWriteFence(setting));
            }
            self.send(cx, addr, Command::ReplicaOf(self.master.clone()));
        }
        let unfinished = self.instances.values().any(|i| {
            matches!(
                i.reconf,
                Some(Reconf::Pending | Reconf::Sent(_) | Reconf::InProgress(_))
            )
        });
        // A planned switchover ends only once its old master acknowledged
        // the demotion and was unpaused (or its pause ran out): until then
        // it is the paused master, to which nothing a pause holds (a
        // hello) may be sent, and whose unpause needs the failover.
        let demoting = f.paused_until.is_some_and(|until| cx.now < until);
        if !unfinished && !demoting {
            for inst in self.instances.values_mut() {
                inst.reconf = None;
            }
            let channel = if cx.now.saturating_sub(f.started) > timeout {
                Channel::FailoverEndForTimeout
            } else {
                Channel::FailoverEnd
            };
            cx.out
                .event(channel, events::master(&self.spec.name, &self.master));
            self.failover = None;
            self.persist(cx.out);
            self.failover_ended(cx, f);
        }
    }

    /// A replica reports an up link to the new master while it is being
    /// reconfigured: it is done. Returns whether it was.
    pub(super) fn reconf_done(
        &mut self,
        cx: &mut Step<'_>,
        addr: &Addr,
        points_to: &Addr,
        link_up: bool,
    ) -> bool {
        if let Some(f) = &self.failover
            && f.phase == FailoverPhase::Reconfiguring
            && *points_to == self.master
            && link_up
            && let Some(inst) = self.instances.get_mut(addr)
            && matches!(inst.reconf, Some(Reconf::Sent(_) | Reconf::InProgress(_)))
        {
            inst.reconf = Some(Reconf::Done);
            cx.out
                .event(Channel::SlaveReconfDone, self.payload_of(addr));
            self.kill_clients(cx, addr);
            return true;
        }
        false
    }

    /// A replica acknowledged `REPLICAOF <target>`: if that was its
    /// reconfiguration, it is in progress.
    pub(super) fn reconf_acknowledged(&mut self, cx: &mut Step<'_>, addr: &Addr, target: &Addr) {
        if let Some(inst) = self.instances.get_mut(addr)
            && let Some(Reconf::Sent(at)) = inst.reconf
            && *target == self.master
        {
            inst.reconf = Some(Reconf::InProgress(at));
            cx.out
                .event(Channel::SlaveReconfInprog, self.payload_of(addr));
        }
    }
}
