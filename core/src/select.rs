//! Replica choice, as Sentinel makes it: skip what cannot be trusted, then
//! lowest priority, highest replication offset, smallest run id.
//!
//! [`assess`] judges every replica and [`best`] picks among those it
//! admits: the failover's choice ([`choose_with`]) and the readiness
//! verdict's table of replicas are the same computation.

use std::cmp::Ordering;

use super::group::{Group, Instance};
use super::{Addr, Millis, Role};

/// A replica silent to PING for longer than this is not promoted.
pub const MAX_PING_SILENCE: Millis = 5_000;
/// A replica whose INFO is older than this is not promoted.
pub const MAX_INFO_AGE: Millis = 5_000;

/// Why a replica was passed over, for logs and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Subjectively down.
    Down,
    /// The link to it is down.
    Disconnected,
    /// It has not answered PING recently.
    Silent,
    /// `replica-priority 0`.
    PriorityZero,
    /// Its INFO is stale or missing.
    StaleInfo,
    /// Its link to the master was down much longer than the master has been
    /// down: its data is old.
    LongLinkDown,
    /// It does not report itself as a replica.
    NotReplica,
    /// A demoted old master that has not resynced yet.
    Demoted,
    /// It has never completed a sync since it started and holds no
    /// replication history (offset ≤ 1): nothing to promote.
    NeverSynced,
    /// On its way out: its pod is being deleted or scaled away.
    Retiring,
    /// It holds the new, empty history of a master that lost its data (it
    /// resynced from it): promoting it would lose everything.
    SharesLostHistory,
}

impl Skip {
    /// A stable word for metrics labels and documents.
    pub fn label(self) -> &'static str {
        match self {
            Skip::Down => "down",
            Skip::Disconnected => "disconnected",
            Skip::Silent => "silent",
            Skip::PriorityZero => "priority_zero",
            Skip::StaleInfo => "stale_info",
            Skip::LongLinkDown => "long_link_down",
            Skip::NotReplica => "not_replica",
            Skip::Demoted => "demoted",
            Skip::NeverSynced => "never_synced",
            Skip::Retiring => "retiring",
            Skip::SharesLostHistory => "shares_lost_history",
        }
    }
}

/// Whether `inst` may be promoted now, and if not, why.
pub fn eligibility(group: &Group, inst: &Instance, now: Millis) -> Result<(), Skip> {
    eligibility_with(group, inst, now, false)
}

/// As [`eligibility`]; `allow_master` also admits an instance that already
/// reports itself master (a stray promotion holding the data), which is
/// only wanted when the advertised master lost its data.
pub fn eligibility_with(
    group: &Group,
    inst: &Instance,
    now: Millis,
    allow_master: bool,
) -> Result<(), Skip> {
    if inst.demoted {
        return Err(Skip::Demoted);
    }
    if inst.retiring {
        return Err(Skip::Retiring);
    }
    if inst.sdown {
        return Err(Skip::Down);
    }
    if inst.failure.is_some() {
        return Err(Skip::Disconnected);
    }
    if now.saturating_sub(inst.last_ok) > MAX_PING_SILENCE {
        return Err(Skip::Silent);
    }
    let Some(info) = &inst.info else {
        return Err(Skip::StaleInfo);
    };
    if now.saturating_sub(inst.info_at) > MAX_INFO_AGE {
        return Err(Skip::StaleInfo);
    }
    if info.priority == 0 {
        return Err(Skip::PriorityZero);
    }
    let link_down_secs = match &info.role {
        // Valkey reports `master_link_down_since_seconds:-1` (no value
        // here) until the first sync completes, and offset 1 (0 on a
        // master) with no history at all.
        Role::Replica {
            link_up: false,
            link_down_secs: None,
            ..
        } if info.offset <= 1 => return Err(Skip::NeverSynced),
        Role::Replica { link_down_secs, .. } => link_down_secs,
        Role::Master if allow_master => &None,
        Role::Master => return Err(Skip::NotReplica),
    };
    if let Some(secs) = link_down_secs {
        // Sentinel's rule: the replica's link may have been down for as
        // long as the master has, plus ten down-after periods.
        let master_down_for = group
            .master_instance()
            .map_or(0, |m| now.saturating_sub(m.last_ok));
        let allowed = master_down_for.saturating_add(group.spec.down_after.saturating_mul(10));
        if secs.saturating_mul(1000) > allowed {
            return Err(Skip::LongLinkDown);
        }
    }
    Ok(())
}

/// The replica to promote, if any. After the master lost its data (its
/// new history is `lost_replid`), instances on that history are excluded
/// and stray masters are admitted.
pub fn choose_with(group: &Group, now: Millis, lost_replid: Option<&str>) -> Option<Addr> {
    best(&assess(group, now, lost_replid)).map(|i| i.addr.clone())
}

/// The replica a planned switchover promotes: [`choose_with`]'s choice
/// among the replicas whose link to the master is up, if any is. The
/// switchover pauses the master's writes until its choice has caught up,
/// and a replica still (re)synchronising cannot catch up: the pause would
/// last until the sync is done, or the switchover would give up.
pub fn choose_linked(group: &Group, now: Millis, lost_replid: Option<&str>) -> Option<Addr> {
    let assessed = assess(group, now, lost_replid);
    let linked: Vec<_> = assessed
        .iter()
        .filter(|(i, _)| {
            i.info
                .as_ref()
                .is_some_and(|x| matches!(x.role, Role::Replica { link_up: true, .. }))
        })
        .cloned()
        .collect();
    best(&linked)
        .or_else(|| best(&assessed))
        .map(|i| i.addr.clone())
}

/// Every instance but the master, in address order, with whether it may
/// be promoted now and if not why ([`choose_with`]'s rules).
pub fn assess<'g>(
    group: &'g Group,
    now: Millis,
    lost_replid: Option<&str>,
) -> Vec<(&'g Instance, Result<(), Skip>)> {
    let allow_master = lost_replid.is_some();
    group
        .instances
        .values()
        .filter(|i| i.addr != group.master)
        .map(|i| {
            let lost = lost_replid.is_some_and(|r| i.info.as_ref().is_some_and(|x| x.replid == r));
            let verdict = if lost {
                Err(Skip::SharesLostHistory)
            } else {
                eligibility_with(group, i, now, allow_master)
            };
            (i, verdict)
        })
        .collect()
}

/// The best of the admitted instances of an [`assess`]ment.
pub fn best<'g>(assessed: &[(&'g Instance, Result<(), Skip>)]) -> Option<&'g Instance> {
    assessed
        .iter()
        .filter(|(i, verdict)| verdict.is_ok() && i.info.is_some())
        .map(|(i, _)| *i)
        .min_by(|a, b| rank(a, b))
}

/// The order of preference: lowest priority, highest offset, smallest run
/// id, then address. Instances without a report come last.
pub fn rank(a: &Instance, b: &Instance) -> Ordering {
    match (&a.info, &b.info) {
        (Some(ai), Some(bi)) => ai
            .priority
            .cmp(&bi.priority)
            .then(bi.offset.cmp(&ai.offset))
            .then(ai.run_id.cmp(&bi.run_id))
            .then(a.addr.cmp(&b.addr)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.addr.cmp(&b.addr),
    }
}
