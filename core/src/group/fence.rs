//! Fencing: the old master never comes back as master.
//!
//! An instance that is not the advertised master but answers as one — an
//! old master back, or a stray promotion — is marked *demoted* (persisted),
//! told `REPLICAOF <master>`, and its normal and pub/sub clients are
//! killed so they reconnect and rediscover. It is never advertised in
//! between, and it is trusted again only once it reports an up link to the
//! current master. Corrective commands are repeated at most once per
//! [`RESEND_AFTER`] to an instance that still reports the wrong role.
//!
//! In peer mode two waits come first ([`Group::corrections_held`]): none
//! at all for 8 s after the daemon started, and a master we did not fence
//! ourselves only once it has reported the role for 8 s — a newer
//! configuration's hello may not have reached us yet.
//!
//! No node is demoted towards an advertised master that lost its data,
//! that we cannot see, that does not itself report the master role
//! ([`Group::master_confirmed`]; that is how both nodes of a group once
//! ended up replicas), or that is about to be replaced by a failover in
//! flight (the reconfiguration points everyone at the new master once it
//! is confirmed).

use super::{FailoverPhase, Group};
use crate::Channel;
use crate::{Addr, Command, Millis, Role, Step};

/// How often a demotion or reconfiguration command may be repeated to an
/// instance that still reports the wrong role.
pub const RESEND_AFTER: Millis = 1_000;

impl Group {
    /// An instance that is not the advertised master says it is one: an
    /// old master back, or a stray promotion. Point it at the master.
    pub(super) fn demote(&mut self, cx: &mut Step<'_>, addr: &Addr) {
        if self.master_lost.is_some() {
            // Never point anyone at a master that lost its data.
            return;
        }
        // Nor at a master we cannot see, or one about to be replaced: a
        // failover in flight reconfigures everyone once it is confirmed.
        if self
            .master_instance()
            .is_none_or(|m| m.sdown || m.failure.is_some())
            || !self.master_confirmed()
            || self
                .failover
                .as_ref()
                .is_some_and(|f| f.phase != FailoverPhase::Reconfiguring)
        {
            return;
        }
        let window = cx.daemon.timers.stale_window();
        if self.corrections_held(cx.now, window) || self.stray_too_recent(addr, cx.now, window) {
            return;
        }
        if !self.may_resend(addr, cx.now) {
            return;
        }
        let Some(inst) = self.instances.get_mut(addr) else {
            return;
        };
        let was_demoted = inst.demoted;
        inst.demoted = true;
        if !was_demoted {
            self.persist(cx.out);
        }
        let master = self.master.clone();
        cx.out.event(Channel::ConvertToSlave, self.payload_of(addr));
        self.send(cx, addr, Command::ReplicaOf(master));
        self.kill_clients(cx, addr);
    }

    /// In peer mode, no corrective command for the stale window
    /// ([`Timers::stale_window`](crate::Timers::stale_window), four
    /// publish periods) after the group was loaded: a daemon restarted
    /// with a stale configuration hears the newer hellos first (Sentinel
    /// waits the same 8 s).
    pub(crate) fn corrections_held(&self, now: Millis, stale_window: Millis) -> bool {
        self.peer_mode() && now < self.loaded_at.saturating_add(stale_window)
    }

    /// In peer mode, a master we did not fence ourselves (not an old
    /// master we replaced or adopted a replacement for) is converted only
    /// once it has reported the master role for the stale window: it may
    /// be a newer configuration's master whose hello has not reached us
    /// yet (Sentinel's stray-master wait). Old masters we fenced are
    /// demoted at once.
    fn stray_too_recent(&self, addr: &Addr, now: Millis, stale_window: Millis) -> bool {
        self.peer_mode()
            && self
                .instances
                .get(addr)
                .is_some_and(|i| !i.demoted && now.saturating_sub(i.role_since) < stale_window)
    }

    /// Whether a corrective command may go to `addr` now (at most one per
    /// [`RESEND_AFTER`]); records the send if so.
    pub(super) fn may_resend(&mut self, addr: &Addr, now: Millis) -> bool {
        let Some(inst) = self.instances.get_mut(addr) else {
            return false;
        };
        if inst
            .fix_sent_at
            .is_some_and(|t| now.saturating_sub(t) < RESEND_AFTER)
        {
            return false;
        }
        inst.fix_sent_at = Some(now);
        true
    }

    /// Whether the advertised master's own latest report says it is one.
    pub(crate) fn master_confirmed(&self) -> bool {
        self.master_instance()
            .is_some_and(|m| matches!(m.info.as_ref().map(|i| &i.role), Some(Role::Master)))
    }
}
