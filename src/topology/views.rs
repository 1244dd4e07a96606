//! The advertised values: [`Topology`], one [`GroupView`] per group with
//! its [`InstanceView`]s and [`PeerView`]s, each group's index snapshot
//! ([`GroupView::snapshot`]) and the one rule saying whether two views of
//! a group advertise the same thing ([`GroupView::advertises_same`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use valkyrie_protocol::index::{GroupSnapshot, Master, MasterState, Replica, ReplicaState};

use super::readiness::Verdict;
use crate::core::{self, Addr, Millis};

/// What the protocol servers show: one entry per group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Groups by name; a group that did not change is shared with the
    /// topology before.
    pub groups: BTreeMap<String, Arc<GroupView>>,
    /// TILT, the mass-failure pause, holds failovers back (Sentinel's TILT).
    pub tilt: bool,
    /// When TILT was entered, in the runtime's clock (`Handle::start`).
    pub tilt_since: Option<Millis>,
    /// Peer links open or being opened: one per peer run id, verified or
    /// not (the descriptor budget counts them, `listen::budget`).
    pub peer_links: usize,
    /// Each group's readiness verdict, judged when its view was last
    /// rebuilt (and every refresh period).
    pub readiness: BTreeMap<String, Arc<Verdict>>,
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
    /// Counts the changes of what this group advertises
    /// ([`GroupView::advertises_same`]), from 1; offsets and ages alone
    /// are no change. The index port publishes it as the group's version.
    /// It goes on growing after the group is removed and monitored again.
    pub revision: u64,
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
    /// A switchover demoted the old master and the new one is not
    /// confirmed yet ([`core::Group::masterless`]): the Sentinel port
    /// holds questions for the master's address. Not advertised to the
    /// index port.
    pub masterless: bool,
    /// The bytes at risk of the failovers this daemon ran, oldest first.
    pub at_risk: Vec<core::AtRisk>,
    /// The write fence in force on the master, if any.
    pub fence: Option<core::FenceSetting>,
    /// The setting this Valkyrie last sent to the master, and whether the
    /// master acknowledged it (`Group::fence_sent`).
    pub fence_sent: Option<(core::FenceSetting, bool)>,
    /// Paused by an operator (`VALKYRIE PAUSE`): no promotion starts. Not
    /// advertised to the index port.
    pub paused: bool,
    /// Owned by a `ValkeyCluster` resource: a label selector may select
    /// it ([`Selection`](super::Selection)). Not advertised.
    pub managed: bool,
    /// The owning resource's labels (empty for a group of the
    /// configuration). Not advertised to the index port.
    pub labels: Arc<BTreeMap<String, String>>,
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
/// Times are milliseconds on the runtime's clock ([`Handle::now_ms`](crate::runtime::Handle::now_ms)).
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
    /// `replica-announced` (its INFO's `replica_announced`; true until
    /// known): `SENTINEL REPLICAS` and the index port leave an
    /// unannounced replica out.
    pub announced: bool,
    /// Replication offset.
    pub offset: u64,
    /// On its way out (on Kubernetes, a pod being deleted or removed by a
    /// scale-down): never promoted, not counted by the write fence.
    pub retiring: bool,
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
            announced: true,
            offset: 0,
            retiring: false,
            sentinels: Vec::new(),
        }
    }
}

impl GroupView {
    /// What the index port publishes of this group, as version
    /// [`GroupView::revision`].
    pub fn snapshot(&self, name: &str) -> GroupSnapshot {
        GroupSnapshot {
            group: name.to_string(),
            epoch: self.config_epoch,
            version: self.revision,
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
                .filter(|r| r.announced)
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

    /// Whether `other` advertises what this view does: the index's own
    /// rule ([`GroupSnapshot::same_content`]: master, its state and
    /// failover step, config epoch, replica set with states and
    /// priorities; not offsets or ages), so a revision is counted exactly
    /// when an index subscriber has something new to see.
    pub fn advertises_same(&self, other: &GroupView) -> bool {
        self.snapshot("").same_content(&other.snapshot(""))
    }
}
