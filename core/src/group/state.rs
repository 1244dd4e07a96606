//! The group's data: what the core knows about one monitored group (its
//! spec, its instances, its epochs, its advertised master, a failover in
//! flight), how it is built from the configuration and a persisted state,
//! and the persisted view of it.
//!
//! Everything that must survive a daemon crash — epoch, config epoch,
//! advertised master, fenced old masters, a lost master, a failover in
//! flight with its chosen replica — is in [`Group::persisted`]; the rules
//! in the sibling modules persist it before acting on it.

use std::collections::BTreeMap;

use crate::peering::election::{Election, PendingConfig};
use crate::types::Addr;
use crate::{
    Command, Daemon, GroupState, InfoReport, KnownPeer, LinkFailure, Millis, Peer,
    PersistedFailover, Role,
};

/// What the core needs to know about a group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupSpec {
    /// The master's name.
    pub name: String,
    /// The initial master (a persisted state overrides it).
    pub master: Addr,
    /// The configured quorum, only reported back.
    pub quorum: u32,
    /// `down-after-milliseconds`.
    pub down_after: Millis,
    /// `failover-timeout`.
    pub failover_timeout: Millis,
    /// `parallel-syncs`.
    pub parallel_syncs: u32,
    /// `master-reboot-down-after-period` (0: off): a master that restarted
    /// (new run id) and has not answered a PING with `PONG` for this long
    /// since is down, whatever else it answers (`-LOADING` to PINGs while
    /// INFO works, say).
    pub reboot_down_after: Millis,
    /// Replicas known from the configuration.
    pub known_replicas: Vec<Addr>,
    /// How its masters are fenced ([`write_fence`](super::write_fence)).
    pub fence: super::WriteFence,
    /// How long a switchover waits, writes going on, for the group's
    /// route (a managed group's `-master` Service) to reach the chosen
    /// replica before it pauses writes ([`Output::Route`](crate::Output::Route)); 0: the group
    /// has no route.
    pub route_wait: Millis,
}

/// Reconfiguration progress of one replica during a failover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reconf {
    /// Not yet told.
    Pending,
    /// Told `REPLICAOF <new master>` at this time.
    Sent(Millis),
    /// Acknowledged the command.
    InProgress(Millis),
    /// Reports an up link to the new master (or gave up on).
    Done,
}

/// One instance as the core sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Instance {
    /// Its address.
    pub addr: Addr,
    /// Last time it answered validly.
    pub last_ok: Millis,
    /// The last link failure since it last answered.
    pub failure: Option<LinkFailure>,
    /// Since when its PINGs have been answered only with errors (a wrong
    /// password, `-MISCONF`, a renamed `PING`): it serves nothing, and
    /// past `down-after` it is SDOWN whatever its INFO says, as on
    /// Sentinel. Shown as `disconnected`.
    pub refused_since: Option<Millis>,
    /// Subjectively down.
    pub sdown: bool,
    /// The last INFO it sent, and when.
    pub info: Option<InfoReport>,
    /// When `info` arrived.
    pub info_at: Millis,
    /// An old master that has not resynced from the current master yet.
    pub demoted: bool,
    /// Reconfiguration progress during a failover.
    pub reconf: Option<Reconf>,
    /// When a corrective `REPLICAOF` was last sent to it.
    pub fix_sent_at: Option<Millis>,
    /// A run id of this instance seen holding data or in sync with its
    /// replicas: that process has not lost anything.
    pub trusted_run: Option<String>,
    /// When the role it reports last changed (or was first seen).
    pub role_since: Millis,
    /// When it was seen restarting as the master, with
    /// `master-reboot-down-after-period` set, and no `PONG` since.
    pub rebooted_at: Option<Millis>,
    /// The last offset it reported as a replica, in its current process:
    /// once it reports the master role, where its history forked.
    pub replica_offset: Option<u64>,
    /// On its way out (its pod is being deleted, or a scale-down removes
    /// it): never promoted. Set by the Kubernetes input, not persisted.
    pub retiring: bool,
    /// When it stopped retiring: for [`RETIRED_GRACE`] after, the fence
    /// does not count it (a master's report asked before its old process
    /// went may still list it).
    pub retired_at: Option<Millis>,
}

/// How long a replica that stopped retiring is not counted by the fence.
pub const RETIRED_GRACE: Millis = 2_000;

impl Instance {
    /// An instance nothing is known about yet.
    pub fn placeholder(addr: Addr) -> Instance {
        Instance::new(addr, 0)
    }

    pub(crate) fn new(addr: Addr, now: Millis) -> Instance {
        Instance {
            addr,
            last_ok: now,
            failure: None,
            refused_since: None,
            sdown: false,
            info: None,
            info_at: 0,
            demoted: false,
            reconf: None,
            fix_sent_at: None,
            trusted_run: None,
            role_since: now,
            rebooted_at: None,
            replica_offset: None,
            retiring: false,
            retired_at: None,
        }
    }

    pub(crate) fn reports_master(&self) -> bool {
        matches!(self.info.as_ref().map(|i| &i.role), Some(Role::Master))
    }
}

/// Where a failover stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailoverPhase {
    /// `REPLICAOF NO ONE` sent, not yet acknowledged.
    SendNoOne,
    /// Planned switchover of a group with a route, before anything else:
    /// the route is moved to the chosen replica
    /// ([`Output::Route`](crate::Output::Route)) and
    /// [`Input::Routed`](crate::Input::Routed) awaited (at most
    /// [`GroupSpec::route_wait`]), writes going on.
    Routing,
    /// Planned switchover, before any pause: the master's `INFO`, then
    /// the chosen replica's, until the replica holds what the master had
    /// just before (or [`ALIGN_MAX`](super::ALIGN_MAX) passed).
    Aligning,
    /// Planned switchover: `CLIENT PAUSE … WRITE` and then `INFO` sent to
    /// the master; the offset it stopped at is awaited.
    Pausing,
    /// Planned switchover: the chosen replica's offset must reach the
    /// paused master's.
    CatchingUp,
    /// Planned switchover: the paused master was told `REPLICAOF
    /// <chosen>`, before the promotion; its acknowledgement is awaited.
    Demoting,
    /// Waiting for the chosen replica to report itself master.
    WaitPromotion,
    /// Promotion confirmed; replicas are being pointed at the new master.
    Reconfiguring,
}

/// A failover in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Failover {
    /// Its epoch.
    pub epoch: u64,
    /// The master being replaced.
    pub old_master: Addr,
    /// The replica being promoted.
    pub promoted: Addr,
    /// Where it stands.
    pub phase: FailoverPhase,
    /// When it started (or resumed).
    pub started: Millis,
    /// Resumed from persisted state after a daemon restart: abandoned
    /// rather than retried if the promotion turns out not to have happened.
    pub resumed: bool,
    /// When the promoted replica's INFO was last asked.
    pub promotion_asked: Millis,
    /// The promoted replica's offset when it was chosen.
    pub min_offset: u64,
    /// Planned switchover: the offset the paused master stopped at.
    pub paused_offset: u64,
    /// Planned switchover: the old master's writes are paused until then
    /// (it is unpaused once demoted); `None` otherwise, and once
    /// unpaused.
    pub paused_until: Option<Millis>,
    /// Planned switchover, aligning: the master's offset the replica must
    /// reach before writes are paused.
    pub align_offset: u64,
    /// Planned switchover, aligning: the chosen replica's offset in its
    /// last answer.
    pub align_seen: Option<u64>,
    /// Planned switchover, aligning: since when the chosen replica stood
    /// still (its offset unchanged from one answer to the next); the next
    /// round is asked [`ALIGN_PACE`](super::ALIGN_PACE) later rather than
    /// at once.
    pub align_idle: Option<Millis>,
    /// Planned switchover: the old master was told `REPLICAOF <chosen>`
    /// (before the promotion). A switchover given up from then on makes
    /// it master again before unpausing it.
    pub demoted_first: bool,
    /// Planned switchover: when each step was reached, logged with the
    /// demotion so a long write stall says where it went.
    pub timeline: Timeline,
}

/// A planned switchover's steps, in daemon time (0: not reached).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timeline {
    /// The switchover began (writes going on, the replica being brought
    /// level).
    pub begun: Millis,
    /// The route reached the chosen replica (or its wait ended); the
    /// alignment began. Equal to `begun` without a route.
    pub routed: Millis,
    /// The pause was sent to the master.
    pub paused: Millis,
    /// The paused master's offset was known.
    pub master_offset: Millis,
    /// The chosen replica's offset reached it; the old master's demotion
    /// was sent.
    pub caught_up: Millis,
    /// The old master acknowledged its demotion; the promotion was sent.
    pub demoted: Millis,
    /// Before the pause: the replica's and the master's INFO answers
    /// until the replica was level with the master.
    pub align_rounds: u32,
    /// How far behind the paused master the replica first reported, in
    /// bytes.
    pub behind: u64,
    /// The replica's INFO answers until it caught up.
    pub rounds: u32,
}

/// One group: its spec, its instances, its epoch and its advertised master.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    /// Configuration.
    pub spec: GroupSpec,
    /// The failover epoch; every failover attempt increments it.
    pub epoch: u64,
    /// The epoch in which the advertised master was adopted (Sentinel's
    /// `config-epoch`): the advertised master only ever changes together
    /// with a higher config epoch.
    pub config_epoch: u64,
    /// The advertised master.
    pub master: Addr,
    /// Every known instance, the master included.
    pub instances: BTreeMap<Addr, Instance>,
    /// The failover in progress.
    pub failover: Option<Failover>,
    /// The verdict on an SDOWN master: down, and failing it over is
    /// justified (not vetoed by witnesses). Published as `+odown`, shown as
    /// Sentinel's `o_down` flag.
    pub decided_down: bool,
    /// Commands awaiting replies, by token.
    pub(super) awaiting: BTreeMap<u64, (Addr, Command)>,
    /// No new failover before this time.
    pub(crate) retry_at: Millis,
    /// When "no good replica" was last reported.
    pub(crate) no_good_at: Option<Millis>,
    /// The advertised master restarted without its data (this is the
    /// replication id of its new, empty history): nothing may be pointed
    /// at it, and no replica that shares that history may be promoted,
    /// until it is replaced.
    pub(crate) master_lost: Option<String>,
    /// Paused by an operator: monitoring and detection go on, no
    /// promotion starts, and in peer mode no vote is given (persisted).
    pub(crate) paused: bool,
    /// Peer sentinels of this group, by run id.
    pub peers: BTreeMap<String, Peer>,
    /// A peer was known once: every promotion goes through an election.
    pub peered: bool,
    /// Our own vote for this group: whom ...
    pub leader: Option<String>,
    /// ... and in which epoch.
    pub leader_epoch: u64,
    /// An election we run (Sentinel's `WAIT_START`).
    pub election: Option<Election>,
    /// When our candidacy starts (a random delay after ODOWN, so daemons
    /// that saw the failure together do not split the vote).
    pub(crate) candidacy_at: Option<Millis>,
    /// A higher configuration heard in a hello, not adopted until its
    /// master is seen reporting the master role.
    pub(crate) pending_config: Option<PendingConfig>,
    /// When this group was loaded (the stale window counts from it).
    pub(crate) loaded_at: Millis,
    /// Split elections retried at once in a row.
    pub(crate) quick_retries: u32,
    /// The write fence last sent to a master (or a promoted node).
    pub(crate) fence: Option<super::write_fence::FenceApplied>,
    /// ... and whether that node acknowledged it.
    pub(crate) fence_confirmed: bool,
    /// The fence in force on the old master when the failover in flight
    /// began (the promoted node's own setting replaces it).
    pub(crate) fence_at_failover: Option<super::FenceSetting>,
    /// The bytes at risk of the failovers this daemon ran, oldest first.
    pub at_risk: std::collections::VecDeque<super::AtRisk>,
    /// The label of the hold last reported ([`Group::report_hold`]), so a
    /// hold is reported on its transitions only. Not persisted.
    pub(crate) reported_hold: super::refusal::Reported,
}

impl Group {
    pub(crate) fn new(spec: GroupSpec, saved: Option<&GroupState>, now: Millis) -> Group {
        let master = saved.map_or_else(|| spec.master.clone(), |s| s.master.clone());
        let mut instances = BTreeMap::new();
        instances.insert(master.clone(), Instance::new(master.clone(), now));
        for addr in spec
            .known_replicas
            .iter()
            .chain(std::iter::once(&spec.master))
        {
            instances
                .entry(addr.clone())
                .or_insert_with(|| Instance::new(addr.clone(), now));
        }
        let mut failover = None;
        if let Some(s) = saved {
            for addr in &s.demoted {
                instances
                    .entry(addr.clone())
                    .or_insert_with(|| Instance::new(addr.clone(), now))
                    .demoted = true;
            }
            for addr in &s.replicas {
                instances
                    .entry(addr.clone())
                    .or_insert_with(|| Instance::new(addr.clone(), now));
            }
            if let Some(f) = &s.failover {
                for addr in [&f.old_master, &f.promoted] {
                    instances
                        .entry(addr.clone())
                        .or_insert_with(|| Instance::new(addr.clone(), now));
                }
                failover = Some(Failover {
                    epoch: f.epoch,
                    old_master: f.old_master.clone(),
                    promoted: f.promoted.clone(),
                    phase: if f.confirmed {
                        FailoverPhase::Reconfiguring
                    } else {
                        FailoverPhase::WaitPromotion
                    },
                    started: now,
                    resumed: true,
                    promotion_asked: 0,
                    min_offset: f.min_offset,
                    paused_offset: 0,
                    paused_until: None,
                    align_offset: 0,
                    align_seen: None,
                    align_idle: None,
                    demoted_first: false,
                    timeline: Timeline::default(),
                });
            }
        }
        Group {
            epoch: saved.map_or(0, |s| s.epoch),
            config_epoch: saved.map_or(0, |s| s.config_epoch),
            master,
            instances,
            failover,
            decided_down: false,
            awaiting: BTreeMap::new(),
            retry_at: 0,
            no_good_at: None,
            master_lost: saved.and_then(|s| s.master_lost.clone()),
            paused: saved.is_some_and(|s| s.paused),
            peers: saved
                .map(|s| {
                    s.known_peers
                        .iter()
                        .map(|p| {
                            let mut peer = Peer::new(p.runid.clone(), p.addr.clone(), now);
                            // Saved only once it had proven itself.
                            peer.verified = true;
                            (p.runid.clone(), peer)
                        })
                        .collect()
                })
                .unwrap_or_default(),
            peered: saved.is_some_and(|s| s.peered || !s.known_peers.is_empty()),
            leader: saved.and_then(|s| s.leader.clone()),
            leader_epoch: saved.map_or(0, |s| s.leader_epoch),
            election: None,
            candidacy_at: None,
            pending_config: None,
            loaded_at: now,
            quick_retries: 0,
            fence: None,
            fence_confirmed: false,
            fence_at_failover: None,
            at_risk: std::collections::VecDeque::new(),
            reported_hold: super::refusal::Reported::default(),
            spec,
        }
    }

    /// Takes `epoch` as the config epoch: the only way the config epoch
    /// changes. It never decreases (a lower one, from a failover that a
    /// newer configuration overtook, leaves it), and never exceeds the
    /// current epoch (which is raised to it): the index's epochs and every
    /// peer's "highest config epoch wins" rest on both. The models check
    /// it over every step.
    pub(crate) fn raise_config_epoch(&mut self, daemon: &mut Daemon, epoch: u64) {
        self.config_epoch = self.config_epoch.max(epoch);
        daemon.current_epoch = daemon.current_epoch.max(self.config_epoch);
    }

    /// The advertised master's instance.
    pub fn master_instance(&self) -> Option<&Instance> {
        self.instances.get(&self.master)
    }

    /// Whether an operator paused the group ([`Core::pause`](crate::Core::pause)).
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Whether the advertised master is up and its link connected: a
    /// manual failover is then a coordinated switchover.
    pub(crate) fn master_reachable(&self) -> bool {
        self.master_instance()
            .is_some_and(|m| !m.sdown && m.failure.is_none())
    }

    /// The persisted form of this group.
    pub fn persisted(&self) -> GroupState {
        GroupState {
            epoch: self.epoch,
            config_epoch: self.config_epoch,
            master: self.master.clone(),
            demoted: self
                .instances
                .values()
                .filter(|i| i.demoted)
                .map(|i| i.addr.clone())
                .collect(),
            master_lost: self.master_lost.clone(),
            paused: self.paused,
            failover: self.failover.as_ref().map(|f| PersistedFailover {
                epoch: f.epoch,
                old_master: f.old_master.clone(),
                promoted: f.promoted.clone(),
                confirmed: f.phase == FailoverPhase::Reconfiguring,
                min_offset: f.min_offset,
            }),
            leader: self.leader.clone(),
            leader_epoch: self.leader_epoch,
            // An unverified peer is a rumour: never saved.
            known_peers: self
                .voters()
                .map(|p| KnownPeer {
                    runid: p.runid.clone(),
                    addr: p.addr.clone(),
                })
                .collect(),
            peered: self.peered,
            replicas: self
                .instances
                .values()
                .filter(|i| i.addr != self.master && !i.demoted)
                .map(|i| i.addr.clone())
                .collect(),
        }
    }

    /// Whether this group is in peer mode: a peer was known once, so every
    /// promotion needs an election.
    pub fn peer_mode(&self) -> bool {
        self.peered || self.voters().next().is_some()
    }
}
