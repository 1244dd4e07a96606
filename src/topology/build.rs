//! From the core's groups to their advertised views: one [`GroupView`]
//! per group, built on its own, with the peer sentinels the groups share.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::core::{self, Core, FailoverPhase, Millis};

use super::views::{GroupView, InstanceView, PeerView, Upstream};

/// A resource's labels.
pub(super) type Labels = BTreeMap<String, String>;

/// Per peer run id: how many groups know it, and the shortest
/// `down-after` among them (its link's PING period follows it).
pub(super) type Shared<'a> = BTreeMap<&'a str, (usize, Millis)>;

/// The peers the groups of `core` share (one walk over the peer tables).
pub(super) fn shared(core: &Core) -> Shared<'_> {
    let mut shared: Shared<'_> = BTreeMap::new();
    for g in core.groups().values() {
        for runid in g.peers.keys() {
            let e = shared.entry(runid).or_insert((0, Millis::MAX));
            e.0 += 1;
            e.1 = e.1.min(g.spec.down_after);
        }
    }
    shared
}

/// The view of group `g`, at revision 0 (`Revisions::stamp` gives it
/// its own), with the labels of the resource that owns it (`None`: a
/// group of the configuration).
pub(super) fn group(
    g: &core::Group,
    shared: &Shared<'_>,
    labels: Option<&Arc<Labels>>,
) -> GroupView {
    let master = g.master_instance();
    let failover_state = g.failover.as_ref().map(|f| match f.phase {
        FailoverPhase::SendNoOne => "send_slaveof_noone",
        FailoverPhase::Routing
        | FailoverPhase::Aligning
        | FailoverPhase::Pausing
        | FailoverPhase::CatchingUp
        | FailoverPhase::Demoting
        | FailoverPhase::WaitPromotion => "wait_promotion",
        FailoverPhase::Reconfiguring => "reconf_slaves",
    });
    let mut master_details = master.map_or_else(
        || details(&core::Instance::placeholder(g.master.clone())),
        details,
    );
    master_details.sentinels = g.voters().map(|p| peer(p, shared)).collect();
    GroupView {
        revision: 0,
        config_epoch: g.config_epoch,
        master: g.master.clone(),
        master_down: master.is_some_and(|m| m.sdown),
        failover_in_progress: g.failover.is_some(),
        replicas: g
            .instances
            .values()
            .filter(|i| i.addr != g.master && !i.demoted)
            .map(details)
            .collect(),
        quorum: g.spec.quorum,
        down_after: g.spec.down_after,
        failover_timeout: g.spec.failover_timeout,
        parallel_syncs: g.spec.parallel_syncs,
        odown: g.decided_down,
        failover_state,
        masterless: g.masterless(),
        at_risk: g.at_risk.iter().cloned().collect(),
        fence: g.fence_setting(),
        fence_sent: g.fence_sent(),
        paused: g.paused(),
        managed: labels.is_some(),
        labels: labels.cloned().unwrap_or_default(),
        master_details,
    }
}

fn peer(p: &core::Peer, shared: &Shared<'_>) -> PeerView {
    let (refcount, down_after) = shared.get(p.runid.as_str()).copied().unwrap_or((1, 1_000));
    PeerView {
        runid: p.runid.clone(),
        addr: p.addr.clone(),
        sdown: p.sdown,
        sdown_since: p.sdown_since,
        link_up: p.link_up,
        master_down: p.master_down,
        refcount,
        ping_period: down_after.clamp(10, 1_000),
        last_ok_ping: p.last_ok_ping,
        last_ping_reply: p.last_ping_reply,
        last_hello: p.last_hello,
        leader: p.leader.clone(),
        leader_epoch: p.leader_epoch,
    }
}

fn details(i: &core::Instance) -> InstanceView {
    let info = i.info.as_ref();
    InstanceView {
        addr: i.addr.clone(),
        run_id: info.map(|x| x.run_id.clone()).unwrap_or_default(),
        down: i.sdown,
        // As Sentinel: a link whose PINGs are refused is as good as none.
        disconnected: i.failure.is_some() || i.refused_since.is_some(),
        last_ok: i.last_ok,
        info_at: i.info_at,
        reports_master: info.is_some_and(|x| matches!(x.role, core::Role::Master)),
        role_since: i.role_since,
        upstream: info.and_then(|x| match &x.role {
            core::Role::Replica {
                master,
                link_up,
                link_down_secs,
                ..
            } => Some(Upstream {
                master: master.clone(),
                link_up: *link_up,
                link_down_ms: link_down_secs.unwrap_or(0).saturating_mul(1000),
            }),
            core::Role::Master => None,
        }),
        priority: info.map_or(100, |x| x.priority),
        announced: info.is_none_or(|x| x.announced),
        offset: info.map_or(0, |x| x.offset),
        retiring: i.retiring,
        sentinels: Vec::new(),
    }
}
