//! A master pod on its way out hands the master role over first.
//!
//! Whatever deletes the master's pod (`kubectl delete pod`, an eviction,
//! a drain, a scale-down, a rolling update), the API server first sets
//! its `deletionTimestamp`, and the kubelet runs the pod's `preStop` hook
//! before Valkey gets SIGTERM. The hook (`render/pod.rs`) waits, bounded,
//! while its Valkey is a master with replicas. The reconciler watches the
//! pods, so the timestamp brings it here, and it asks the runtime for the
//! switchover that `SENTINEL FAILOVER` starts: it pauses writes, waits
//! for the chosen replica to catch up, and loses nothing. Once the old
//! master is a replica, the hook returns and the pod stops as a replica.
//!
//! The switchover waits until the CR's pods have been still for a moment
//! (`quiet.rs`): the deletion itself made kube-proxy sync, and the
//! `-master` Service's move would otherwise wait out the rest of its sync
//! period. Writes go on to the terminating master meanwhile.
//!
//! Why the reconciler asks and the hook only waits: a hook that asked
//! would need a credential that may fail groups over on Valkyrie's
//! Sentinel port, in every Valkey pod. This way the authority stays with
//! Valkyrie, and one reconciler (the Lease holder) asks once.

use std::time::Duration;

use ::kube::ResourceExt;
use ::kube::runtime::events::EventType;
use k8s_openapi::api::core::v1::Pod;

use super::context::Context;
use super::status;
use crate::core::AdminError;
use crate::kube::crd::ValkeyCluster;
use crate::kube::error::Error;
use crate::kube::render::Names;
use crate::runtime::Refusal;
use crate::topology::GroupView;

/// What became of a switchover asked for: the event to publish.
pub(super) type Note = (EventType, &'static str, String);

/// What [`hand_over`] did.
#[derive(Debug)]
pub(super) enum HandOver {
    /// Nothing to hand over, or the master moved already.
    Nothing,
    /// Asked: the event to publish, if any.
    Asked(Option<Note>),
    /// The master's pod is being deleted, but the pods have not been still
    /// long enough: look again in this long.
    Waiting(Duration),
}

/// Starts a switchover when the group's master pod, among `pods` (the
/// CR's, as listed for this reconcile), is being deleted, once the pods
/// have been still for the `quiet_in` left.
pub(super) async fn hand_over(
    vc: &ValkeyCluster,
    names: &Names,
    group_name: &str,
    group: &GroupView,
    pods: &[Pod],
    quiet_in: Duration,
    ctx: &Context,
) -> Result<HandOver, Error> {
    if !status::master_up(group) || group.failover_in_progress {
        return Ok(HandOver::Nothing);
    }
    let master = status::current_master(names, group);
    if master.pod == group.master.host {
        return Ok(HandOver::Nothing); // not one of this CR's pods
    }
    let deleting = pods
        .iter()
        .any(|p| p.name_any() == master.pod && p.metadata.deletion_timestamp.is_some());
    if !deleting {
        return Ok(HandOver::Nothing);
    }
    if !quiet_in.is_zero() {
        return Ok(HandOver::Waiting(quiet_in));
    }
    // The view was read before the API calls: a failover may have moved
    // the master since, and a switchover would then move the new one.
    let still = ctx
        .handle
        .topology
        .borrow()
        .groups
        .get(group_name)
        .is_some_and(|g| {
            g.master == group.master && status::master_up(g) && !g.failover_in_progress
        });
    if !still {
        return Ok(HandOver::Nothing);
    }
    ctx.gate()?;
    match ctx
        .handle
        .switch_over(group_name.to_owned(), group.master.clone())
        .await
    {
        Ok(()) => {
            let note = format!(
                "master pod {} is being deleted: switchover started",
                master.pod
            );
            tracing::info!(cr = %vc.name_any(), "{note}");
            Ok(HandOver::Asked(Some((
                EventType::Normal,
                "SwitchoverBeforeDeletion",
                note,
            ))))
        }
        // Moved already (this view was older than an earlier request's
        // switchover): what was asked for.
        Err(Refusal::Core(AdminError::MasterMoved)) => {
            tracing::info!(cr = %vc.name_any(), "switchover not asked again: the master moved already");
            Ok(HandOver::Nothing)
        }
        Err(refusal) => {
            let note = format!(
                "master pod {} is being deleted: switchover refused: {refusal}",
                master.pod
            );
            tracing::warn!(cr = %vc.name_any(), "{note}");
            Ok(HandOver::Asked(
                (!matches!(refusal, Refusal::ShuttingDown)).then_some((
                    EventType::Warning,
                    "SwitchoverRefused",
                    note,
                )),
            ))
        }
    }
}
