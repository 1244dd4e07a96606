//! Failure detection: which instances are down, and whether a down master
//! may be failed over.
//!
//! - **SDOWN**: no valid reply for `down-after` milliseconds.
//! - **Liveness classification**: a master that is down may be *dead*
//!   (connection refused or reset), *hung* (a fresh connect answered
//!   nothing), or only *unreachable* from here (connects time out, or no
//!   failure was classified). A connection that merely *stalled* proves
//!   nothing: the link's fresh connect classifies it, and the verdict
//!   waits for that, at most two `down-after` periods.
//! - **The witnesses' verdict**: for an unreachable master, fresh INFO
//!   from the replicas we can reach is awaited; if a strict majority
//!   still has an up link with recent I/O from it ([`WITNESS_IO_SECS`]),
//!   or no replica is reachable at all, we are the ones cut off and
//!   nothing happens. Dead and hung masters need no witnesses. Re-judged
//!   at every step, never latched.
//! - **The reboot period** (Valkey 8's `master-reboot-down-after-period`):
//!   a master seen restarting that has not answered `PONG` for the period
//!   is down, whatever else it answers; the first `PONG` clears it.
//! - **The role-mismatch rule** (Sentinel's): an advertised master that
//!   reports the replica role for longer than `down-after` plus
//!   [`ROLE_MISMATCH_GRACE`] is down. Both of these answer, so their
//!   replicas' vouching proves nothing: they go without witnesses.
//!
//! TILT, the mass-failure pause, that holds every group back while more than
//! half of the masters are unreachable is in [`Core`](crate::Core):
//! [`Group::master_unreachable`] is its input.

use super::refusal::Outcome;
use super::{Group, Instance};
use crate::Channel;
use crate::events;
use crate::readiness::Reason;
use crate::{Addr, Millis, Role, Step};

/// A replica vouches for a master it heard from within this many seconds.
/// Valkey masters ping their replicas every 10 s when idle.
pub const WITNESS_IO_SECS: u64 = 11;

/// How long the advertised master may report the replica role, beyond
/// `down-after`, before it counts as down (two of Sentinel's INFO periods).
pub const ROLE_MISMATCH_GRACE: Millis = 2_000;

impl Group {
    /// The master is down and may only be unreachable from here.
    pub(crate) fn master_unreachable(&self) -> bool {
        self.master_instance().is_some_and(|m| {
            m.sdown && m.refused_since.is_none() && m.failure.is_none_or(|f| f.is_unreachable())
        })
    }

    /// Refreshes SDOWN flags and publishes transitions.
    pub(crate) fn detect(&mut self, cx: &mut Step<'_>) {
        let down_after = self.spec.down_after;
        let master = self.master.clone();
        let not_a_master =
            self.master_reports_replica_too_long(cx.now) || self.master_reboot_too_long(cx.now);
        let mut changes = Vec::new();
        for inst in self.instances.values_mut() {
            let refused = inst
                .refused_since
                .is_some_and(|t| cx.now.saturating_sub(t) > down_after);
            let down = cx.now.saturating_sub(inst.last_ok) > down_after
                || refused
                || (inst.addr == master && not_a_master);
            if down != inst.sdown {
                inst.sdown = down;
                changes.push((inst.addr.clone(), down));
            }
        }
        self.detect_peers(cx);
        for (addr, down) in changes {
            let payload = self.payload_of(&addr);
            cx.out.event(
                if down {
                    Channel::Sdown
                } else {
                    Channel::SdownCleared
                },
                payload,
            );
            if addr == self.master && !down && self.decided_down {
                self.decided_down = false;
                cx.out.event(
                    Channel::OdownCleared,
                    events::master(&self.spec.name, &addr),
                );
            }
        }
    }

    /// Re-judges a down master: publishes `+odown` / `-odown` as the
    /// verdict changes, and returns whether the master is objectively down
    /// (SDOWN and not vetoed by the witnesses).
    pub(super) fn judge_down(&mut self, cx: &mut Step<'_>) -> bool {
        let master_down = self.master_instance().is_some_and(|m| m.sdown);
        if !master_down {
            return false;
        }
        // Re-judged at every step, not latched: witnesses that appear
        // later (right after our own restart, say) can still veto.
        match self.verdict(cx.now) {
            WitnessVerdict::Wait { until } => {
                self.report_hold(cx, Outcome::Held, Reason::WitnessWait { until });
                false
            }
            WitnessVerdict::Veto(cause) => {
                self.report_hold(cx, Outcome::Vetoed, Reason::WitnessVeto(cause));
                if self.decided_down {
                    self.decided_down = false;
                    cx.out.event(
                        Channel::OdownCleared,
                        events::master(&self.spec.name, &self.master),
                    );
                }
                false
            }
            WitnessVerdict::Go => {
                if !self.decided_down {
                    self.decided_down = true;
                    cx.out.event(
                        Channel::Odown,
                        format!(
                            "{} #quorum 1/1",
                            events::master(&self.spec.name, &self.master)
                        ),
                    );
                }
                true
            }
        }
    }

    /// Whether the witnesses let an SDOWN master count as down.
    pub(crate) fn verdict_is_go(&self, now: Millis) -> bool {
        self.verdict(now) == WitnessVerdict::Go
    }

    /// The witnesses' verdict as a failure would meet it now: evaluated
    /// when the master is SDOWN, or when its link already fails as
    /// unreachable (what an observer cut off from it sees before
    /// `down-after` runs out). `None` otherwise: a master that answers is
    /// vouched for by its replicas, and a failure would not be.
    pub(crate) fn witness_preview(&self, now: Millis) -> Option<WitnessVerdict> {
        let m = self.master_instance()?;
        (m.sdown || m.failure.is_some_and(|f| f.is_unreachable())).then(|| self.verdict(now))
    }

    /// The witnesses' verdict on an SDOWN master.
    pub(crate) fn verdict(&self, now: Millis) -> WitnessVerdict {
        let Some(m) = self.master_instance() else {
            return WitnessVerdict::Go;
        };
        // It answers, but as a replica, and nobody it follows could be
        // adopted: replicas that vouch for its link prove nothing here.
        if self.master_reports_replica_too_long(now) || self.master_reboot_too_long(now) {
            return WitnessVerdict::Go;
        }
        // It answers, with errors (`-MISCONF`, a wrong password): we are
        // not the ones cut off, and its replicas' links prove nothing.
        if m.refused_since.is_some() {
            return WitnessVerdict::Go;
        }
        // Dead (refused, reset) or hung (a fresh connect answered nothing):
        // only the master itself can be at fault.
        if !m.failure.is_none_or(|f| f.is_unreachable()) {
            return WitnessVerdict::Go;
        }
        let silent_for = now.saturating_sub(m.last_ok);
        let grace = self.spec.down_after.saturating_mul(2);
        let wait = WitnessVerdict::Wait {
            until: m.last_ok.saturating_add(grace),
        };
        // An established connection that went silent proves nothing: the
        // link is already making a fresh connect, and its outcome decides
        // between hung and unreachable. Bounded, in case it never comes.
        if m.failure.is_some_and(|f| f.is_unclassified()) && silent_for < grace {
            return wait;
        }
        let reachable: Vec<&Instance> = self
            .instances
            .values()
            .filter(|i| i.addr != self.master && !i.sdown && i.failure.is_none())
            .collect();
        // Unreachable master and no replica reachable either: we are the
        // ones cut off as likely as not, and there is nobody to promote.
        if reachable.is_empty() {
            return WitnessVerdict::Veto(VetoCause::NoWitness);
        }
        let fresh: Vec<&&Instance> = reachable
            .iter()
            .filter(|i| i.info.is_some() && i.info_at > m.last_ok)
            .collect();
        // Give reachable replicas one down-after period to report.
        if fresh.len() < reachable.len() && silent_for < grace {
            return wait;
        }
        if fresh.is_empty() {
            return WitnessVerdict::Go;
        }
        let vouching = fresh.iter().filter(|i| self.vouches(i)).count();
        if vouching * 2 > fresh.len() {
            return WitnessVerdict::Veto(VetoCause::Vouched {
                vouching,
                fresh: fresh.len(),
            });
        }
        // With the fence in force (N replicas, a majority of at most
        // 2N - 1), N silent replicas leave the master at most N - 1: it
        // refuses writes. Fewer prove nothing about the ones we cannot
        // reach, which may still be with it.
        if let Some(f) = self.fence_setting() {
            let silent = (fresh.len() - vouching) as u64;
            if silent < f.replicas {
                return WitnessVerdict::Veto(VetoCause::FenceHolds {
                    silent,
                    needed: f.replicas,
                });
            }
        }
        WitnessVerdict::Go
    }

    /// Whether a replica's fresh INFO shows the advertised master alive:
    /// an up link that carried data from it within
    /// [`Group::witness_io_secs`]. A master that takes writes streams them
    /// (its replicas' offsets advance and their last I/O stays at 0), and
    /// an idle one pings its replicas every 10 s, so a live master always
    /// satisfies this; a dead or hung one stops satisfying it within 11 s.
    fn vouches(&self, replica: &Instance) -> bool {
        let window = self.witness_io_secs();
        matches!(
            replica.info.as_ref().map(|x| &x.role),
            Some(Role::Replica { master, link_up: true, last_io_secs: Some(io), .. })
                if *master == self.master && *io <= window
        )
    }

    /// How recently a replica must have heard from the master to vouch
    /// for it: [`WITNESS_IO_SECS`], or, with the write fence in force on
    /// the master's current process, the fence's lag plus 3 s.
    ///
    /// Why that is sound: the fenced master pings its replicas every
    /// [`FENCE_PING_SECS`](super::write_fence::FENCE_PING_SECS), so a live
    /// one is heard within about a second and keeps vouching.
    ///
    /// Why it is safe to promote once a majority stops vouching: say a
    /// replica last heard the master at `t`. The cut came before the next
    /// ping, by `t + 1`; the replica's acknowledgements travel the same
    /// link, so the master's last one from it is no later. The master
    /// counts good replicas once a second in whole seconds: a replica is
    /// out of the count by `ack + lag + 2`, that is by `t + lag + 3`. A
    /// replica that reports more than lag + 3 s of silence (its
    /// `master_last_io_seconds_ago`, whole seconds, above the window)
    /// therefore no longer counts for the old master, and a majority of
    /// them leaves it below its `min-replicas-to-write`: it refuses writes
    /// before the new master takes any. This assumes the cut drops both
    /// directions of the replication link (`docs/failover.md`).
    pub fn witness_io_secs(&self) -> u64 {
        match self.fence_setting() {
            Some(f) => f
                .lag_secs
                .saturating_add(3)
                .max(f.ping_secs.saturating_add(2))
                .min(WITNESS_IO_SECS),
            None => WITNESS_IO_SECS,
        }
    }

    /// Valkey 8's `master-reboot-down-after-period`: the master restarted
    /// and has not answered a PING with `PONG` for longer than the period.
    fn master_reboot_too_long(&self, now: Millis) -> bool {
        let period = self.spec.reboot_down_after;
        period > 0
            && self.master_instance().is_some_and(|m| {
                m.rebooted_at
                    .is_some_and(|t| now.saturating_sub(t) > period)
            })
    }

    /// An instance answered INFO with a new run id: it restarted. Publishes
    /// `+reboot`, and starts the reboot period if it is the master and
    /// `master-reboot-down-after-period` is set.
    pub(super) fn saw_reboot(&mut self, cx: &mut Step<'_>, addr: &Addr) {
        cx.out.event(Channel::Reboot, self.payload_of(addr));
        if *addr == self.master
            && self.spec.reboot_down_after > 0
            && let Some(i) = self.instances.get_mut(addr)
        {
            i.rebooted_at = Some(cx.now);
        }
    }

    /// Whether the advertised master has reported the replica role for
    /// longer than `down-after` plus [`ROLE_MISMATCH_GRACE`].
    pub(crate) fn master_reports_replica_too_long(&self, now: Millis) -> bool {
        self.master_instance().is_some_and(|m| {
            matches!(m.info.as_ref().map(|i| &i.role), Some(Role::Replica { .. }))
                && now.saturating_sub(m.role_since)
                    > self.spec.down_after.saturating_add(ROLE_MISMATCH_GRACE)
        })
    }
}

/// What the replicas say about an SDOWN master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WitnessVerdict {
    /// Not every reachable replica has reported since the master went
    /// silent, or its stalled link is not classified yet: decided at the
    /// latest at `until` (two `down-after` periods of silence).
    Wait {
        /// When the wait ends.
        until: Millis,
    },
    /// We are the ones cut off, or the master may still take writes.
    Veto(VetoCause),
    /// Fail over.
    Go,
}

/// Why the witnesses veto a failover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VetoCause {
    /// The master is unreachable and no replica is reachable either.
    NoWitness,
    /// A strict majority of the replicas that reported since the master
    /// went silent still hear from it.
    Vouched {
        /// Replicas that still hear from the master.
        vouching: usize,
        /// Replicas that reported since the master went silent.
        fresh: usize,
    },
    /// The write fence is in force and fewer replicas than it requires
    /// went silent: the master may still be acknowledging writes through
    /// the others.
    FenceHolds {
        /// Replicas that no longer hear from the master.
        silent: u64,
        /// Replicas the fence requires.
        needed: u64,
    },
}
