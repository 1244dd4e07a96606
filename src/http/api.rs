//! The status JSON API: `GET /api/v1/groups` and `GET /api/v1/events`
//! (the schema is in docs/operations.md), built by [`groups_document`]
//! from the index port's publication and the advertised topology.
//! Nothing here shows a secret: the topology holds no passwords.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use valkyrie_protocol::index::{MasterState, ReplicaState};

use super::AdminState;
use super::hub::{EpochRecord, Hub, Timeline};
use crate::index::publish::Published;
use crate::topology::{InstanceView, Topology};

/// The groups document: every group, by name, with its master,
/// replicas, epochs, flags, failover state and recent failovers.
pub(super) fn groups_document(
    topology: &Topology,
    published: &Published,
    epochs: &BTreeMap<String, VecDeque<EpochRecord>>,
    timelines: &BTreeMap<String, VecDeque<Timeline>>,
) -> Value {
    let groups: Vec<Value> = topology
        .groups
        .iter()
        .map(|(name, g)| {
            let entry = published.groups.get(name);
            let snapshot = entry.map(|e| &e.snapshot);
            let version = snapshot.map_or(0, |s| s.version);
            let master_state = snapshot.map_or("up", |s| match s.master.state {
                MasterState::Up => "up",
                MasterState::Sdown => "sdown",
                MasterState::Odown => "odown",
            });
            let master_offset = g.master_details.offset;
            let replicas: Vec<Value> = g
                .replicas
                .iter()
                .map(|r| {
                    let state = snapshot
                        .and_then(|s| {
                            s.replicas
                                .iter()
                                .find(|x| x.host == r.addr.host && x.port == r.addr.port)
                        })
                        .map_or(replica_state(r), |x| match x.state {
                            ReplicaState::Up => "up",
                            ReplicaState::Down => "down",
                            ReplicaState::Disconnected => "disconnected",
                        });
                    json!({
                        "addr": r.addr.to_string(),
                        "role": if r.reports_master { "master" } else { "replica" },
                        "state": state,
                        "link": link(r),
                        "link_down_ms": r.upstream.as_ref().map_or(0, |u| u.link_down_ms),
                        "follows": r.upstream.as_ref().map(|u| u.master.to_string()),
                        "offset": r.offset,
                        "lag": master_offset.saturating_sub(r.offset),
                        "priority": r.priority,
                    })
                })
                .collect();
            let mut flags = vec!["master"];
            if g.master_down {
                flags.push("s_down");
            }
            if g.odown {
                flags.push("o_down");
            }
            if g.master_details.disconnected {
                flags.push("disconnected");
            }
            if g.failover_in_progress {
                flags.push("failover_in_progress");
            }
            json!({
                "name": name,
                "version": version,
                "epoch": g.config_epoch,
                "master": {
                    "addr": g.master.to_string(),
                    "state": master_state,
                    "link": if g.master_details.disconnected { "down" } else { "up" },
                    "offset": master_offset,
                    "reports_master": g.master_details.reports_master,
                },
                "flags": flags,
                "quorum": g.quorum,
                "down_after_ms": g.down_after,
                "failover_timeout_ms": g.failover_timeout,
                "failover": g.failover_state.filter(|_| g.failover_in_progress),
                "sentinels": g.master_details.sentinels.len(),
                "replicas": replicas,
                "epochs": epochs.get(name).map(|l| l.iter().collect::<Vec<_>>()).unwrap_or_default(),
                "failovers": timelines.get(name).map(|l| l.iter().collect::<Vec<_>>()).unwrap_or_default(),
                "at_risk": g.at_risk.iter().map(at_risk).collect::<Vec<_>>(),
                "write_fence": g.fence.map(|f| json!({
                    "replicas": f.replicas,
                    "lag_secs": f.lag_secs,
                })),
            })
        })
        .collect();
    json!({
        // TILT is the daemon's breaker: while on, no failover starts.
        "tilt": topology.tilt,
        "groups": groups,
    })
}

/// One failover's bytes at risk (`docs/failover.md`, "The write fence").
fn at_risk(r: &crate::core::AtRisk) -> Value {
    json!({
        "epoch": r.epoch,
        "old_master": r.old_master.to_string(),
        "promoted": r.promoted.to_string(),
        "old_offset": r.old_offset,
        "promoted_offset": r.promoted_offset,
        "bytes_at_risk": r.bytes(),
        "complete": r.complete,
        "fenced": r.fenced.describe(),
    })
}

/// A replica's own state when the index has not published it yet.
fn replica_state(r: &InstanceView) -> &'static str {
    if r.down {
        "down"
    } else if r.disconnected {
        "disconnected"
    } else {
        "up"
    }
}

/// The replica's replication link to its master, as its INFO says.
fn link(r: &InstanceView) -> &'static str {
    match &r.upstream {
        _ if r.disconnected => "unreachable",
        Some(u) if u.link_up => "up",
        Some(_) => "down",
        None => "none",
    }
}

/// A JSON answer; never cached.
pub(super) fn json_response(body: String) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn hub(state: &AdminState) -> Option<&Arc<Hub>> {
    state.status.as_ref()
}

pub(super) async fn groups(State(state): State<AdminState>) -> Response {
    match hub(&state) {
        Some(hub) => json_response(hub.groups().as_ref().clone()),
        None => super::probes::not_found().await,
    }
}

/// `?since=N`: events numbered above N (0 or absent: every kept one).
#[derive(Debug, serde::Deserialize)]
pub(super) struct Since {
    since: Option<u64>,
}

pub(super) async fn events(
    State(state): State<AdminState>,
    Query(query): Query<Since>,
) -> Response {
    let since = query.since.unwrap_or(0);
    match hub(&state) {
        Some(hub) => json_response(hub.events_since(since).to_string()),
        None => super::probes::not_found().await,
    }
}
