//! What the protocol servers are shown: the advertised [`Topology`],
//! derived from the core after each step, and the rule deciding whether a
//! new snapshot is a change watchers must hear about.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::{self, Addr, Core, FailoverPhase, Millis};

/// What the protocol servers show: one entry per group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Groups by name.
    pub groups: BTreeMap<String, GroupView>,
    /// The mass-failure breaker holds failovers back (Sentinel's TILT).
    pub tilt: bool,
}

/// One group as advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// The epoch the advertised master was adopted in; it only grows, and
    /// the master only changes together with it.
    pub epoch: u64,
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
    /// The master's details.
    pub master_details: InstanceView,
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
    /// For a replica: the master it follows, link state, and how long the
    /// link has been down (ms).
    pub replica_of: Option<(Addr, bool, u64)>,
    /// `replica-priority`.
    pub priority: u32,
    /// Replication offset.
    pub offset: u64,
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
            replica_of: None,
            priority: 100,
            offset: 0,
        }
    }
}

/// How often the topology snapshot is refreshed without notifying.
pub(super) const VIEW_REFRESH: Duration = Duration::from_millis(100);

/// Whether what is advertised (masters, epochs, replica sets and their
/// flags) differs, ignoring timestamps.
pub(super) fn advertised_differs(a: &Topology, b: &Topology) -> bool {
    a.tilt != b.tilt
        || a.groups.len() != b.groups.len()
        || a.groups
            .iter()
            .zip(b.groups.iter())
            .any(|((na, ga), (nb, gb))| {
                na != nb
                    || ga.epoch != gb.epoch
                    || ga.master != gb.master
                    || ga.master_down != gb.master_down
                    || ga.odown != gb.odown
                    || ga.failover_in_progress != gb.failover_in_progress
                    || ga.replicas.len() != gb.replicas.len()
                    || ga.replicas.iter().zip(&gb.replicas).any(|(x, y)| {
                        (&x.addr, x.down, x.disconnected, x.priority)
                            != (&y.addr, y.down, y.disconnected, y.priority)
                    })
            })
}

/// The advertised topology of `core`.
pub fn view(core: &Core) -> Topology {
    Topology {
        tilt: core.breaker_tripped(),
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
                    FailoverPhase::Coordinated | FailoverPhase::WaitPromotion => "wait_promotion",
                    FailoverPhase::Reconfiguring => "reconf_slaves",
                });
                let master_details = master.map_or_else(
                    || details(&core::Instance::placeholder(g.master.clone())),
                    details,
                );
                (
                    name.clone(),
                    GroupView {
                        epoch: g.config_epoch,
                        master: g.master.clone(),
                        master_down: master.is_some_and(|m| m.sdown),
                        failover_in_progress: g.failover.is_some(),
                        replicas: advertised().map(details).collect(),
                        quorum: g.spec.quorum,
                        down_after: g.spec.down_after,
                        failover_timeout: g.spec.failover_timeout,
                        parallel_syncs: g.spec.parallel_syncs,
                        odown: g.odown,
                        failover_state,
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
        replica_of: info.and_then(|x| match &x.role {
            core::Role::Replica {
                master,
                link_up,
                link_down_secs,
                ..
            } => Some((
                master.clone(),
                *link_up,
                link_down_secs.unwrap_or(0).saturating_mul(1000),
            )),
            core::Role::Master => None,
        }),
        priority: info.map_or(100, |x| x.priority),
        offset: info.map_or(0, |x| x.offset),
    }
}
