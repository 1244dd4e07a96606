//! One monitored group (a master and its replicas): observations, failure
//! detection, and the failover state machine.
//!
//! # Failover, step by step
//!
//! 1. The master is SDOWN (no valid reply for `down-after`). A connection
//!    that merely *stalled* waits for the link's fresh connect to classify
//!    it. If the master is only *unreachable* (connects time out, or no
//!    failure was classified), fresh INFO from the replicas we can reach
//!    is awaited: if a majority still has an up link with recent I/O from
//!    it, or no replica is reachable at all, we are the ones cut off and
//!    nothing happens. A dead (refused/reset) or hung (a fresh connect
//!    that answers nothing) master needs no witnesses. The mass-failure breaker (in [`Core`](super::Core)) holds
//!    everything back while more than half of all masters are unreachable.
//! 2. A replica is chosen ([`select`](super::select)), the epoch is
//!    incremented, and the state is persisted *before* `REPLICAOF NO ONE`
//!    is sent. Within an epoch the chosen replica never changes.
//! 3. `ROLE` (or INFO) confirms the promotion. The new master is persisted,
//!    then advertised (`+switch-master`), its clients are killed so they
//!    reconnect, and the other replicas are pointed at it `parallel-syncs`
//!    at a time.
//! 4. The old master is marked demoted: whenever it answers as a master it
//!    is told `REPLICAOF <new master>`, and it is only trusted again once it
//!    reports a synced link to the current master.
//!
//! The **empty-restart guard** starts step 2 at once, whatever the timers,
//! when the master's run id changed and its offset fell behind its replicas
//! or its keyspace went empty: replicas must not resync from it.

mod reconcile;

use std::collections::BTreeMap;

use super::events;
use super::select;
use super::types::Addr;
use super::{
    AdminError, Command, GroupState, Info, LinkFailure, Millis, Out, Output, PersistedFailover,
    Reply, Role,
};

/// A replica vouches for a master it heard from within this many seconds.
/// Valkey masters ping their replicas every 10 s when idle.
pub const WITNESS_IO_SECS: u64 = 11;

/// How often a demotion or reconfiguration command may be repeated to an
/// instance that still reports the wrong role.
pub const RESEND_AFTER: Millis = 1_000;

/// How often `ROLE` is asked while a promotion is awaited.
pub const ROLE_POLL: Millis = 100;

/// The longest any failover phase waits, and the longest `FAILOVER …
/// TIMEOUT` sent to Valkey, whatever `failover-timeout` says: every
/// failover has a deadline of its own (an operator may set the timeout to
/// `i64::MAX`, and Valkey overflows on such a `FAILOVER` timeout).
pub const MAX_FAILOVER_WAIT: Millis = 3_600_000;

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
    /// Subjectively down.
    pub sdown: bool,
    /// The last INFO it sent, and when.
    pub info: Option<Info>,
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
}

impl Instance {
    /// An instance nothing is known about yet.
    pub fn placeholder(addr: Addr) -> Instance {
        Instance::new(addr, 0)
    }

    fn new(addr: Addr, now: Millis) -> Instance {
        Instance {
            addr,
            last_ok: now,
            failure: None,
            sdown: false,
            info: None,
            info_at: 0,
            demoted: false,
            reconf: None,
            fix_sent_at: None,
            trusted_run: None,
            role_since: now,
            rebooted_at: None,
        }
    }

    fn reports_master(&self) -> bool {
        matches!(self.info.as_ref().map(|i| &i.role), Some(Role::Master))
    }
}

/// Where a failover stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailoverPhase {
    /// `REPLICAOF NO ONE` sent, not yet acknowledged.
    SendNoOne,
    /// `FAILOVER TO …` sent to the master (coordinated switchover).
    Coordinated,
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
    pub role_asked: Millis,
    /// The promoted replica's offset when it was chosen.
    pub min_offset: u64,
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
    /// Objectively down: SDOWN and not vetoed by witnesses.
    pub odown: bool,
    /// Commands awaiting replies, by token.
    awaiting: BTreeMap<u64, (Addr, Command)>,
    /// No new failover before this time.
    retry_at: Millis,
    /// When "no good replica" was last reported.
    no_good_at: Option<Millis>,
    /// The advertised master restarted without its data (this is the
    /// replication id of its new, empty history): nothing may be pointed
    /// at it, and no replica that shares that history may be promoted,
    /// until it is replaced.
    master_lost: Option<String>,
}

impl Group {
    pub(super) fn new(spec: GroupSpec, saved: Option<&GroupState>, now: Millis) -> Group {
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
                    role_asked: 0,
                    min_offset: f.min_offset,
                });
            }
        }
        Group {
            epoch: saved.map_or(0, |s| s.epoch),
            config_epoch: saved.map_or(0, |s| s.config_epoch),
            master,
            instances,
            failover,
            odown: false,
            awaiting: BTreeMap::new(),
            retry_at: 0,
            no_good_at: None,
            master_lost: saved.and_then(|s| s.master_lost.clone()),
            spec,
        }
    }

    /// The advertised master's instance.
    pub fn master_instance(&self) -> Option<&Instance> {
        self.instances.get(&self.master)
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
            failover: self.failover.as_ref().map(|f| PersistedFailover {
                epoch: f.epoch,
                old_master: f.old_master.clone(),
                promoted: f.promoted.clone(),
                confirmed: f.phase == FailoverPhase::Reconfiguring,
                min_offset: f.min_offset,
            }),
        }
    }

    /// The master is down and may only be unreachable from here.
    pub(super) fn master_unreachable(&self) -> bool {
        self.master_instance()
            .is_some_and(|m| m.sdown && m.failure.is_none_or(|f| f.is_unreachable()))
    }

    fn persist(&self, out: &mut Out) {
        out.push(Output::Persist {
            group: self.spec.name.clone(),
            state: self.persisted(),
        });
    }

    fn log(&self, out: &mut Out, message: String) {
        out.push(Output::Log {
            group: self.spec.name.clone(),
            message,
        });
    }

    fn send(&mut self, to: &Addr, command: Command, token: &mut u64, out: &mut Out) {
        if matches!(&command, Command::ReplicaOf(target) if target == to) {
            // Whatever led here, an instance told to replicate from itself
            // stops taking writes and serves nothing.
            self.log(out, format!("not telling {to} to replicate from itself"));
            return;
        }
        let t = *token;
        *token += 1;
        self.awaiting.insert(t, (to.clone(), command.clone()));
        out.push(Output::Send {
            group: self.spec.name.clone(),
            to: to.clone(),
            token: t,
            command,
        });
    }

    fn kill_clients(&mut self, to: &Addr, token: &mut u64, out: &mut Out) {
        self.send(to, Command::KillNormalClients, token, out);
        self.send(to, Command::KillPubsubClients, token, out);
    }

    /// The event payload for `addr`: master form for the master, replica
    /// form (with ` @ name master`) otherwise.
    fn inst(&self, addr: &Addr) -> String {
        if *addr == self.master {
            events::master(&self.spec.name, addr)
        } else {
            events::replica(addr, &self.spec.name, &self.master)
        }
    }

    pub(super) fn resume(&mut self, now: Millis, token: &mut u64, out: &mut Out) {
        let Some(f) = &self.failover else {
            return;
        };
        let (promoted, epoch) = (f.promoted.clone(), f.epoch);
        self.log(
            out,
            format!("resuming failover epoch {epoch} towards {promoted} after a restart"),
        );
        if f.phase == FailoverPhase::Reconfiguring {
            self.start_reconfiguration(now);
        } else {
            // The promotion may or may not have happened before we stopped:
            // ask, and abandon the failover if it did not.
            self.send(&promoted, Command::Info, token, out);
            if let Some(f) = &mut self.failover {
                f.role_asked = now;
            }
        }
    }

    pub(super) fn ping_ok(&mut self, now: Millis, addr: &Addr, _token: &mut u64, _out: &mut Out) {
        if let Some(i) = self.instances.get_mut(addr) {
            i.last_ok = now;
            i.failure = None;
            i.rebooted_at = None;
        }
    }

    pub(super) fn link_down(&mut self, addr: &Addr, failure: LinkFailure) {
        if let Some(i) = self.instances.get_mut(addr) {
            i.failure = Some(failure);
        }
    }

    pub(super) fn info(
        &mut self,
        now: Millis,
        addr: &Addr,
        info: Info,
        myid: &str,
        token: &mut u64,
        out: &mut Out,
    ) {
        let Some(inst) = self.instances.get_mut(addr) else {
            return;
        };
        inst.last_ok = now;
        inst.failure = None;
        let previous = inst.info.replace(info.clone());
        inst.info_at = now;
        let role_changed = previous
            .as_ref()
            .is_none_or(|p| matches!(p.role, Role::Master) != matches!(info.role, Role::Master));
        if role_changed {
            inst.role_since = now;
        }

        // The empty-restart guard: a restart seen happening (new run id),
        // or, on first sight (e.g. after our own restart), an empty master
        // behind the replicas that follow it.
        let rebooted = previous.as_ref().is_some_and(|p| p.run_id != info.run_id);
        if rebooted {
            out.event("+reboot", self.inst(addr));
            if *addr == self.master
                && self.spec.reboot_down_after > 0
                && let Some(i) = self.instances.get_mut(addr)
            {
                i.rebooted_at = Some(now);
            }
        }
        let suspect = match &previous {
            Some(prev) if rebooted => self.lost_data(prev, &info),
            _ => self.untrusted_empty_master(),
        };
        if *addr == self.master && self.failover.is_none() && self.master_lost.is_none() && suspect
        {
            self.log(
                out,
                format!(
                    "master {addr} restarted without its data (run id {}, offset {}, keys {:?}); \
                     failing over before replicas resync from it",
                    info.run_id, info.offset, info.keys
                ),
            );
            self.master_lost = Some(info.replid.clone());
            self.start_failover(now, myid, Some(&info.replid), token, out);
            return;
        }
        // A replica of the master whose history changed and whose offset
        // went back resynced from a master that lost its data.
        if let Some(prev) = &previous
            && *addr != self.master
            && self.master_lost.is_none()
            && prev.replid != info.replid
            && info.offset < prev.offset
            // It held data before: a replica's first sync from a new,
            // idle master also takes its offset from 1 to 0.
            && prev.keys.is_some_and(|k| k > 0)
            && matches!(&info.role, Role::Replica { master, .. } if *master == self.master)
            && self.failover.is_none()
        {
            self.log(
                out,
                format!(
                    "{addr} resynced from {} and went back from offset {} to {}: the master lost its data",
                    self.master, prev.offset, info.offset
                ),
            );
            self.master_lost = Some(info.replid.clone());
            if now >= self.retry_at {
                let replid = info.replid.clone();
                self.start_failover(now, myid, Some(&replid), token, out);
            }
            return;
        }
        if let Some(prev) = &previous {
            let was_master = matches!(prev.role, Role::Master);
            let is_master = matches!(info.role, Role::Master);
            if was_master != is_master {
                let role = if is_master { "master" } else { "slave" };
                let payload = format!("{} new reported role is {role}", self.inst(addr));
                out.event("+role-change", payload);
            }
        }

        // Replicas the master lists join the group.
        if *addr == self.master && matches!(info.role, Role::Master) {
            for r in &info.replicas {
                if !self.instances.contains_key(&r.addr) {
                    self.instances
                        .insert(r.addr.clone(), Instance::new(r.addr.clone(), now));
                    out.event("+slave", self.inst(&r.addr));
                    out.push(Output::Watch {
                        group: self.spec.name.clone(),
                        addr: r.addr.clone(),
                    });
                }
            }
        }

        // The promoted replica reports on its promotion.
        if let Some(f) = &self.failover
            && f.promoted == *addr
            && f.phase != FailoverPhase::Reconfiguring
        {
            let (min_offset, resumed, phase) = (f.min_offset, f.resumed, f.phase);
            match info.role {
                Role::Master if info.offset >= min_offset => {
                    self.confirm(now, token, out);
                }
                Role::Master => {
                    // It resynced from somewhere (an empty restarted
                    // master) between being chosen and being promoted:
                    // its data is gone. Never advertise it; choose again,
                    // and do not trust it until it has resynced.
                    if let Some(i) = self.instances.get_mut(addr) {
                        i.demoted = true;
                    }
                    self.log(
                        out,
                        format!(
                            "{addr} lost its data before its promotion (offset {} < {min_offset}); \
                             abandoning epoch {}",
                            info.offset, self.epoch
                        ),
                    );
                    self.failover = None;
                    self.retry_at = now;
                    self.persist(out);
                }
                Role::Replica { .. } if resumed && phase == FailoverPhase::WaitPromotion => {
                    // The promotion never happened before the daemon
                    // restarted: give this epoch up; a new one starts if
                    // the master is still down.
                    self.log(
                        out,
                        format!("abandoning the interrupted failover: {addr} was never promoted"),
                    );
                    self.failover = None;
                    self.persist(out);
                }
                Role::Replica { .. } => {}
            }
            if matches!(info.role, Role::Master) {
                return;
            }
        }

        if self.master_lost.is_none() {
            self.trust_master();
        }
        // A replica's report can reveal that the master we first saw after
        // our own start is an empty restart behind its replicas.
        if *addr != self.master
            && self.failover.is_none()
            && self.master_lost.is_none()
            && self.untrusted_empty_master()
        {
            let replid = self
                .master_instance()
                .and_then(|m| m.info.as_ref())
                .map(|i| i.replid.clone())
                .unwrap_or_default();
            self.log(
                out,
                format!(
                    "master {} holds no data and is behind its replicas; failing over",
                    self.master
                ),
            );
            self.master_lost = Some(replid.clone());
            self.start_failover(now, myid, Some(&replid), token, out);
            return;
        }
        // The persisted view may be stale: adopt the master the others
        // follow before correcting anyone.
        self.reconcile(now, out);
        match &info.role {
            Role::Master if *addr != self.master => self.demote(now, addr, token, out),
            // The advertised master itself reports a replica: `reconcile`
            // and the failure detector deal with it, never a REPLICAOF.
            Role::Replica { .. } if *addr == self.master => {}
            Role::Replica {
                master, link_up, ..
            } => self.replica_report(now, addr, master.clone(), *link_up, token, out),
            _ => {}
        }
    }

    /// Whether a restarted master lost its data: its offset is behind what
    /// its replicas (or it, before) had, or its keyspace went empty.
    fn lost_data(&self, prev: &Info, now: &Info) -> bool {
        let best_replica = self
            .instances
            .values()
            .filter(|i| i.addr != self.master)
            .filter_map(|i| i.info.as_ref())
            // Only replicas holding data: an unsynced one reports offset 1.
            .filter(|i| i.replid != now.replid && i.keys.is_some_and(|k| k > 0))
            .map(|i| i.offset)
            .max()
            .unwrap_or(0);
        let emptied = now.keys == Some(0) && prev.keys.is_some_and(|k| k > 0);
        now.offset < best_replica
            || now.offset < prev.offset && prev.replid != now.replid
            || emptied
    }

    /// The master's current process was never seen healthy (holding keys,
    /// or sharing its replication history with a replica), holds no keys,
    /// and a replica following it holds keys and is further ahead on
    /// another history:
    /// it restarted empty while we were not watching (e.g. while Valkyrie
    /// itself was down).
    fn untrusted_empty_master(&self) -> bool {
        let Some(m) = self.master_instance() else {
            return false;
        };
        let Some(info) = &m.info else {
            return false;
        };
        if m.trusted_run.as_deref() == Some(info.run_id.as_str()) || info.keys != Some(0) {
            return false;
        }
        self.instances.values().any(|i| {
            i.addr != m.addr
                && i.info.as_ref().is_some_and(|r| {
                    let follows =
                        matches!(&r.role, Role::Replica { master, .. } if *master == m.addr);
                    let stray = matches!(r.role, Role::Master);
                    // Only a replica that holds data is evidence: one that
                    // has never synced reports an offset of 1 on its own
                    // replication id, as does every replica of a brand-new
                    // master before its first sync.
                    let holds_data = r.keys.is_some_and(|k| k > 0);
                    (follows || stray)
                        && holds_data
                        && r.replid != info.replid
                        && r.offset > info.offset
                })
        })
    }

    /// Marks the master's current process as healthy once it shows data or
    /// a replica in sync with it.
    fn trust_master(&mut self) {
        let master = self.master.clone();
        let Some(info) = self.instances.get(&master).and_then(|m| m.info.clone()) else {
            return;
        };
        if !matches!(info.role, Role::Master) {
            return;
        }
        let synced = self.instances.values().any(|i| {
            i.addr != master && i.info.as_ref().is_some_and(|r| {
                matches!(&r.role, Role::Replica { master: m, link_up: true, .. } if *m == master)
                    && r.replid == info.replid
            })
        });
        // A synced replica vouches only if nobody holds more data on another
        // history (after a restart while we were down, replicas may have
        // resynced from the empty process).
        let ahead_elsewhere = self.instances.values().any(|i| {
            i.addr != master
                && i.info
                    .as_ref()
                    .is_some_and(|r| r.replid != info.replid && r.offset > info.offset)
        });
        if info.keys.is_some_and(|k| k > 0) || (synced && !ahead_elsewhere) {
            if let Some(m) = self.instances.get_mut(&master) {
                m.trusted_run = Some(info.run_id.clone());
            }
        }
    }

    /// An instance that is not the advertised master says it is one: an
    /// old master back, or a stray promotion. Point it at the master.
    fn demote(&mut self, now: Millis, addr: &Addr, token: &mut u64, out: &mut Out) {
        if self.master_lost.is_some() {
            // Never point anyone at a master that lost its data.
            return;
        }
        // Nor at a master we cannot see, or one about to be replaced: a
        // failover in flight reconfigures everyone once it is confirmed.
        if self
            .master_instance()
            .is_none_or(|m| m.sdown || m.failure.is_some())
            || !self.master_confirmed()
            || self
                .failover
                .as_ref()
                .is_some_and(|f| f.phase != FailoverPhase::Reconfiguring)
        {
            return;
        }
        if self
            .failover
            .as_ref()
            .is_some_and(|f| f.phase != FailoverPhase::Reconfiguring && f.promoted == *addr)
        {
            return;
        }
        if !self.may_resend(addr, now) {
            return;
        }
        let Some(inst) = self.instances.get_mut(addr) else {
            return;
        };
        let was_demoted = inst.demoted;
        inst.demoted = true;
        if !was_demoted {
            self.persist(out);
        }
        let master = self.master.clone();
        out.event("+convert-to-slave", self.inst(addr));
        self.send(addr, Command::ReplicaOf(master), token, out);
        self.kill_clients(addr, token, out);
    }

    /// Whether a corrective command may go to `addr` now (at most one per
    /// [`RESEND_AFTER`]); records the send if so.
    fn may_resend(&mut self, addr: &Addr, now: Millis) -> bool {
        let Some(inst) = self.instances.get_mut(addr) else {
            return false;
        };
        if inst
            .fix_sent_at
            .is_some_and(|t| now.saturating_sub(t) < RESEND_AFTER)
        {
            return false;
        }
        inst.fix_sent_at = Some(now);
        true
    }

    fn replica_report(
        &mut self,
        now: Millis,
        addr: &Addr,
        points_to: Addr,
        link_up: bool,
        token: &mut u64,
        out: &mut Out,
    ) {
        let master = self.master.clone();
        // Reconfiguration progress.
        if let Some(f) = &self.failover
            && f.phase == FailoverPhase::Reconfiguring
            && points_to == master
            && link_up
            && let Some(inst) = self.instances.get_mut(addr)
            && matches!(inst.reconf, Some(Reconf::Sent(_) | Reconf::InProgress(_)))
        {
            inst.reconf = Some(Reconf::Done);
            out.event("+slave-reconf-done", self.inst(addr));
            self.kill_clients(addr, token, out);
            return;
        }
        let Some(inst) = self.instances.get_mut(addr) else {
            return;
        };
        if points_to == master {
            if link_up && inst.demoted {
                // A fenced old master has resynced from the current master:
                // it is an ordinary replica again.
                inst.demoted = false;
                self.persist(out);
            }
            return;
        }
        // Pointing elsewhere. Leave it alone while a failover is underway,
        // while the master itself is down (the failover will fix it), and
        // until the master's own report confirms it is one: the replica
        // may know better than a stale view.
        let master_down = self
            .master_instance()
            .is_none_or(|m| m.sdown || m.failure.is_some());
        if self.failover.is_some()
            || master_down
            || !self.master_confirmed()
            || self.master_lost.is_some()
        {
            return;
        }
        // It follows a node we know nothing about, or one that reports
        // itself master: learn about that node, and let the rules for
        // masters (adoption, the empty-restart guard, demotion) decide
        // first. Pointing a replica that holds data at our master before
        // that could resync it from a node that lost everything.
        match self.instances.get(&points_to) {
            None => {
                self.instances
                    .insert(points_to.clone(), Instance::new(points_to.clone(), now));
                out.push(Output::Watch {
                    group: self.spec.name.clone(),
                    addr: points_to,
                });
                return;
            }
            Some(x) if x.info.is_none() || x.reports_master() => return,
            Some(_) => {}
        }
        if !self.may_resend(addr, now) {
            return;
        }
        out.event("+fix-slave-config", self.inst(addr));
        self.send(addr, Command::ReplicaOf(master), token, out);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn reply(
        &mut self,
        now: Millis,
        addr: &Addr,
        t: u64,
        reply: Reply,
        myid: &str,
        token: &mut u64,
        out: &mut Out,
    ) {
        let Some((to, command)) = self.awaiting.remove(&t) else {
            return;
        };
        if to != *addr {
            return;
        }
        if let Some(i) = self.instances.get_mut(addr)
            && !matches!(reply, Reply::Failed(_))
        {
            i.last_ok = now;
            i.failure = None;
        }
        let phase = self
            .failover
            .as_ref()
            .map(|f| (f.phase, f.promoted.clone(), f.resumed));
        match (command, reply) {
            (Command::ReplicaOfNoOne, Reply::Ok) => {
                if let Some((FailoverPhase::SendNoOne, promoted, _)) = phase
                    && promoted == *addr
                {
                    if let Some(f) = &mut self.failover {
                        f.phase = FailoverPhase::WaitPromotion;
                        f.role_asked = now;
                    }
                    out.event("+failover-state-wait-promotion", self.inst(addr));
                    self.send(addr, Command::Info, token, out);
                }
            }
            (Command::Info, Reply::Info(info)) => {
                self.info(now, addr, info, myid, token, out);
            }
            (Command::Failover { .. }, Reply::Failed(e))
                if phase.is_some_and(|(p, _, _)| p == FailoverPhase::Coordinated) =>
            {
                self.log(out, format!("coordinated failover refused by {addr}: {e}"));
                self.failover = None;
                self.retry_at = now;
                self.persist(out);
            }
            (Command::Failover { .. }, Reply::Ok) => {
                if let Some(f) = &mut self.failover
                    && f.phase == FailoverPhase::Coordinated
                {
                    f.phase = FailoverPhase::WaitPromotion;
                    f.role_asked = now;
                    let promoted = f.promoted.clone();
                    out.event("+failover-state-wait-promotion", self.inst(&promoted));
                    self.send(&promoted, Command::Info, token, out);
                }
            }
            (Command::ReplicaOf(target), Reply::Ok) => {
                if let Some(inst) = self.instances.get_mut(addr)
                    && let Some(Reconf::Sent(at)) = inst.reconf
                    && target == self.master
                {
                    inst.reconf = Some(Reconf::InProgress(at));
                    out.event("+slave-reconf-inprog", self.inst(addr));
                }
            }
            (command, Reply::Failed(e)) => {
                self.log(out, format!("{command:?} to {addr} failed: {e}"));
            }
            _ => {}
        }
    }

    /// The chosen replica reports itself master: persist, advertise,
    /// reconfigure.
    fn confirm(&mut self, now: Millis, token: &mut u64, out: &mut Out) {
        let Some(f) = &mut self.failover else {
            return;
        };
        f.phase = FailoverPhase::Reconfiguring;
        f.started = now;
        self.config_epoch = f.epoch;
        self.master_lost = None;
        let old = f.old_master.clone();
        let new = f.promoted.clone();
        // Promotion event in terms of the old topology.
        out.event("+promoted-slave", self.inst(&new));
        self.master = new.clone();
        self.instances
            .entry(new.clone())
            .or_insert_with(|| Instance::new(new.clone(), now))
            .demoted = false;
        if let Some(o) = self.instances.get_mut(&old) {
            o.demoted = true;
            o.fix_sent_at = None;
        }
        self.odown = false;
        // Durable before anyone is told.
        self.persist(out);
        out.event(
            "+failover-state-reconf-slaves",
            events::master(&self.spec.name, &old),
        );
        out.event(
            "+switch-master",
            events::switch_master(&self.spec.name, &old, &new),
        );
        out.push(Output::Topology {
            group: self.spec.name.clone(),
        });
        self.kill_clients(&new, token, out);
        self.start_reconfiguration(now);
        // The old master, if it answers, is demoted right away.
        if self
            .instances
            .get(&old)
            .is_some_and(|o| !o.sdown && o.failure.is_none() && o.reports_master())
        {
            self.demote(now, &old, token, out);
        }
    }

    fn start_reconfiguration(&mut self, _now: Millis) {
        let (master, old) = match &self.failover {
            Some(f) => (self.master.clone(), f.old_master.clone()),
            None => return,
        };
        for inst in self.instances.values_mut() {
            inst.reconf = if inst.addr == master || inst.addr == old {
                None
            } else {
                Some(Reconf::Pending)
            };
        }
    }

    /// Refreshes SDOWN flags and publishes transitions.
    pub(super) fn detect(&mut self, now: Millis, out: &mut Out) {
        let down_after = self.spec.down_after;
        let master = self.master.clone();
        let not_a_master =
            self.master_reports_replica_too_long(now) || self.master_reboot_too_long(now);
        let mut changes = Vec::new();
        for inst in self.instances.values_mut() {
            let down = now.saturating_sub(inst.last_ok) > down_after
                || (inst.addr == master && not_a_master);
            if down != inst.sdown {
                inst.sdown = down;
                changes.push((inst.addr.clone(), down));
            }
        }
        for (addr, down) in changes {
            let payload = self.inst(&addr);
            out.event(if down { "+sdown" } else { "-sdown" }, payload);
            if addr == self.master && !down && self.odown {
                self.odown = false;
                out.event("-odown", events::master(&self.spec.name, &addr));
            }
        }
    }

    /// The witnesses' verdict on an SDOWN master.
    fn verdict(&self, now: Millis) -> Verdict {
        let Some(m) = self.master_instance() else {
            return Verdict::Go;
        };
        // It answers, but as a replica, and nobody it follows could be
        // adopted: replicas that vouch for its link prove nothing here.
        if self.master_reports_replica_too_long(now) || self.master_reboot_too_long(now) {
            return Verdict::Go;
        }
        // Dead (refused, reset) or hung (a fresh connect answered nothing):
        // only the master itself can be at fault.
        if !m.failure.is_none_or(|f| f.is_unreachable()) {
            return Verdict::Go;
        }
        let silent_for = now.saturating_sub(m.last_ok);
        let grace = self.spec.down_after.saturating_mul(2);
        // An established connection that went silent proves nothing: the
        // link is already making a fresh connect, and its outcome decides
        // between hung and unreachable. Bounded, in case it never comes.
        if m.failure.is_some_and(|f| f.is_unclassified()) && silent_for < grace {
            return Verdict::Wait;
        }
        let reachable: Vec<&Instance> = self
            .instances
            .values()
            .filter(|i| i.addr != self.master && !i.sdown && i.failure.is_none())
            .collect();
        // Unreachable master and no replica reachable either: we are the
        // ones cut off as likely as not, and there is nobody to promote.
        if reachable.is_empty() {
            return Verdict::Veto;
        }
        let fresh: Vec<&&Instance> = reachable
            .iter()
            .filter(|i| i.info.is_some() && i.info_at > m.last_ok)
            .collect();
        // Give reachable replicas one down-after period to report.
        if fresh.len() < reachable.len() && silent_for < grace {
            return Verdict::Wait;
        }
        if fresh.is_empty() {
            return Verdict::Go;
        }
        let vouching = fresh.iter().filter(|i| self.vouches(i)).count();
        if vouching * 2 > fresh.len() {
            Verdict::Veto
        } else {
            Verdict::Go
        }
    }

    /// Whether a replica's fresh INFO shows the advertised master alive:
    /// an up link that carried data from it within [`WITNESS_IO_SECS`].
    /// A master that takes writes streams them (its replicas' offsets
    /// advance and their last I/O stays at 0), and an idle one pings its
    /// replicas every 10 s, so a live master always satisfies this; a dead
    /// or hung one stops satisfying it within 11 s.
    fn vouches(&self, replica: &Instance) -> bool {
        matches!(
            replica.info.as_ref().map(|x| &x.role),
            Some(Role::Replica { master, link_up: true, last_io_secs: Some(io), .. })
                if *master == self.master && *io <= WITNESS_IO_SECS
        )
    }

    /// Valkey 8's `master-reboot-down-after-period`: the master restarted
    /// and has not answered a PING with `PONG` for longer than the period.
    fn master_reboot_too_long(&self, now: Millis) -> bool {
        let period = self.spec.reboot_down_after;
        period > 0
            && self.master_instance().is_some_and(|m| {
                m.rebooted_at
                    .is_some_and(|t| now.saturating_sub(t) > period)
            })
    }

    /// Advances timers and the failover.
    pub(super) fn step(
        &mut self,
        now: Millis,
        breaker: bool,
        myid: &str,
        token: &mut u64,
        out: &mut Out,
    ) {
        if self.failover.is_some() {
            self.step_failover(now, token, out);
            return;
        }
        if let Some(replid) = self.master_lost.clone()
            && now >= self.retry_at
        {
            // The advertised master lost its data and an earlier attempt to
            // replace it failed: try again, whatever the breaker says
            // (the master answers; only its data is gone).
            self.start_failover(now, myid, Some(&replid), token, out);
            return;
        }
        let master_down = self.master_instance().is_some_and(|m| m.sdown);
        if !master_down {
            return;
        }
        // Re-judged at every step, not latched: witnesses that appear
        // later (right after our own restart, say) can still veto.
        match self.verdict(now) {
            Verdict::Wait => return,
            Verdict::Veto => {
                if self.odown {
                    self.odown = false;
                    out.event("-odown", events::master(&self.spec.name, &self.master));
                }
                return;
            }
            Verdict::Go => {
                if !self.odown {
                    self.odown = true;
                    out.event(
                        "+odown",
                        format!(
                            "{} #quorum 1/1",
                            events::master(&self.spec.name, &self.master)
                        ),
                    );
                }
            }
        }
        if breaker || now < self.retry_at {
            return;
        }
        self.start_failover(now, myid, None, token, out);
    }

    /// Picks a replica, bumps the epoch, persists, sends `REPLICAOF NO
    /// ONE`. `exclude_replid` keeps out replicas that already resynced
    /// from a master that lost its data.
    fn start_failover(
        &mut self,
        now: Millis,
        myid: &str,
        exclude_replid: Option<&str>,
        token: &mut u64,
        out: &mut Out,
    ) -> bool {
        // Choose only from a complete picture: every instance that is not
        // known to be down must have reported at least once (right after a
        // daemon restart they have not).
        if self
            .instances
            .values()
            .any(|i| i.addr != self.master && i.info.is_none() && !i.sdown && i.failure.is_none())
        {
            return false;
        }
        if self.epoch_exhausted(now, out) {
            return false;
        }
        let Some(candidate) = self.candidate(now, exclude_replid) else {
            if self
                .no_good_at
                .is_none_or(|t| now.saturating_sub(t) >= self.spec.failover_timeout)
            {
                self.no_good_at = Some(now);
                out.event(
                    "-failover-abort-no-good-slave",
                    events::master(&self.spec.name, &self.master),
                );
            }
            return false;
        };
        self.begin(now, myid, candidate.clone(), FailoverPhase::SendNoOne, out);
        self.send(&candidate, Command::ReplicaOfNoOne, token, out);
        true
    }

    /// Every failover needs an epoch of its own: at `u64::MAX` none can
    /// start (a state file refuses epochs that large, so only a hand-made
    /// one gets here). Logged at most once per `failover-timeout`.
    fn epoch_exhausted(&mut self, now: Millis, out: &mut Out) -> bool {
        if self.epoch < u64::MAX {
            return false;
        }
        if self
            .no_good_at
            .is_none_or(|t| now.saturating_sub(t) >= self.failover_deadline())
        {
            self.no_good_at = Some(now);
            self.log(
                out,
                "the failover epoch is at its maximum: no failover can start".to_string(),
            );
        }
        true
    }

    fn candidate(&self, now: Millis, exclude_replid: Option<&str>) -> Option<Addr> {
        // When the master lost its data, replicas that share its new (empty)
        // history are out, and a stray master that kept the data is as good
        // a candidate as a replica (promoting it again is a no-op).
        select::choose_with(self, now, exclude_replid)
    }

    fn begin(
        &mut self,
        now: Millis,
        myid: &str,
        candidate: Addr,
        phase: FailoverPhase,
        out: &mut Out,
    ) {
        self.epoch = self.epoch.saturating_add(1);
        self.no_good_at = None;
        let min_offset = self
            .instances
            .get(&candidate)
            .and_then(|i| i.info.as_ref())
            .map_or(0, |i| i.offset);
        self.failover = Some(Failover {
            epoch: self.epoch,
            old_master: self.master.clone(),
            promoted: candidate.clone(),
            phase,
            started: now,
            resumed: false,
            role_asked: now,
            min_offset,
        });
        // Durable before acting on it.
        self.persist(out);
        let m = events::master(&self.spec.name, &self.master);
        out.event("+new-epoch", self.epoch.to_string());
        out.event("+try-failover", m.clone());
        out.event("+vote-for-leader", format!("{myid} {}", self.epoch));
        out.event("+elected-leader", m.clone());
        out.event("+failover-state-select-slave", m);
        out.event("+selected-slave", self.inst(&candidate));
        if phase == FailoverPhase::SendNoOne {
            out.event("+failover-state-send-slaveof-noone", self.inst(&candidate));
        }
    }

    /// `SENTINEL RESET`: forget every replica (they are rediscovered from
    /// the master's next INFO) and the transient failure state. What must
    /// survive — epochs, the advertised master, fenced old masters, a lost
    /// master — is kept, and a group in the middle of a failover is left
    /// alone: abandoning a promotion halfway could leave two masters.
    /// Returns whether the group was reset.
    pub(super) fn reset(&mut self, out: &mut Out) -> bool {
        if self.failover.is_some() {
            self.log(
                out,
                "SENTINEL RESET skipped: a failover is in progress".to_string(),
            );
            return false;
        }
        let master = self.master.clone();
        let forgotten: Vec<Addr> = self
            .instances
            .values()
            .filter(|i| i.addr != master && !i.demoted)
            .map(|i| i.addr.clone())
            .collect();
        for addr in &forgotten {
            self.instances.remove(addr);
            out.push(Output::Unwatch {
                group: self.spec.name.clone(),
                addr: addr.clone(),
            });
        }
        self.awaiting.retain(|_, (a, _)| !forgotten.contains(a));
        self.odown = false;
        self.retry_at = 0;
        self.no_good_at = None;
        out.event("+reset-master", events::master(&self.spec.name, &master));
        out.push(Output::Topology {
            group: self.spec.name.clone(),
        });
        true
    }

    pub(super) fn manual_failover(
        &mut self,
        now: Millis,
        myid: &str,
        token: &mut u64,
        out: &mut Out,
    ) -> Result<(), AdminError> {
        if self.failover.is_some() {
            return Err(AdminError::InProgress);
        }
        if self.epoch_exhausted(now, out) {
            return Err(AdminError::EpochExhausted);
        }
        let master_up = self
            .master_instance()
            .is_some_and(|m| !m.sdown && m.failure.is_none());
        let candidate = select::choose(self, now).ok_or(AdminError::NoGoodReplica)?;
        if !master_up {
            // Nobody to coordinate with: a forced failover.
            self.begin(now, myid, candidate.clone(), FailoverPhase::SendNoOne, out);
            self.send(&candidate, Command::ReplicaOfNoOne, token, out);
            return Ok(());
        }
        self.begin(
            now,
            myid,
            candidate.clone(),
            FailoverPhase::Coordinated,
            out,
        );
        let master = self.master.clone();
        let timeout = self.failover_deadline();
        self.send(
            &master,
            Command::Failover {
                to: candidate,
                timeout,
            },
            token,
            out,
        );
        Ok(())
    }

    fn step_failover(&mut self, now: Millis, token: &mut u64, out: &mut Out) {
        let Some(f) = self.failover.clone() else {
            return;
        };
        match f.phase {
            FailoverPhase::SendNoOne
            | FailoverPhase::Coordinated
            | FailoverPhase::WaitPromotion => {
                // Past the deadline, or the chosen replica died on the
                // way: nothing will confirm this promotion any more.
                let candidate_down = self.instances.get(&f.promoted).is_some_and(|i| i.sdown);
                if now.saturating_sub(f.started) > self.failover_deadline() || candidate_down {
                    out.event("-failover-abort-slave-timeout", self.inst(&f.promoted));
                    self.failover = None;
                    self.retry_at = now.saturating_add(self.failover_deadline());
                    self.persist(out);
                    return;
                }
                if f.phase == FailoverPhase::WaitPromotion
                    && now.saturating_sub(f.role_asked) >= ROLE_POLL
                {
                    if let Some(x) = &mut self.failover {
                        x.role_asked = now;
                    }
                    self.send(&f.promoted, Command::Info, token, out);
                }
            }
            FailoverPhase::Reconfiguring => self.step_reconf(now, &f, token, out),
        }
    }

    /// `failover-timeout`, capped at [`MAX_FAILOVER_WAIT`].
    fn failover_deadline(&self) -> Millis {
        self.spec.failover_timeout.min(MAX_FAILOVER_WAIT)
    }

    fn step_reconf(&mut self, now: Millis, f: &Failover, token: &mut u64, out: &mut Out) {
        let timeout = self.failover_deadline();
        let mut in_flight = 0usize;
        let mut timed_out = Vec::new();
        for inst in self.instances.values_mut() {
            match inst.reconf {
                Some(Reconf::Sent(at) | Reconf::InProgress(at)) => {
                    if now.saturating_sub(at) > timeout {
                        inst.reconf = Some(Reconf::Done);
                        timed_out.push(inst.addr.clone());
                    } else {
                        in_flight += 1;
                    }
                }
                Some(Reconf::Pending) if inst.sdown || inst.failure.is_some() => {
                    // Down replicas are fixed when they come back.
                    inst.reconf = Some(Reconf::Done);
                }
                _ => {}
            }
        }
        for addr in timed_out {
            out.event("-slave-reconf-sent-timeout", self.inst(&addr));
        }
        let pending: Vec<Addr> = self
            .instances
            .values()
            .filter(|i| i.reconf == Some(Reconf::Pending))
            .map(|i| i.addr.clone())
            .collect();
        let slots = (self.spec.parallel_syncs.max(1) as usize).saturating_sub(in_flight);
        for addr in pending.iter().take(slots) {
            if let Some(inst) = self.instances.get_mut(addr) {
                inst.reconf = Some(Reconf::Sent(now));
            }
            out.event("+slave-reconf-sent", self.inst(addr));
            self.send(addr, Command::ReplicaOf(self.master.clone()), token, out);
        }
        let unfinished = self.instances.values().any(|i| {
            matches!(
                i.reconf,
                Some(Reconf::Pending | Reconf::Sent(_) | Reconf::InProgress(_))
            )
        });
        if !unfinished {
            for inst in self.instances.values_mut() {
                inst.reconf = None;
            }
            let channel = if now.saturating_sub(f.started) > timeout {
                "+failover-end-for-timeout"
            } else {
                "+failover-end"
            };
            out.event(channel, events::master(&self.spec.name, &self.master));
            self.failover = None;
            self.persist(out);
        }
    }
}

/// What the replicas say about an SDOWN master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Not every reachable replica has reported since the master went
    /// silent.
    Wait,
    /// A majority still hears from the master: we are the ones cut off.
    Veto,
    /// Fail over.
    Go,
}
