//! The pods on their way out, made known to every Valkyrie. Every
//! Valkyrie governs the master's write fence, so a mark that only the
//! Lease holder knows relaxes the fence in one governor while another,
//! whose view just changed, tightens it again and stops writes. So the
//! reconciler publishes the marks in `status.retiringPods` first, then
//! marks them in its own runtime, and only then deletes or switches over;
//! every Valkyrie's input marks them from the status it watches
//! ([`crate::kube::groups`]).

use std::collections::BTreeSet;

use serde_json::json;

use super::plan::{Observed, Sync};
use crate::core::Addr;
use crate::core::group::write_fence::majority;
use crate::kube::controller::context::{Context, RETIRING_MANAGER};
use crate::kube::crd::ValkeyCluster;
use crate::kube::error::Error;
use crate::kube::groups::retiring::pod_addr;
use crate::kube::render::Names;

/// How long a deletion waits for the fence to relax.
const FENCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long after the marks are published a deletion waits at least: the
/// other Valkyries read them from their watch (milliseconds) and relax
/// their own settings (one `CONFIG SET`), and this Valkyrie cannot see
/// either. A follower slower than this refuses writes until it catches
/// up; it loses none.
const FOLLOWERS_SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// Publishes `ordinals` as the retiring pods of `vc`, then marks them
/// retiring in this runtime (and every other pod not). The status comes
/// first: a mark this Valkyrie acted on is one the others can read.
pub(super) async fn mark(
    vc: &ValkeyCluster,
    names: &Names,
    group_name: &str,
    ordinals: &BTreeSet<i32>,
    ctx: &Context,
) -> Result<(), Error> {
    let ordinals: Vec<u32> = ordinals
        .iter()
        .filter_map(|n| u32::try_from(*n).ok())
        .collect();
    publish(vc, ordinals.iter().map(|n| names.pod(*n)).collect(), ctx).await?;
    let addrs = ordinals.iter().map(|n| address(names, *n, ctx)).collect();
    ctx.gate()?;
    if let Err(e) = ctx.handle.retire(group_name.to_owned(), addrs).await {
        tracing::debug!(group = group_name, "retiring pods not marked: {e}");
    }
    Ok(())
}

/// Writes `status.retiringPods` by server-side apply, an empty list
/// included: the field is owned by [`RETIRING_MANAGER`] alone, so the
/// reconcile's own status write neither drops nor fights it. Written on
/// every reconcile rather than on a difference from the cached CR, which
/// may be older than the last write (the API server stores no change
/// when nothing changed).
async fn publish(vc: &ValkeyCluster, pods: Vec<String>, ctx: &Context) -> Result<(), Error> {
    let status = json!({ "retiringPods": pods });
    ctx.apply_status(vc, RETIRING_MANAGER, status).await
}

/// Where Valkyrie reaches pod `ordinal`.
pub fn address(names: &Names, ordinal: u32, ctx: &Context) -> Addr {
    pod_addr(names, ordinal, &ctx.settings.cluster_domain)
}

/// Waits, at most [`FENCE_WAIT`], until the setting this Valkyrie last
/// sent to the master asks no more than a majority of the synced
/// replicas that stay, and the master acknowledged it: the auto fence
/// relaxes once a replica is marked retiring, and a replica deleted
/// before that would stop writes until the master's next report. A
/// setting still on its way is not relaxed: an earlier, tighter one may
/// be in force meanwhile. Without a setting sent (the fence is off) there
/// is nothing to wait for. Called right after [`mark`]: it also waits
/// [`FOLLOWERS_SETTLE`] from then, for the other Valkyries' settings.
pub(super) async fn fence_relaxed(
    observed: &Observed,
    retiring: &BTreeSet<i32>,
    group: &str,
    ctx: &Context,
) {
    let staying = observed
        .members
        .iter()
        .filter(|m| m.sync == Sync::Synced && !retiring.contains(&m.ordinal))
        .count();
    let need = majority(u64::try_from(staying).unwrap_or(0));
    let settled = tokio::time::Instant::now() + FOLLOWERS_SETTLE;
    let mut topology = ctx.handle.topology.clone();
    let relaxed = |t: &crate::topology::Topology| {
        t.groups.get(group).is_none_or(|g| {
            g.fence_sent
                .is_none_or(|(sent, acknowledged)| sent.replicas <= need && acknowledged)
        })
    };
    let waited = tokio::time::timeout(FENCE_WAIT, topology.wait_for(|t| relaxed(t)))
        .await
        .is_ok_and(|r| r.is_ok());
    if !waited {
        tracing::info!(
            group,
            "the write fence did not relax within {FENCE_WAIT:?}; deleting all the same"
        );
    }
    tokio::time::sleep_until(settled).await;
}
