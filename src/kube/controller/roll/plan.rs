//! The next step of a rolling update or a scale, decided by a pure
//! function from what one reconcile observed: the pods (their revision,
//! their readiness, and what Valkyrie sees of them), the advertised
//! master, the size asked for and the size applied.
//!
//! The order, one step per reconcile:
//! 1. A scale-down whose removed ordinals hold the master waits for a
//!    switchover to a pod that stays; one that leaves fewer replicas than
//!    the strict fence needs is refused (the StatefulSet keeps its size).
//! 2. While any pod is away (missing, terminating, not ready) or any
//!    replica is not in sync with the master, nothing is deleted: the
//!    plan waits, and says on which pod and why; past `patience`, it says
//!    the roll is stalled on it.
//! 3. An out-of-date replica, the highest ordinal first, is deleted.
//! 4. With every replica up to date and in sync, an out-of-date master is
//!    switched over; it is then a replica like the others (step 3).
//!
//! Nothing is remembered between reconciles, so a restart of Valkyrie or
//! a new Lease holder resumes where the pods say the roll stands. The
//! master's pod is never deleted here: only a pod Valkyrie sees as a
//! replica in sync with an up master, while every other pod is back.

use std::collections::BTreeSet;
use std::fmt;

/// How far behind the master's offset a replica may be and count as
/// caught up: INFO replies are read at different moments, so a replica
/// in step under writes still trails by what arrived in between.
pub const CAUGHT_UP_BYTES: u64 = 1 << 20;

/// One pod of the StatefulSet, by ordinal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// Its ordinal.
    pub ordinal: i32,
    /// Whether the pod runs the StatefulSet's update revision.
    pub current: bool,
    /// The pod's lifecycle.
    pub pod: PodState,
    /// What Valkyrie sees of its Valkey.
    pub sync: Sync,
    /// How long it has been in its present state, in seconds.
    pub age_secs: u64,
}

/// A pod's lifecycle, as the API server reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodState {
    /// No pod with this ordinal.
    Missing,
    /// Being deleted.
    Terminating,
    /// Created, not Ready.
    Starting,
    /// Ready.
    Ready,
}

/// What Valkyrie sees of one pod's Valkey.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sync {
    /// The advertised master, up.
    Master,
    /// A replica linked to the master and caught up.
    Synced,
    /// A replica linked to the master, this many bytes behind.
    Behind(u64),
    /// A replica with no up link to the advertised master.
    Unlinked,
    /// Valkyrie does not know it (yet).
    Unknown,
}

/// What the plan was decided from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Observed {
    /// `spec.replicas`.
    pub want: i32,
    /// The StatefulSet's size as applied (0 before it exists).
    pub size: i32,
    /// Every ordinal below `max(want, size)`, and every pod that exists
    /// beyond (a pod the StatefulSet is still removing), in order.
    pub members: Vec<Member>,
    /// A failover or switchover is running.
    pub failover: bool,
    /// With the strict fence, the replicas it needs (it never relaxes).
    pub strict_need: Option<u64>,
    /// How long a pod may stay away before the roll is stalled on it.
    pub patience_secs: u64,
}

/// Why the roll waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wait {
    /// A failover or switchover is running.
    FailoverRuns,
    /// No master is up.
    NoMaster,
    /// The pod does not exist (yet).
    Missing,
    /// The pod is being deleted.
    Terminating,
    /// The pod is not Ready.
    NotReady,
    /// Valkyrie does not know its Valkey yet.
    Unknown,
    /// Its Valkey has no up link to the master.
    Unlinked,
    /// Its Valkey is this many bytes behind the master.
    Behind(u64),
}

/// The step to take now.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Every pod is up to date: nothing to do.
    Steady,
    /// Nothing to do until the pod (or the group) is back.
    Wait {
        /// The pod waited on (`None`: the group).
        ordinal: Option<i32>,
        /// Why.
        why: Wait,
    },
    /// As `Wait`, past the patience: reported, nothing deleted.
    Stalled {
        /// The pod that did not come back.
        ordinal: i32,
        /// Why.
        why: Wait,
    },
    /// Delete this out-of-date replica's pod.
    Delete(i32),
    /// Switch the master over to an up-to-date replica that stays.
    Switchover,
}

/// What a reconcile does about the pods.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The size to apply to the StatefulSet.
    pub size: i32,
    /// The step.
    pub step: Step,
    /// A scale-down refused, and why.
    pub refused: Option<String>,
}

impl Plan {
    /// Whether a roll or a scale is under way (the `Updating` condition):
    /// also while the size asked for is applied and pods beyond it go.
    pub fn updating(&self, o: &Observed) -> bool {
        self.size != o.want
            || o.size != o.want
            || o.members
                .iter()
                .any(|m| m.ordinal >= o.want && m.pod != PodState::Missing)
            || !matches!(self.step, Step::Steady)
            || self.refused.is_some()
    }
}

/// The ordinals no switchover or failover may promote: the pods being
/// deleted, and every pod a scale-down removes (unless it is refused),
/// as long as it exists, also once the smaller size is applied.
pub fn retiring(o: &Observed, plan: &Plan) -> BTreeSet<i32> {
    o.members
        .iter()
        .filter(|m| {
            m.pod == PodState::Terminating
                || (plan.refused.is_none() && m.ordinal >= o.want && m.pod != PodState::Missing)
        })
        .map(|m| m.ordinal)
        .collect()
}

/// The plan for `o`.
pub fn plan(o: &Observed) -> Plan {
    let master = o
        .members
        .iter()
        .find(|m| m.sync == Sync::Master)
        .map(|m| m.ordinal);
    let mut size = o.want.max(0);
    let mut refused = None;
    if o.want < o.size {
        let left = u64::try_from(o.want.saturating_sub(1)).unwrap_or(0);
        if let Some(need) = o.strict_need.filter(|n| left < *n) {
            refused = Some(format!(
                "a scale-down to {} pods leaves {left} replicas; the strict write fence needs {need}",
                o.want
            ));
            size = o.size;
        } else if master.is_none_or(|m| m >= o.want) {
            size = o.size;
            let step = match master {
                _ if o.failover => wait(None, Wait::FailoverRuns),
                None => wait(None, Wait::NoMaster),
                Some(_) => Step::Switchover,
            };
            return Plan {
                size,
                step,
                refused,
            };
        }
    }
    Plan {
        size,
        step: roll(o, size, master),
        refused,
    }
}

fn wait(ordinal: Option<i32>, why: Wait) -> Step {
    Step::Wait { ordinal, why }
}

/// The roll's step over the pods below `size`.
fn roll(o: &Observed, size: i32, master: Option<i32>) -> Step {
    let members: Vec<&Member> = o.members.iter().filter(|m| m.ordinal < size).collect();
    if members.iter().all(|m| m.current) {
        return Step::Steady;
    }
    if o.failover {
        return wait(None, Wait::FailoverRuns);
    }
    let Some(master) = master else {
        return wait(None, Wait::NoMaster);
    };
    for m in &members {
        let why = match (m.pod, m.sync) {
            (PodState::Missing, _) => Wait::Missing,
            (PodState::Terminating, _) => Wait::Terminating,
            (PodState::Starting, _) => Wait::NotReady,
            (PodState::Ready, Sync::Master | Sync::Synced) => continue,
            (PodState::Ready, Sync::Unknown) => Wait::Unknown,
            (PodState::Ready, Sync::Unlinked) => Wait::Unlinked,
            (PodState::Ready, Sync::Behind(b)) => Wait::Behind(b),
        };
        return if m.age_secs > o.patience_secs {
            Step::Stalled {
                ordinal: m.ordinal,
                why,
            }
        } else {
            wait(Some(m.ordinal), why)
        };
    }
    match members
        .iter()
        .rev()
        .find(|m| !m.current && m.ordinal != master)
    {
        Some(m) => Step::Delete(m.ordinal),
        None => Step::Switchover,
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::FailoverRuns => f.write_str("a failover is running"),
            Wait::NoMaster => f.write_str("no master is up"),
            Wait::Missing => f.write_str("the pod does not exist yet"),
            Wait::Terminating => f.write_str("the pod is being deleted"),
            Wait::NotReady => f.write_str("the pod is not Ready"),
            Wait::Unknown => f.write_str("Valkyrie does not know its Valkey yet"),
            Wait::Unlinked => f.write_str("its Valkey has no up link to the master"),
            Wait::Behind(b) => write!(f, "its Valkey is {b} bytes behind the master"),
        }
    }
}
