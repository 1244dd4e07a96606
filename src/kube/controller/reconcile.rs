//! One reconcile of one `ValkeyCluster`, level-triggered and idempotent:
//! nothing is kept between reconciles but caches, so a crash between any
//! two steps is harmless.
//!
//! Apply: the finalizer first (kube's helper), then, for a CR that can be
//! served: a switchover started when the master's pod is being deleted
//! (`handover.rs`), the roll's plan (`roll/`), the roles (the `-master`
//! Service's selector and the role labels) repaired from the converged
//! topology, the children (`children.rs`), the roll's step, and the
//! status. A switchover the reconciler asks for waits until the pods have
//! been still for a moment (`quiet.rs`).
//!
//! Cleanup (the CR is being deleted): the group leaves monitoring here
//! (every other Valkyrie removes it when it sees the deletion), an event
//! says so, and the finalizer goes; the children follow by their owner
//! references.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ::kube::api::{Api, ListParams};
use ::kube::runtime::controller::Action;
use ::kube::runtime::events::{Event, EventType};
use ::kube::runtime::finalizer::{self, finalizer};
use ::kube::runtime::reflector::ObjectRef;
use ::kube::{Resource, ResourceExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tokio::time::Instant;

use super::children::apply_children;
use super::context::{Context, FIELD_MANAGER, FINALIZER};
use super::handover::{HandOver, hand_over};
use super::roll;
use super::status::{self, Invalid};
use crate::kube::crd::{Phase, ValkeyCluster, master_name};
use crate::kube::error::Error;
use crate::kube::groups::{Outcome, validate};
use crate::kube::labels::LabelError;
use crate::kube::metrics;
use crate::kube::render::{Names, RenderError};
use crate::topology::GroupView;

/// Reconciles `vc`: the controller's reconcile function.
pub async fn reconcile(vc: Arc<ValkeyCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    let key = ObjectRef::from_obj(&*vc);
    let result = with_finalizer(vc.clone(), &ctx).await;
    metrics::reconciled(result.as_ref().map(|_| ()), started.elapsed());
    match &result {
        Ok(_) => ctx.succeeded(&key),
        Err(Error::NotLeader) => {
            tracing::info!(cr = %key, "reconcile stopped: no longer the leader")
        }
        Err(e) => {
            tracing::warn!(cr = %key, "reconcile failed: {e}");
            publish(
                &ctx,
                &vc,
                EventType::Warning,
                e.event_reason(),
                e.to_string(),
            )
            .await;
        }
    }
    result
}

async fn with_finalizer(vc: Arc<ValkeyCluster>, ctx: &Context) -> Result<Action, Error> {
    ctx.gate()?;
    let ns = vc
        .namespace()
        .ok_or(RenderError::MissingMetadata("namespace"))?;
    let api: Api<ValkeyCluster> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, vc, |event| async move {
        match event {
            finalizer::Event::Apply(vc) => apply(vc, ctx).await,
            finalizer::Event::Cleanup(vc) => cleanup(vc, ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
            Error::Finalizer(Box::new(e))
        }
        finalizer::Error::UnnamedObject => RenderError::MissingMetadata("name").into(),
        finalizer::Error::InvalidFinalizer => Error::Invalid {
            reason: "InvalidFinalizer",
            message: format!("the finalizer {FINALIZER} cannot be patched"),
        },
    })
}

/// Whether `vc` can be served, as far as the spec and the runtime say.
async fn validity(vc: &ValkeyCluster, ctx: &Context) -> Result<(), Invalid> {
    if let Err(e) = validate(vc) {
        return Err(Invalid {
            reason: e.event_reason().to_owned(),
            message: e.to_string(),
        });
    }
    match ctx
        .groups
        .entry(&ObjectRef::from_obj(vc))
        .await
        .map(|e| e.outcome)
    {
        Some(Outcome::Refused(why)) => Err(Invalid {
            reason: "GroupRefused".into(),
            message: why,
        }),
        Some(Outcome::Invalid { reason, message }) => Err(Invalid {
            reason: reason.into(),
            message,
        }),
        _ => Ok(()),
    }
}

async fn apply(vc: Arc<ValkeyCluster>, ctx: &Context) -> Result<Action, Error> {
    let ns = vc.namespace().unwrap_or_default();
    let names = Names::new(&ns, &vc.name_any());
    let mut valid = validity(&vc, ctx).await;
    let view: Option<Arc<GroupView>> = match (&valid, master_name(&vc)) {
        (Ok(()), Some(group)) => ctx.handle.topology.borrow().groups.get(&group).cloned(),
        _ => None,
    };
    // The pods as they are before this apply: the hand-over and the
    // roll's plan are decided from them, and a switchover waits until
    // they have been still for a moment (`quiet.rs`).
    let pods = match (&valid, &view) {
        (Ok(()), Some(_)) => list_pods(&names, ctx).await?,
        _ => Vec::new(),
    };
    let quiet_in = ctx.quiet.remaining(
        &ObjectRef::from_obj(&*vc),
        &pods,
        ctx.settings.endpoints_quiet,
        Instant::now(),
    );
    // Look again this soon, whatever the status says.
    let mut again_in: Option<Duration> = None;
    // First, before the children: a master pod being deleted waits in
    // its preStop hook, with writes still going to it, for this.
    if let (Some(g), Some(group)) = (&view, master_name(&vc)) {
        match hand_over(&vc, &names, &group, g, &pods, quiet_in, ctx).await? {
            HandOver::Asked(Some((type_, reason, note))) => {
                publish(ctx, &vc, type_, reason, note).await;
            }
            HandOver::Waiting(d) => again_in = Some(d),
            HandOver::Asked(None) | HandOver::Nothing => {}
        }
    }
    // The roll's plan, from the pods as they are before this apply.
    let decision = match (&valid, &view, master_name(&vc)) {
        (Ok(()), Some(g), Some(group)) => {
            Some(roll::decide(&vc, &names, &group, g, &pods, ctx).await?)
        }
        _ => None,
    };
    let size = decision.as_ref().and_then(|d| d.size);
    // Before the apply: the `-master` Service's selector is the role
    // writer's, and a Service whose selector an older Valkyrie applied
    // loses it to an apply that no longer carries one, unless the role
    // writer has taken it over first.
    if let (Ok(()), Some(_), Some(group)) = (&valid, &view, master_name(&vc)) {
        repair_labels(&vc, &names, &group, ctx).await?;
    }
    let stateful_set = if valid.is_ok() {
        match apply_children(&vc, &names, view.as_deref(), size, ctx).await {
            Ok(s) => s,
            Err(Error::Render(e)) => {
                valid = Err(Invalid {
                    reason: "RenderError".into(),
                    message: e.to_string(),
                });
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
        let sts = api
            .get_opt(&names.name)
            .await
            .map_err(|e| Error::api(format!("get StatefulSet {ns}/{}", names.name), e))?;
        sts.and_then(|s| s.status)
    };
    let mut report = None;
    if let (Some(g), Some(group), Some(planned)) = (
        &view,
        master_name(&vc),
        decision.as_ref().and_then(|d| d.plan.as_ref()),
    ) && valid.is_ok()
    {
        let acted = roll::act(&vc, &names, &group, g, planned, quiet_in, ctx).await?;
        if let Some((type_, reason, note)) = acted.note {
            publish(ctx, &vc, type_, reason, note).await;
        }
        again_in = again_in.or(acted.again_in);
        report = Some(acted.report);
    }
    let now =
        Time(Timestamp::try_from((ctx.settings.wall_clock)()).unwrap_or(Timestamp::UNIX_EPOCH));
    let new_status = status::status(&status::Observed {
        vc: &vc,
        names: &names,
        valid: valid.clone(),
        group: view.as_deref(),
        stateful_set: stateful_set.as_ref(),
        now,
        roll: report.as_ref(),
    });
    let first_of_generation =
        vc.status.as_ref().and_then(|s| s.observed_generation) != vc.metadata.generation;
    if vc.status.as_ref() != Some(&new_status) {
        write_status(&vc, &new_status, ctx).await?;
    }
    if first_of_generation {
        let (type_, reason, note) = match &valid {
            Ok(()) => (
                EventType::Normal,
                "Reconciled",
                format!("generation {} applied", vc.metadata.generation.unwrap_or(0)),
            ),
            Err(i) => (EventType::Warning, i.reason.as_str(), i.message.clone()),
        };
        publish(ctx, &vc, type_, reason, note).await;
    }
    let action = match (&valid, new_status.phase) {
        (Err(i), _) if i.reason == "GroupRefused" => {
            Action::requeue(ctx.settings.requeue_progressing)
        }
        (Err(_), _) => Action::await_change(),
        // Running with every replica synced: only changes bring it back.
        // A replica not synced yet is looked at again soon, whatever
        // the triggers, so that the status never lags for long.
        (Ok(()), Some(Phase::Running))
            if new_status.synced_replicas >= Some(vc.spec.replicas - 1)
                && !report.as_ref().is_some_and(|r| r.updating) =>
        {
            Action::requeue(ctx.settings.requeue_healthy)
        }
        (Ok(()), _) => Action::requeue(ctx.settings.requeue_progressing),
    };
    Ok(match again_in {
        Some(d) => Action::requeue(d),
        None => action,
    })
}

/// The CR's pods (those its StatefulSet selects).
async fn list_pods(names: &Names, ctx: &Context) -> Result<Vec<Pod>, Error> {
    let ns = names.namespace.as_str();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(&names.selector()))
        .await
        .map_err(|e| Error::api(format!("list Pods {ns}"), e))?;
    Ok(list.items)
}

/// Writes the reconciler's status fields by server-side apply.
async fn write_status(
    vc: &ValkeyCluster,
    status: &crate::kube::crd::ValkeyClusterStatus,
    ctx: &Context,
) -> Result<(), Error> {
    ctx.apply_status(vc, FIELD_MANAGER, json!(status)).await
}

/// Puts the roles (the `-master` Service's selector and the pods' labels)
/// where the converged topology says, when its master is one of this CR's
/// pods, is up and says it is a master, and no failover runs.
///
/// The topology is read here, not with the apply's view: a switchover
/// this apply asked for (`handover.rs`) has just pointed the Service at
/// its chosen replica (`runtime/route.rs`), and the older view, with no
/// failover running, would point it back at the master under the same
/// epoch, and the switchover's clients would wait out the route's bound.
async fn repair_labels(
    vc: &ValkeyCluster,
    names: &Names,
    group_name: &str,
    ctx: &Context,
) -> Result<(), Error> {
    let Some(view) = ctx.handle.topology.borrow().groups.get(group_name).cloned() else {
        return Ok(());
    };
    let group = view.as_ref();
    if !status::master_up(group) || group.failover_in_progress {
        return Ok(());
    }
    let master = status::current_master(names, group);
    if master.pod == group.master.host {
        return Ok(()); // not one of this CR's pods
    }
    ctx.gate()?;
    match ctx
        .labels
        .converge(
            &names.namespace,
            &names.name,
            &master.pod,
            group.config_epoch,
        )
        .await
    {
        Ok(moved) if moved.any() => {
            let service = if moved.service {
                format!("Service {}, ", names.master_service())
            } else {
                String::new()
            };
            let note = format!(
                "roles repaired ({service}pods [{}]), master {} in config epoch {}",
                moved.pods.join(", "),
                master.pod,
                group.config_epoch
            );
            publish(ctx, vc, EventType::Normal, "RoleLabelsRepaired", note).await;
            Ok(())
        }
        Ok(_) | Err(LabelError::NoSuchPod { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn cleanup(vc: Arc<ValkeyCluster>, ctx: &Context) -> Result<Action, Error> {
    ctx.gate()?;
    ctx.groups.forget(&ObjectRef::from_obj(&*vc)).await;
    ctx.quiet.forget(&ObjectRef::from_obj(&*vc));
    let note = format!(
        "monitoring of {} stopped; the children go with the ValkeyCluster",
        master_name(&vc).unwrap_or_default()
    );
    publish(ctx, &vc, EventType::Normal, "Deleting", note).await;
    Ok(Action::await_change())
}

/// Publishes an event on `vc` (best effort: a failure is only logged).
async fn publish(ctx: &Context, vc: &ValkeyCluster, type_: EventType, reason: &str, note: String) {
    if ctx.gate().is_err() {
        return;
    }
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &vc.object_ref(&())).await {
        tracing::debug!(cr = %vc.name_any(), "event {reason} not published: {e}");
    }
}
