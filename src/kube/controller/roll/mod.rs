//! Rolling updates and scales owned by the reconciler. The StatefulSet is
//! on `OnDelete`, so a new pod template changes no pod by itself: each
//! reconcile observes the pods and the group, asks [`plan`] for the next
//! step, and takes it, re-checking the group first. The order (replicas
//! one at a time, each back in sync; then a switchover; a scale-down
//! that would remove the master waits for a switchover first) is in
//! [`plan`]'s docs.
//!
//! The ordinals a scale-down removes, and the pods being deleted, are
//! marked retiring before any switchover or deletion, in the CR's status
//! and so in every Valkyrie ([`retiring`]): none promotes them, and none
//! counts them in the write fence.

use std::time::Duration;

use ::kube::ResourceExt;
use ::kube::api::{Api, DeleteParams, Preconditions};
use ::kube::runtime::events::EventType;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::context::Context;
use super::handover::Note;
use super::status::{self, Report};
use crate::core::AdminError;
use crate::core::group::write_fence::majority;
use crate::kube::crd::{ValkeyCluster, WriteFenceMode};
use crate::kube::error::Error;
use crate::kube::render::Names;
use crate::runtime::Refusal;
use crate::topology::GroupView;

pub mod plan;
mod retiring;

use plan::{Member, Observed, Plan, PodState, Step, Sync};

/// The label the StatefulSet controller puts on each pod: its revision.
const LABEL_REVISION: &str = "controller-revision-hash";

/// What one reconcile decided.
#[derive(Debug)]
pub struct Decision {
    /// The StatefulSet's size to apply (`None`: `spec.replicas`).
    pub size: Option<i32>,
    /// The plan, when the pods could be observed.
    pub plan: Option<(Observed, Plan)>,
}

/// Observes the pods (`pods`, the CR's as listed for this reconcile) and
/// the group and plans; marks the leaving pods retiring in the runtime.
pub(super) async fn decide(
    vc: &ValkeyCluster,
    names: &Names,
    group_name: &str,
    group: &GroupView,
    pods: &[Pod],
    ctx: &Context,
) -> Result<Decision, Error> {
    let ns = names.namespace.as_str();
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), ns);
    let Some(sts) = sets
        .get_opt(&names.name)
        .await
        .map_err(|e| Error::api(format!("get StatefulSet {ns}/{}", names.name), e))?
    else {
        return Ok(Decision {
            size: None,
            plan: None,
        });
    };
    let observed = observe(vc, names, &sts, pods, group, ctx);
    let plan = plan::plan(&observed);
    retiring::mark(
        vc,
        names,
        group_name,
        &plan::retiring(&observed, &plan),
        ctx,
    )
    .await?;
    Ok(Decision {
        size: Some(plan.size),
        plan: Some((observed, plan)),
    })
}

/// What the plan is decided from.
fn observe(
    vc: &ValkeyCluster,
    names: &Names,
    sts: &StatefulSet,
    pods: &[Pod],
    group: &GroupView,
    ctx: &Context,
) -> Observed {
    let size = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let revision = sts
        .status
        .as_ref()
        .filter(|s| s.observed_generation >= sts.metadata.generation)
        .and_then(|s| s.update_revision.clone());
    let now = Timestamp::try_from((ctx.settings.wall_clock)()).unwrap_or(Timestamp::UNIX_EPOCH);
    let since = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or(0, |t| {
            u64::try_from(now.as_second() - t.0.as_second()).unwrap_or(0)
        })
    };
    let now_ms = ctx.handle.now_ms();
    // Every ordinal the StatefulSet has or will have, and any pod beyond
    // (still being removed by a scale-down).
    let beyond = pods
        .iter()
        .filter_map(|p| p.name_any().rsplit_once('-')?.1.parse::<i32>().ok())
        .max()
        .map_or(0, |n| n + 1);
    let members = (0..vc.spec.replicas.max(size).max(beyond))
        .map(|ordinal| {
            let name = names.pod(u32::try_from(ordinal).unwrap_or(0));
            let pod = pods.iter().find(|p| p.name_any() == name);
            let state = match pod {
                None => PodState::Missing,
                Some(p) if p.metadata.deletion_timestamp.is_some() => PodState::Terminating,
                Some(p) if ready(p) => PodState::Ready,
                Some(_) => PodState::Starting,
            };
            let host = names.pod_fqdn(
                u32::try_from(ordinal).unwrap_or(0),
                &ctx.settings.cluster_domain,
            );
            // Before the StatefulSet reports its update revision, every
            // pod counts as current: nothing is deleted on a guess.
            let current = match (&revision, pod) {
                (Some(r), Some(p)) => p.labels().get(LABEL_REVISION) == Some(r),
                _ => true,
            };
            let age_secs = pod.map_or(0, |p| {
                since(
                    p.metadata
                        .deletion_timestamp
                        .as_ref()
                        .or(p.metadata.creation_timestamp.as_ref()),
                )
            });
            Member {
                ordinal,
                current,
                pod: state,
                sync: sync_of(group, &host, age_secs.saturating_mul(1000), now_ms),
                age_secs,
            }
        })
        .collect();
    Observed {
        want: vc.spec.replicas,
        size,
        members,
        failover: group.failover_in_progress,
        strict_need: strict_need(vc, size, group),
        patience_secs: ctx.settings.roll_patience.as_secs(),
    }
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// With the strict fence, the replicas the setting in force asks for
/// (before one is in force: a majority of the replicas there are).
fn strict_need(vc: &ValkeyCluster, size: i32, group: &GroupView) -> Option<u64> {
    let strict = vc
        .spec
        .monitoring
        .as_ref()
        .is_some_and(|m| m.write_fence == WriteFenceMode::Strict);
    let there = u64::try_from(size.saturating_sub(1)).unwrap_or(0);
    strict.then(|| group.fence.as_ref().map_or(majority(there), |f| f.replicas))
}

/// What Valkyrie sees of the Valkey at `host`, whose pod is `age_ms`
/// old: an INFO older than the pod is the pod before (same name).
fn sync_of(group: &GroupView, host: &str, age_ms: u64, now_ms: u64) -> Sync {
    if group.master.host == host {
        return if status::master_up(group) {
            Sync::Master
        } else {
            Sync::Unknown
        };
    }
    let Some(r) = group.replicas.iter().find(|r| r.addr.host == host) else {
        return Sync::Unknown;
    };
    if now_ms.saturating_sub(r.info_at) >= age_ms {
        return Sync::Unknown;
    }
    match &r.upstream {
        Some(u) if !r.down && u.link_up && u.master == group.master => {
            let behind = group.master_details.offset.saturating_sub(r.offset);
            if behind <= plan::CAUGHT_UP_BYTES {
                Sync::Synced
            } else {
                Sync::Behind(behind)
            }
        }
        _ => Sync::Unlinked,
    }
}

/// What [`act`] did.
#[derive(Debug)]
pub(super) struct Acted {
    /// The `Updating` condition's report.
    pub report: Report,
    /// The event to publish.
    pub note: Option<Note>,
    /// Look again in this long: the switchover waits for the pods to be
    /// still (`quiet.rs`).
    pub again_in: Option<Duration>,
}

/// Takes the plan's step, re-checking first that the group is where it
/// was observed; a switchover only once the pods have been still for the
/// `quiet_in` left.
pub(super) async fn act(
    vc: &ValkeyCluster,
    names: &Names,
    group_name: &str,
    group: &GroupView,
    decided: &(Observed, Plan),
    quiet_in: Duration,
    ctx: &Context,
) -> Result<Acted, Error> {
    let (observed, plan) = decided;
    let mut report = report(names, observed, plan);
    let mut again_in = None;
    let unchanged = || {
        ctx.handle
            .topology
            .borrow()
            .groups
            .get(group_name)
            .is_some_and(|g| {
                g.master == group.master
                    && g.config_epoch == group.config_epoch
                    && status::master_up(g)
                    && !g.failover_in_progress
            })
    };
    let note = match &plan.step {
        Step::Delete(ordinal) if unchanged() => {
            // Retiring before it is deleted, not at the next reconcile: a
            // failover in between must not promote it.
            let mut retiring = plan::retiring(observed, plan);
            retiring.insert(*ordinal);
            retiring::mark(vc, names, group_name, &retiring, ctx).await?;
            retiring::fence_relaxed(observed, &retiring, group_name, ctx).await;
            let pod = names.pod(u32::try_from(*ordinal).unwrap_or(0));
            delete_pod(names, &pod, ctx).await?;
            let note = format!("rolling update: pod {pod} deleted, a replica out of date");
            tracing::info!(cr = %vc.name_any(), "{note}");
            Some((EventType::Normal, "UpdatingPod", note))
        }
        Step::Switchover if !quiet_in.is_zero() => {
            report.message = format!(
                "{}, once the pods have been still for {} ms (kube-proxy's sync)",
                report.message,
                ctx.settings.endpoints_quiet.as_millis()
            );
            again_in = Some(quiet_in);
            None
        }
        Step::Switchover if unchanged() => {
            ctx.gate()?;
            let why = if plan.size > observed.want {
                "the scale-down removes the master's pod"
            } else {
                "the master's pod is out of date"
            };
            match ctx
                .handle
                .switch_over(group_name.to_owned(), group.master.clone())
                .await
            {
                Ok(()) => Some((
                    EventType::Normal,
                    "SwitchoverForUpdate",
                    format!("{why}: switchover started"),
                )),
                // An earlier request moved it: the next reconcile plans
                // from there.
                Err(Refusal::Core(AdminError::MasterMoved)) => {
                    tracing::info!(cr = %vc.name_any(), "switchover not asked again: the master moved already");
                    None
                }
                Err(e) => Some((
                    EventType::Warning,
                    "SwitchoverRefused",
                    format!("{why}: switchover refused: {e}"),
                )),
            }
        }
        Step::Stalled { ordinal, why } => Some((
            EventType::Warning,
            "UpdateStalled",
            format!(
                "rolling update stalled on pod {}-{ordinal}: {why}",
                names.name
            ),
        )),
        _ => None,
    };
    Ok(Acted {
        report,
        note,
        again_in,
    })
}

/// Deletes pod `name` of a replica (the uid read now, as a precondition).
async fn delete_pod(names: &Names, name: &str, ctx: &Context) -> Result<(), Error> {
    let ns = names.namespace.as_str();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let Some(pod) = pods
        .get_opt(name)
        .await
        .map_err(|e| Error::api(format!("get Pod {ns}/{name}"), e))?
    else {
        return Ok(());
    };
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    ctx.gate()?;
    match pods.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(::kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(Error::api(format!("delete Pod {ns}/{name}"), e)),
    }
}

/// The `Updating` condition for `plan`.
pub fn report(names: &Names, observed: &Observed, plan: &Plan) -> Report {
    let pod = |n: &i32| format!("{}-{n}", names.name);
    let (reason, mut message) = match &plan.step {
        Step::Steady if !plan.updating(observed) => {
            ("UpToDate", "every pod runs the current revision".to_owned())
        }
        Step::Steady => ("Scaling", format!("scaling to {} pods", plan.size)),
        Step::Wait { ordinal: None, why } => ("Waiting", format!("waiting: {why}")),
        Step::Wait {
            ordinal: Some(n),
            why,
        } => ("Waiting", format!("waiting for pod {}: {why}", pod(n))),
        Step::Stalled { ordinal, why } => (
            "Stalled",
            format!(
                "stalled on pod {} for more than {} s: {why}",
                pod(ordinal),
                observed.patience_secs
            ),
        ),
        Step::Delete(n) => ("UpdatingPod", format!("deleting pod {}", pod(n))),
        Step::Switchover => ("SwitchingOver", "switching the master over".to_owned()),
    };
    let reason = match &plan.refused {
        Some(why) => {
            message = format!("{why}; {message}");
            "ScaleDownRefused"
        }
        None => reason,
    };
    Report {
        updating: plan.updating(observed),
        reason,
        message,
    }
}

#[cfg(test)]
mod tests;
