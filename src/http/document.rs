//! The groups document of the status API (`GET /api/v1/groups`, the
//! schema in docs/operations.md), built from the index port's publication
//! and the advertised topology.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Value, json};
use valkyrie_protocol::index::{MasterState, ReplicaState};

use super::records::{EpochRecord, Timeline};
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
                        "retiring": r.retiring,
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
            if g.paused {
                flags.push("paused");
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
                // The owning resource's labels, which selectors match
                // (empty for a group of the configuration).
                "labels": &*g.labels,
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
                "readiness": super::verdict::readiness(topology.readiness.get(name).map(|v| &**v)),
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
