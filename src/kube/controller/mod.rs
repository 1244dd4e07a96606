//! The reconciler: a kube-runtime `Controller` over `ValkeyCluster`s that
//! runs only in the Lease holder, the single writer of the CRs' children
//! and status.
//!
//! It owns the StatefulSet, the Services, the ConfigMap, the generated
//! Secret and the PodDisruptionBudget of each CR (applied by server-side
//! apply, field manager `valkyrie`, with a controller owner reference), and
//! watches the pods to repair their role labels. A change of the runtime's
//! topology (a failover converged, a master up or down) reconciles every
//! CR, so the status follows the failover. What one reconcile does is in
//! [`reconcile`]; the status it writes in [`status`].
//!
//! Leadership gates it twice: [`run`] is only called while leading and is
//! dropped (its reconciles cancelled) the moment leadership is lost, and
//! every write first checks that the term it started in still holds.
//!
//! Errors are retried with a per-CR exponential backoff (1 s doubling to 5
//! minutes, ±20 %), except a conflict (1 s), a refusal by RBAC (5 minutes:
//! a fix of the ClusterRole triggers no watch) and a missing Secret (30 s).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ::kube::runtime::controller::{self, Action, Controller};
use ::kube::runtime::reflector::ObjectRef;
use ::kube::runtime::watcher;
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use tokio::sync::watch;

use super::crd::ValkeyCluster;
use super::error::Error;
use super::render::names::{LABEL_INSTANCE, LABEL_MANAGED_BY};
use crate::core::Addr;
use crate::topology::{GroupView, Topology};

mod children;
mod context;
mod handover;
mod quiet;
pub mod reconcile;
pub mod roll;
pub mod status;

pub use context::{Context, FIELD_MANAGER, FINALIZER, REPORTER, RETIRING_MANAGER, Settings};

/// How a failed reconcile is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    /// Not by this reconciler: it is stopping (no longer the leader).
    Never,
    /// After this delay.
    After(Duration),
    /// After the CR's next exponential-backoff delay.
    Backoff,
}

fn retry(err: &Error) -> Retry {
    match err {
        Error::NotLeader => Retry::Never,
        // A raced write: read again soon.
        _ if err.status() == Some(409) => Retry::After(Duration::from_secs(1)),
        // RBAC: fixing the ClusterRole triggers no watch.
        _ if err.status() == Some(403) => Retry::After(Duration::from_secs(300)),
        // The Secret's watch (generated ones) usually comes first.
        Error::SecretMissing { .. } => Retry::After(Duration::from_secs(30)),
        _ => Retry::Backoff,
    }
}

/// What decides the requeue after a failed reconcile.
fn error_policy(vc: Arc<ValkeyCluster>, err: &Error, ctx: Arc<Context>) -> Action {
    match retry(err) {
        Retry::Never => Action::await_change(),
        Retry::After(d) => Action::requeue(d),
        Retry::Backoff => Action::requeue(ctx.next_delay(&ObjectRef::from_obj(&*vc))),
    }
}

/// The part of a group's view whose change is worth a reconcile: the
/// master, its epoch and health, the failover, the replicas' health.
type Summary = (Addr, u64, bool, bool, Vec<(Addr, bool, bool)>);

/// A group's [`Summary`].
fn summary(g: &GroupView) -> Summary {
    let replicas = g
        .replicas
        .iter()
        .map(|r| {
            // Linked to the advertised master: what `syncedReplicas`
            // counts (a link up to another address is no sync).
            let linked = r
                .upstream
                .as_ref()
                .is_some_and(|u| u.link_up && u.master == g.master);
            (r.addr.clone(), r.down, linked)
        })
        .collect();
    (
        g.master.clone(),
        g.config_epoch,
        status::master_up(g),
        g.failover_in_progress,
        replicas,
    )
}

fn summaries(t: &Topology) -> BTreeMap<String, Summary> {
    t.groups
        .iter()
        .map(|(name, g)| (name.clone(), summary(g)))
        .collect()
}

/// One item each time the topology changes in a way the status shows.
fn topology_changes(mut topology: watch::Receiver<Arc<Topology>>) -> impl Stream<Item = ()> {
    let last = summaries(&topology.borrow_and_update());
    futures_util::stream::unfold((topology, last), |(mut rx, mut last)| async move {
        loop {
            rx.changed().await.ok()?;
            let now = summaries(&rx.borrow_and_update());
            if now != last {
                last = now;
                return Some(((), (rx, last)));
            }
        }
    })
}

/// Runs the reconciler until the stream ends (never, unless the watches
/// cannot start); the caller drops this future when leadership is lost.
pub async fn run(ctx: Arc<Context>) {
    let managed = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}=valkyrie"));
    let topology = topology_changes(ctx.handle.topology.clone());
    let controller = Controller::new(
        ctx.watched::<ValkeyCluster>(),
        watcher::Config::default().any_semantic(),
    )
    .owns(ctx.watched::<StatefulSet>(), managed.clone())
    .owns(ctx.watched::<Service>(), managed.clone())
    .owns(ctx.watched::<ConfigMap>(), managed.clone())
    .owns(ctx.watched::<Secret>(), managed.clone())
    .owns(ctx.watched::<PodDisruptionBudget>(), managed.clone())
    // Pods belong to the StatefulSet, not to the CR: mapped by label, so
    // that a role label changed by hand is repaired.
    .watches(ctx.watched::<Pod>(), managed, |pod: Pod| {
        let ns = pod.metadata.namespace.as_deref()?;
        let name = pod.metadata.labels.as_ref()?.get(LABEL_INSTANCE)?;
        Some(ObjectRef::<ValkeyCluster>::new(name).within(ns))
    })
    .reconcile_all_on(topology)
    .with_config(
        controller::Config::default()
            .concurrency(4)
            .debounce(Duration::from_millis(50)),
    );
    let results = controller.run(reconcile::reconcile, error_policy, ctx);
    let mut results = std::pin::pin!(results);
    while let Some(result) = results.next().await {
        match result {
            Ok((obj, _)) => tracing::debug!(cr = %obj, "reconciled"),
            Err(controller::Error::ReconcilerFailed(e, obj)) => {
                tracing::debug!(cr = %obj, "reconcile failed: {e}");
            }
            // A pod or a child of a CR not listed yet (or just deleted).
            Err(controller::Error::ObjectNotFound(obj)) => {
                tracing::debug!(cr = %obj, "not reconciled: no such ValkeyCluster");
            }
            Err(e) => tracing::warn!("reconciler: {e}"),
        }
    }
}

#[cfg(test)]
mod tests;
