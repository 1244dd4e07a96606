//! Reconciling the persisted view with the world: when the advertised
//! master reports that it replicates from another node (the roles changed
//! while Valkyrie was down, or an operator switched them by hand), the
//! evidence decides what is advertised.
//!
//! - A node that reports itself master, that the others follow, and that
//!   holds the data — the one the advertised master says it follows, or,
//!   while the advertised master is down to us, the one other node that
//!   reports itself master — is **adopted**: a new config epoch, persisted, then
//!   `+switch-master`. Nothing is sent to any instance: the world is
//!   already consistent, and only our view was stale.
//! - A node that lost its data (empty, behind a replica on another
//!   history) is never adopted; the empty-restart guard deals with it.
//! - Otherwise the advertised master is, for the failure detector, down
//!   (Sentinel's rule: a master reported as a replica for longer than
//!   `down-after` plus two INFO periods is SDOWN; the rule lives in
//!   [`detect`](super::detect)), and a failover picks the best replica.
//!
//! Two further rules keep a stale view from doing harm while it lasts: no
//! instance is ever told to replicate from itself, and no node is demoted
//! towards an advertised master that does not itself report the master
//! role (that is how both nodes of a group ended up replicas). The first
//! is in `Group::send` (the group's `mod.rs`), the second in
//! [`fence`](super::fence) and in the correction of replicas
//! ([`observe`](super::observe)).

use super::{Group, Instance};
use crate::Channel;
use crate::events;
use crate::{Addr, Output, ReconfRole, Role, Step};

impl Group {
    /// Adopts the master the advertised one follows, when the evidence
    /// allows; see the module docs.
    pub(crate) fn reconcile(&mut self, cx: &mut Step<'_>) {
        // With peers, a new configuration comes only from an election or a
        // peer's hello: never an epoch of our own invention.
        if self.failover.is_some() || self.master_lost.is_some() || self.peer_mode() {
            return;
        }
        let Some(target) = self.followed_master().or_else(|| self.master_elsewhere()) else {
            return;
        };
        if !self.instances.contains_key(&target) {
            // Someone we have never watched: learn about it first.
            self.instances
                .insert(target.clone(), Instance::new(target.clone(), cx.now));
            cx.out.push(Output::Watch {
                group: self.spec.name.clone(),
                addr: target,
            });
            return;
        }
        if !self.adoptable(&target) || self.epoch_exhausted(cx) {
            return;
        }
        let old = self.master.clone();
        self.epoch = cx.daemon.next_epoch();
        self.raise_config_epoch(cx.daemon, self.epoch);
        self.record_adopted(cx, &old, &target);
        self.master = target.clone();
        self.forget_answers();
        self.decided_down = false;
        if let Some(t) = self.instances.get_mut(&target) {
            t.demoted = false;
        }
        self.log(
            cx.out,
            format!(
                "{old} reports it replicates from {target}, which reports itself master, \
                 holds the data and is followed by the others: adopting it (epoch {})",
                self.epoch
            ),
        );
        // Durable before anyone is told.
        self.persist(cx.out);
        cx.out.event(
            Channel::SwitchMaster,
            events::switch_master(&self.spec.name, &old, &target),
        );
        // Clients must move as after a peer's failover: an observer's
        // call, though no peer told it.
        cx.out.push(Output::ClientReconfig {
            group: self.spec.name.clone(),
            role: ReconfRole::Observer,
            from: old,
            to: target,
        });
        cx.out.push(Output::Topology {
            group: self.spec.name.clone(),
        });
    }

    /// The node the advertised master says it replicates from, if it says
    /// so (and names another node).
    fn followed_master(&self) -> Option<Addr> {
        let info = self.master_instance()?.info.as_ref()?;
        match &info.role {
            Role::Replica { master, .. } if *master != self.master => Some(master.clone()),
            _ => None,
        }
    }

    /// While the advertised master is down to us, the one other node that
    /// reports itself master (someone else already failed over, or the
    /// roles changed while the advertised master was out of sight).
    fn master_elsewhere(&self) -> Option<Addr> {
        if !self.master_instance().is_some_and(|m| m.sdown) {
            return None;
        }
        let mut masters = self.instances.values().filter(|i| {
            i.addr != self.master && !i.sdown && i.failure.is_none() && i.reports_master()
        });
        let first = masters.next()?;
        masters.next().is_none().then(|| first.addr.clone())
    }

    /// Whether `target` may become the advertised master: it reports the
    /// master role, a strict majority of the other nodes that reported
    /// follow it, and it did not lose the data.
    fn adoptable(&self, target: &Addr) -> bool {
        let Some(t) = self.instances.get(target).and_then(|i| i.info.as_ref()) else {
            return false;
        };
        if !matches!(t.role, Role::Master) {
            return false;
        }
        let others: Vec<&Instance> = self
            .instances
            .values()
            .filter(|i| i.addr != *target && i.info.is_some() && !i.sdown)
            .collect();
        let followers = others
            .iter()
            .filter(|i| {
                matches!(
                    i.info.as_ref().map(|x| &x.role),
                    Some(Role::Replica { master, .. }) if master == target
                )
            })
            .count();
        if followers * 2 <= others.len() {
            return false;
        }
        // Holds the data: nobody holds keys it lacks, and nobody is further
        // ahead on another history.
        let emptied = t.keys == Some(0)
            && others.iter().any(|i| {
                i.info
                    .as_ref()
                    .is_some_and(|x| x.keys.is_some_and(|k| k > 0))
            });
        let behind = others.iter().any(|i| {
            i.info.as_ref().is_some_and(|x| {
                x.replid != t.replid && x.offset > t.offset && x.keys.is_some_and(|k| k > 0)
            })
        });
        !emptied && !behind
    }
}
