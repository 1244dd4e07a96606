//! The status the reconciler writes, computed by a pure function from what
//! it observed: whether the CR is valid, the runtime's view of the group,
//! and the StatefulSet's status. The failover never writes the status: the
//! current master and its config epoch are copied from the converged
//! topology at each reconcile, which the topology's changes trigger.

use k8s_openapi::api::apps::v1::StatefulSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::kube::crd::{Condition, CurrentMaster, Phase, ValkeyCluster, ValkeyClusterStatus};
use crate::kube::labels::pod_of;
use crate::kube::render::Names;
use crate::topology::GroupView;

/// Condition `Ready`: every pod ready and the master up.
pub const READY: &str = "Ready";
/// Condition `Updating`: a rolling update or a scale under way.
pub const UPDATING: &str = "Updating";
/// Condition `Valid`: the spec can be served.
pub const VALID: &str = "Valid";

/// What the `Updating` condition says (the roll's report).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// A roll or a scale is under way.
    pub updating: bool,
    /// The condition's reason.
    pub reason: &'static str,
    /// For humans: which pod, and why it waits.
    pub message: String,
}

/// Why a CR is not served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// The Valid condition's reason (`TLSReplicationRequired`, `RenderError`…).
    pub reason: String,
    /// For humans.
    pub message: String,
}

/// What the status is computed from.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The CR.
    pub vc: &'a ValkeyCluster,
    /// Its names.
    pub names: &'a Names,
    /// `Err` when the spec cannot be served.
    pub valid: Result<(), Invalid>,
    /// The runtime's view of the CR's group (`None`: not monitored here).
    pub group: Option<&'a GroupView>,
    /// The StatefulSet's status, once it exists.
    pub stateful_set: Option<&'a StatefulSetStatus>,
    /// Now, for the conditions that change.
    pub now: Time,
    /// The rolling update's report (`None`: no plan this time).
    pub roll: Option<&'a Report>,
}

/// The current master of `group`, as the status names it.
pub fn current_master(names: &Names, group: &GroupView) -> CurrentMaster {
    let host = &group.master.host;
    let ours = format!(".{}.{}.svc.", names.headless(), names.namespace);
    let pod = if host.contains(&ours) {
        pod_of(host).to_owned()
    } else {
        host.clone()
    };
    CurrentMaster {
        pod,
        address: format!("{host}:{}", group.master.port),
    }
}

/// Whether the group's master is known to be up: not down, and its own
/// INFO says it is a master (a master not reached yet is not up).
pub fn master_up(group: &GroupView) -> bool {
    !group.master_down && group.master_details.reports_master
}

/// The phase: what the CR is doing, in one word.
fn phase(o: &Observed<'_>) -> Phase {
    if o.valid.is_err() {
        return Phase::Failed;
    }
    let want = o.vc.spec.replicas;
    let existing = o.stateful_set.map_or(0, |s| s.replicas);
    let ready = o.stateful_set.and_then(|s| s.ready_replicas).unwrap_or(0);
    let master_up = o.group.is_some_and(master_up);
    match o.group {
        Some(g) if g.failover_in_progress => Phase::FailingOver,
        _ if ready == 0 && existing == 0 => Phase::Pending,
        _ if !master_up => Phase::Bootstrapping,
        _ if existing != want || o.roll.is_some_and(|r| r.updating) => Phase::Updating,
        _ if ready < want => Phase::Degraded,
        _ => Phase::Running,
    }
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Pending => "Pending",
        Phase::Bootstrapping => "Bootstrapping",
        Phase::Running => "Running",
        Phase::Degraded => "Degraded",
        Phase::FailingOver => "FailingOver",
        Phase::Updating => "Updating",
        Phase::Failed => "Failed",
        Phase::Deleting => "Deleting",
    }
}

/// A condition of `generation`, keeping the last transition time of the
/// previous one when its status did not change.
fn condition(
    previous: &[Condition],
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// The status to write.
pub fn status(o: &Observed<'_>) -> ValkeyClusterStatus {
    let previous = o.vc.status.clone().unwrap_or_default();
    let generation = o.vc.metadata.generation;
    let phase = phase(o);
    let ready = o.stateful_set.and_then(|s| s.ready_replicas).unwrap_or(0);
    let valid = match &o.valid {
        Ok(()) => condition(
            &previous.conditions,
            VALID,
            true,
            "Valid",
            "the spec can be served".into(),
            generation,
            &o.now,
        ),
        Err(i) => condition(
            &previous.conditions,
            VALID,
            false,
            &i.reason,
            i.message.clone(),
            generation,
            &o.now,
        ),
    };
    let ready_condition = condition(
        &previous.conditions,
        READY,
        phase == Phase::Running,
        phase_name(phase),
        format!("{ready}/{} pods ready", o.vc.spec.replicas),
        generation,
        &o.now,
    );
    let mut conditions = vec![ready_condition, valid];
    let updating = match o.roll {
        Some(r) => Some((r.updating, r.reason, r.message.clone())),
        // No plan this time: what the status said stays.
        None => previous
            .conditions
            .iter()
            .find(|c| c.type_ == UPDATING)
            .map(|c| (c.status == "True", "", c.message.clone())),
    };
    if let Some((on, reason, message)) = updating {
        let reason = match reason {
            "" => previous
                .conditions
                .iter()
                .find(|c| c.type_ == UPDATING)
                .map_or("UpToDate".to_owned(), |c| c.reason.clone()),
            r => r.to_owned(),
        };
        conditions.push(condition(
            &previous.conditions,
            UPDATING,
            on,
            &reason,
            message,
            generation,
            &o.now,
        ));
    }
    let (current_master, config_epoch, synced) = match o.group {
        Some(g) => (
            Some(current_master(o.names, g)),
            i64::try_from(g.config_epoch).ok(),
            Some(synced_replicas(g)),
        ),
        // Not monitored here (yet): what the status said stays.
        None => (
            previous.current_master.clone(),
            previous.config_epoch,
            previous.synced_replicas,
        ),
    };
    ValkeyClusterStatus {
        observed_generation: generation,
        phase: Some(phase),
        conditions,
        replicas: Some(o.stateful_set.map_or(0, |s| s.replicas)),
        ready_replicas: Some(ready),
        synced_replicas: synced,
        selector: Some(o.names.selector()),
        current_master,
        config_epoch,
        // Written by the roll, under a field manager of its own.
        retiring_pods: None,
    }
}

/// Replicas whose link to the advertised master is up.
fn synced_replicas(g: &GroupView) -> i32 {
    let n = g
        .replicas
        .iter()
        .filter(|r| !r.down)
        .filter(|r| {
            r.upstream
                .as_ref()
                .is_some_and(|u| u.link_up && u.master == g.master)
        })
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
