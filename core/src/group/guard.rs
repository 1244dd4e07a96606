//! The empty-restart guard: a master that lost its data is replaced at
//! once, whatever the timers, before its replicas resync from it.
//!
//! A master whose run id changed and whose replication offset fell behind
//! its replicas (or behind its own previous offset under a new replication
//! id), or whose keyspace went from non-empty to empty, has lost its data.
//! Sentinel only logs `+reboot` here, and the replicas then resync from the
//! empty node and lose everything. Valkyrie records the lost history
//! (`master_lost`: nothing may be pointed at the node, and no replica that
//! shares its new history may be promoted) and fails over: the best
//! remaining replica is promoted and the restarted node demoted.
//!
//! Three triggers, all on an INFO report:
//!
//! 1. the master's own report: a restart seen happening ([`Group::lost_data`]),
//!    or, on first sight (after our own restart, say), an empty master
//!    behind the replicas that follow it ([`Group::untrusted_empty_master`]);
//! 2. a replica's report: it resynced from the master onto a new history
//!    and its offset went back, having held data before, in the same
//!    process (a replica that restarted explains its own offset);
//! 3. a replica's report reveals that the master first seen after our own
//!    start is an empty restart behind its replicas (the master's current
//!    process was never trusted, [`Group::trust_master`]).
//!
//! Evidence from replicas counts only when those replicas hold keys: before
//! their first sync, the replicas of a brand-new idle master report offset
//! 1 on a replication id of their own, and the first sync takes each of
//! them from 1 back to 0 — both patterns of "a master that lost its data",
//! with nothing lost.

use super::{Group, Trigger};
use crate::{Addr, InfoReport, Role, Step};

impl Group {
    /// Triggers 1 and 2, on `addr`'s new INFO (`previous` is the report it
    /// replaces, `rebooted` whether its run id changed). Returns whether
    /// the guard fired (the report needs nothing more).
    pub(super) fn guard_report(
        &mut self,
        cx: &mut Step<'_>,
        addr: &Addr,
        previous: Option<&InfoReport>,
        info: &InfoReport,
        rebooted: bool,
    ) -> bool {
        let suspect = match previous {
            Some(prev) if rebooted => self.lost_data(prev, info),
            _ => self.untrusted_empty_master(),
        };
        if *addr == self.master && self.failover.is_none() && self.master_lost.is_none() && suspect
        {
            self.log(
                cx.out,
                format!(
                    "master {addr} restarted without its data (run id {}, offset {}, keys {:?}); \
                     failing over before replicas resync from it",
                    info.run_id, info.offset, info.keys
                ),
            );
            self.master_lost = Some(info.replid.clone());
            let replid = info.replid.clone();
            // Automatic: nobody to answer (see `start_failover`).
            let _ = self.start_failover(cx, Trigger::LostData { replid });
            return true;
        }
        // A replica of the master whose history changed and whose offset
        // went back resynced from a master that lost its data; unless the
        // replica restarted itself (a new run id): then its own restart
        // explains the offset, and says nothing about the master.
        if let Some(prev) = previous
            && !rebooted
            && *addr != self.master
            && self.master_lost.is_none()
            && prev.replid != info.replid
            && info.offset < prev.offset
            // It held data before: a replica's first sync from a new,
            // idle master also takes its offset from 1 to 0.
            && prev.keys.is_some_and(|k| k > 0)
            && matches!(&info.role, Role::Replica { master, .. } if *master == self.master)
            && self.failover.is_none()
        {
            self.log(
                cx.out,
                format!(
                    "{addr} resynced from {} and went back from offset {} to {}: the master lost its data",
                    self.master, prev.offset, info.offset
                ),
            );
            self.master_lost = Some(info.replid.clone());
            if self.window(cx.now).is_none() {
                let replid = info.replid.clone();
                // Automatic: nobody to answer (see `start_failover`).
                let _ = self.start_failover(cx, Trigger::LostData { replid });
            }
            return true;
        }
        false
    }

    /// Trigger 3, on a report from `addr` that the other rules have seen
    /// (the master's current process is trusted first if it deserves it).
    /// Returns whether the guard fired.
    pub(super) fn guard_revealed(&mut self, cx: &mut Step<'_>, addr: &Addr) -> bool {
        if self.master_lost.is_none() {
            self.trust_master();
        }
        // A replica's report can reveal that the master we first saw after
        // our own start is an empty restart behind its replicas.
        if *addr != self.master
            && self.failover.is_none()
            && self.master_lost.is_none()
            && self.untrusted_empty_master()
        {
            let replid = self
                .master_instance()
                .and_then(|m| m.info.as_ref())
                .map(|i| i.replid.clone())
                .unwrap_or_default();
            self.log(
                cx.out,
                format!(
                    "master {} holds no data and is behind its replicas; failing over",
                    self.master
                ),
            );
            self.master_lost = Some(replid.clone());
            // Automatic: nobody to answer (see `start_failover`).
            let _ = self.start_failover(cx, Trigger::LostData { replid });
            return true;
        }
        false
    }

    /// Whether a restarted master lost its data: its offset is behind what
    /// its replicas (or it, before) had, or its keyspace went empty.
    pub(super) fn lost_data(&self, prev: &InfoReport, now: &InfoReport) -> bool {
        let best_replica = self
            .instances
            .values()
            .filter(|i| i.addr != self.master)
            .filter_map(|i| i.info.as_ref())
            // Only replicas holding data: an unsynced one reports offset 1.
            .filter(|i| i.replid != now.replid && i.keys.is_some_and(|k| k > 0))
            .map(|i| i.offset)
            .max()
            .unwrap_or(0);
        let emptied = now.keys == Some(0) && prev.keys.is_some_and(|k| k > 0);
        now.offset < best_replica
            || now.offset < prev.offset && prev.replid != now.replid
            || emptied
    }

    /// The master's current process was never seen healthy (holding keys,
    /// or sharing its replication history with a replica), holds no keys,
    /// and a replica following it holds keys and is further ahead on
    /// another history:
    /// it restarted empty while we were not watching (e.g. while Valkyrie
    /// itself was down).
    pub(super) fn untrusted_empty_master(&self) -> bool {
        let Some(m) = self.master_instance() else {
            return false;
        };
        let Some(info) = &m.info else {
            return false;
        };
        if m.trusted_run.as_deref() == Some(info.run_id.as_str()) || info.keys != Some(0) {
            return false;
        }
        self.instances.values().any(|i| {
            i.addr != m.addr
                && i.info.as_ref().is_some_and(|r| {
                    let follows =
                        matches!(&r.role, Role::Replica { master, .. } if *master == m.addr);
                    let stray = matches!(r.role, Role::Master);
                    // Only a replica that holds data is evidence: one that
                    // has never synced reports an offset of 1 on its own
                    // replication id, as does every replica of a brand-new
                    // master before its first sync.
                    let holds_data = r.keys.is_some_and(|k| k > 0);
                    (follows || stray)
                        && holds_data
                        && r.replid != info.replid
                        && r.offset > info.offset
                })
        })
    }

    /// Marks the master's current process as healthy once it shows data or
    /// a replica in sync with it.
    pub(super) fn trust_master(&mut self) {
        let master = self.master.clone();
        let Some(info) = self.instances.get(&master).and_then(|m| m.info.clone()) else {
            return;
        };
        if !matches!(info.role, Role::Master) {
            return;
        }
        let synced = self.instances.values().any(|i| {
            i.addr != master && i.info.as_ref().is_some_and(|r| {
                matches!(&r.role, Role::Replica { master: m, link_up: true, .. } if *m == master)
                    && r.replid == info.replid
            })
        });
        // A synced replica vouches only if nobody holds more data on another
        // history (after a restart while we were down, replicas may have
        // resynced from the empty process).
        let ahead_elsewhere = self.instances.values().any(|i| {
            i.addr != master
                && i.info
                    .as_ref()
                    .is_some_and(|r| r.replid != info.replid && r.offset > info.offset)
        });
        if (info.keys.is_some_and(|k| k > 0) || (synced && !ahead_elsewhere))
            && let Some(m) = self.instances.get_mut(&master)
        {
            m.trusted_run = Some(info.run_id.clone());
        }
    }
}
