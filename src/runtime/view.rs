//! What the protocol servers are shown: the advertised [`Topology`],
//! derived from the core after each step, each group's index snapshot
//! ([`GroupView::snapshot`]), the peer sentinels of each group
//! ([`PeerView`], on the master's [`InstanceView::sentinels`]), and the one
//! rule deciding whether a new topology is a change watchers must hear
//! about ([`advertised_differs`], the index's
//! [`GroupSnapshot::same_content`] per group).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use valkyrie_protocol::index::{GroupSnapshot, Master, MasterState, Replica, ReplicaState};

use crate::core::{self, Addr, Core, FailoverPhase, Millis};

/// What the protocol servers show: one entry per group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Groups by name.
    pub groups: BTreeMap<String, GroupView>,
    /// TILT, the mass-failure pause, holds failovers back (Sentinel's TILT).
    pub tilt: bool,
    /// When TILT was entered, in the runtime's clock (`Handle::start`).
    pub tilt_since: Option<Millis>,
    /// Peer links open or being opened: one per peer run id, verified or
    /// not (the descriptor budget counts them, `listen::budget`).
    pub peer_links: usize,
}

impl Topology {
    /// The descriptors its links hold: two per instance (the master and
    /// each replica: commands and hellos) and one per peer link (verified
    /// peers or not). The descriptor budget (`listen::budget`) keeps them
    /// out of the clients' reach.
    pub fn link_descriptors(&self) -> u64 {
        let instances: u64 = self
            .groups
            .values()
            .map(|g| 1 + g.replicas.len() as u64)
            .sum();
        instances * 2 + self.peer_links as u64
    }
}

/// One group as advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// The config epoch the advertised master was adopted in (the failover
    /// epoch that made it, or a peer's configuration); it only grows, and
    /// the master only changes together with it.
    pub config_epoch: u64,
    /// The advertised master.
    pub master: Addr,
    /// Whether the master is subjectively down.
    pub master_down: bool,
    /// A failover is in progress.
    pub failover_in_progress: bool,
    /// Known replicas (the master excluded; fenced old masters excluded
    /// until they have resynced).
    pub replicas: Vec<InstanceView>,
    /// The configured quorum.
    pub quorum: u32,
    /// `down-after-milliseconds`.
    pub down_after: Millis,
    /// `failover-timeout`.
    pub failover_timeout: Millis,
    /// `parallel-syncs`.
    pub parallel_syncs: u32,
    /// Objectively down (decided to fail over).
    pub odown: bool,
    /// Sentinel's name for the failover step, while one runs.
    pub failover_state: Option<&'static str>,
    /// The bytes at risk of the failovers this daemon ran, oldest first.
    pub at_risk: Vec<core::AtRisk>,
    /// The write fence in force on the master, if any.
    pub fence: Option<core::FenceSetting>,
    /// The master's details.
    pub master_details: InstanceView,
}

/// A replica's link to the master it follows, as its INFO reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// `master_host`:`master_port`.
    pub master: Addr,
    /// `master_link_status:up`.
    pub link_up: bool,
    /// How long the link has been down, in ms (0 while up).
    pub link_down_ms: u64,
}

/// Everything `SENTINEL MASTER`/`REPLICAS` report about an instance.
/// Times are milliseconds on the runtime's clock ([`Handle::now_ms`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceView {
    /// Its address.
    pub addr: Addr,
    /// `run_id` from its INFO (empty until known).
    pub run_id: String,
    /// Subjectively down.
    pub down: bool,
    /// The link to it is down.
    pub disconnected: bool,
    /// Last valid reply.
    pub last_ok: Millis,
    /// Last INFO.
    pub info_at: Millis,
    /// It reports itself master.
    pub reports_master: bool,
    /// When that role was first seen.
    pub role_since: Millis,
    /// For a replica: its link to the master it follows.
    pub upstream: Option<Upstream>,
    /// `replica-priority`.
    pub priority: u32,
    /// Replication offset.
    pub offset: u64,
    /// For a group's master: the group's peer sentinels, by run id (as
    /// Sentinel keeps them, on the master's instance). Empty for replicas.
    pub sentinels: Vec<PeerView>,
}

/// Everything `SENTINEL SENTINELS` reports about a peer sentinel of a
/// group. Times are milliseconds on the runtime's clock (0: never).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerView {
    /// Its run id.
    pub runid: String,
    /// The address its hellos announce.
    pub addr: Addr,
    /// Subjectively down (no valid PING reply for `down-after`).
    pub sdown: bool,
    /// When it went SDOWN.
    pub sdown_since: Millis,
    /// Our command link to it is connected.
    pub link_up: bool,
    /// It said, recently, that the master is down.
    pub master_down: bool,
    /// How many groups know it (they share one link).
    pub refcount: usize,
    /// How often its link PINGs it.
    pub ping_period: Millis,
    /// Last valid PING reply, or when it was first known.
    pub last_ok_ping: Millis,
    /// Last PING reply of any kind (0: never).
    pub last_ping_reply: Millis,
    /// Last hello from it about this group (0: none since the start).
    pub last_hello: Millis,
    /// The vote it reported, while fresh.
    pub leader: Option<String>,
    /// The epoch of the last vote it reported.
    pub leader_epoch: u64,
}

impl InstanceView {
    /// An instance nothing is known about yet: up, no INFO, priority 100.
    pub fn new(addr: Addr) -> InstanceView {
        InstanceView {
            addr,
            run_id: String::new(),
            down: false,
            disconnected: false,
            last_ok: 0,
            info_at: 0,
            reports_master: false,
            role_since: 0,
            upstream: None,
            priority: 100,
            offset: 0,
            sentinels: Vec::new(),
        }
    }
}

/// How often the topology snapshot is refreshed without notifying, at
/// most (the ages that `SENTINEL MASTER` reports).
pub(super) const VIEW_REFRESH: Duration = Duration::from_millis(100);

/// The periodic refresh waits at least this many times what building the
/// view took: at most 5 % of a core, whatever the number of groups.
pub(super) const VIEW_REFRESH_COST_RATIO: u32 = 20;

/// How often the metrics' gauges are set from the core: a scrape is
/// seconds apart, and setting every series of every instance is as costly
/// as building the view.
pub(super) const GAUGES_REFRESH: Duration = Duration::from_secs(1);

/// Whether a new snapshot is a change watchers must hear about: the
/// TILT flipped, a group came or went, or a group's index snapshot
/// changed. For a group this is the index's own rule,
/// [`GroupSnapshot::same_content`] (master, its state and failover step,
/// epoch, replica set with states and priorities; not offsets or
/// timestamps), so the runtime wakes the index publisher exactly when a
/// subscriber has something new to see.
pub fn advertised_differs(a: &Topology, b: &Topology) -> bool {
    a.tilt != b.tilt
        || a.groups.len() != b.groups.len()
        || a.groups
            .iter()
            .zip(b.groups.iter())
            .any(|((na, ga), (nb, gb))| na != nb || !ga.snapshot(na).same_content(&gb.snapshot(nb)))
}

/// Publishes `next` on `topology`, notifying watchers only when
/// [`advertised_differs`] says so (the value is replaced either way, so
/// readers always see the latest ages and offsets).
pub(super) fn advertise(topology: &watch::Sender<Arc<Topology>>, next: Arc<Topology>) {
    topology.send_if_modified(|t| {
        let changed = advertised_differs(t, &next);
        *t = next;
        changed
    });
}

impl GroupView {
    /// What the index port publishes of this group (version 0: the index
    /// publisher numbers versions).
    pub fn snapshot(&self, name: &str) -> GroupSnapshot {
        GroupSnapshot {
            group: name.to_string(),
            epoch: self.config_epoch,
            version: 0,
            master: Master {
                host: self.master.host.clone(),
                port: self.master.port,
                state: if self.odown {
                    MasterState::Odown
                } else if self.master_down {
                    MasterState::Sdown
                } else {
                    MasterState::Up
                },
                failover: self
                    .failover_state
                    .filter(|_| self.failover_in_progress)
                    .map(str::to_string),
            },
            replicas: self
                .replicas
                .iter()
                .map(|r| Replica {
                    host: r.addr.host.clone(),
                    port: r.addr.port,
                    state: if r.down {
                        ReplicaState::Down
                    } else if r.disconnected {
                        ReplicaState::Disconnected
                    } else {
                        ReplicaState::Up
                    },
                    offset: r.offset,
                    priority: r.priority,
                })
                .collect(),
        }
    }
}

/// The advertised topology of `core`.
pub fn view(core: &Core) -> Topology {
    // Per peer run id: how many groups know it, and the shortest
    // `down-after` among them (its link's PING period follows it).
    let mut shared: BTreeMap<&str, (usize, Millis)> = BTreeMap::new();
    for g in core.groups().values() {
        for runid in g.peers.keys() {
            let e = shared.entry(runid).or_insert((0, Millis::MAX));
            e.0 += 1;
            e.1 = e.1.min(g.spec.down_after);
        }
    }
    let peer = |p: &core::Peer| {
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
    };
    Topology {
        tilt: core.tilted(),
        tilt_since: core.tilt_since(),
        peer_links: shared.len(),
        groups: core
            .groups()
            .iter()
            .map(|(name, g)| {
                let master = g.master_instance();
                let advertised = || {
                    g.instances
                        .values()
                        .filter(|i| i.addr != g.master && !i.demoted)
                };
                let failover_state = g.failover.as_ref().map(|f| match f.phase {
                    FailoverPhase::SendNoOne => "send_slaveof_noone",
                    FailoverPhase::Pausing
                    | FailoverPhase::CatchingUp
                    | FailoverPhase::WaitPromotion => "wait_promotion",
                    FailoverPhase::Reconfiguring => "reconf_slaves",
                });
                let mut master_details = master.map_or_else(
                    || details(&core::Instance::placeholder(g.master.clone())),
                    details,
                );
                master_details.sentinels = g.voters().map(peer).collect();
                (
                    name.clone(),
                    GroupView {
                        config_epoch: g.config_epoch,
                        master: g.master.clone(),
                        master_down: master.is_some_and(|m| m.sdown),
                        failover_in_progress: g.failover.is_some(),
                        replicas: advertised().map(details).collect(),
                        quorum: g.spec.quorum,
                        down_after: g.spec.down_after,
                        failover_timeout: g.spec.failover_timeout,
                        parallel_syncs: g.spec.parallel_syncs,
                        odown: g.decided_down,
                        failover_state,
                        at_risk: g.at_risk.iter().cloned().collect(),
                        fence: g.fence_setting(),
                        master_details,
                    },
                )
            })
            .collect(),
    }
}

fn details(i: &core::Instance) -> InstanceView {
    let info = i.info.as_ref();
    InstanceView {
        addr: i.addr.clone(),
        run_id: info.map(|x| x.run_id.clone()).unwrap_or_default(),
        down: i.sdown,
        disconnected: i.failure.is_some(),
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
        offset: info.map_or(0, |x| x.offset),
        sentinels: Vec::new(),
    }
}
