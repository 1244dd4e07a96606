//! The sans-IO decision core: every failover decision, as a deterministic
//! function of (state, input) → (state, outputs).
//!
//! Nothing here reads a clock, opens a socket, spawns a task or draws a
//! random number. The shell (`runtime`) feeds the core with link results and
//! ticks, each stamped with monotonic milliseconds, and carries out what it
//! returns — in order, persisting [`Output::Persist`] durably before
//! executing anything after it. The same code runs in production, in the
//! unit and property tests, and inside the stateright model.
//!
//! # What the core owns
//!
//! - failure detection (SDOWN after `down-after` without a valid reply);
//! - the replica-witness veto when a master is only *unreachable*;
//! - TILT (the mass-failure pause);
//! - replica choice ([`select`]);
//! - the readiness verdict ([`readiness`]): what a failure now would do,
//!   from the rules the failover path itself calls;
//! - promotion, confirmation, advertisement, reconfiguration, fencing of the
//!   old master, and the empty-restart guard ([`group`]);
//! - the persisted state ([`State`]) and the Sentinel events to publish;
//! - planned switchovers across many groups ([`plan`]): their order,
//!   pre-flight and stop.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod events;
pub mod group;
mod messages;
pub mod peering;
mod persisted;
pub mod plan;
pub mod select;
#[cfg(test)]
mod tests;
mod tilt;
pub mod timers;
mod types;

use std::collections::{BTreeMap, BTreeSet};

pub use events::{Channel, Event, Level};
pub use group::readiness::{
    self, Candidate, FenceView, QuorumView, Readiness, Reason, ReplicaVerdict,
};
pub use group::{
    Abort, AtRisk, FailoverPhase, FenceMode, FenceSetting, Fenced, Group, GroupSpec, Instance, Op,
    Outcome, Refusal, SwitchoverAbort, Trigger, VetoCause, WitnessVerdict, WriteFence,
};
pub use messages::{Command, CrashPoint, FailoverResult, Input, Output, ReconfRole, Reply};
pub use peering::{DownAnswer, EpochError, Hello, HelloVia, KnownPeer, Peer};
pub use persisted::{GroupState, PersistedFailover, State};
pub use timers::Timers;
pub use types::{
    Addr, HostError, InfoError, InfoReport, LinkFailure, ListedReplica, MAX_HOST_LEN, Millis, Role,
    check_host,
};

/// Errors of administrative requests, with Sentinel's texts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// `-ERR No such master with that name`.
    #[error("ERR No such master with that name")]
    NoSuchMaster,
    /// `-INPROG Failover already in progress`.
    #[error("INPROG Failover already in progress")]
    InProgress,
    /// `-NOGOODSLAVE No suitable replica to promote`.
    #[error("NOGOODSLAVE No suitable replica to promote")]
    NoGoodReplica,
    /// `SENTINEL FAILOVER` before every live replica reported (right after
    /// the daemon started): the code is Sentinel's, the text says why.
    #[error(
        "NOGOODSLAVE No suitable replica to promote yet: not every replica has reported since Valkyrie started"
    )]
    NotEveryReplicaReported,
    /// `-ERR Duplicate master name.`
    #[error("ERR Duplicate master name.")]
    DuplicateMaster,
    /// The epoch cannot grow any more: no failover can be told apart from
    /// the previous one.
    #[error("ERR the failover epoch is exhausted (at its maximum); reset the state file")]
    EpochExhausted,
    /// A switchover asked away from one master, when another is the
    /// master by now (an earlier request moved it): nothing is done.
    #[error("ERR the master is no longer the one to switch over from")]
    MasterMoved,
    /// The group is paused (`VALKYRIE PAUSE`): no promotion starts, the
    /// operator's included, until it is resumed.
    #[error("ERR the group is paused: VALKYRIE RESUME it first")]
    Paused,
}

/// Tunables that are not per group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// This daemon's 40-hex id (`SENTINEL MYID`), used in events.
    pub myid: String,
    /// `sentinel resolve-hostnames`: peers may announce host names.
    /// Off, every address a hello carries must be an IP address.
    pub resolve_hostnames: bool,
    /// The `SENTINEL DEBUG` timers ([`Core::set_timers`] changes them).
    pub timers: Timers,
}

impl Settings {
    /// The settings of a daemon with id `myid` and every other field at
    /// its default.
    pub fn new(myid: impl Into<String>) -> Settings {
        Settings {
            myid: myid.into(),
            resolve_hostnames: false,
            timers: Timers::default(),
        }
    }
}

/// What every group's rules share: this daemon's id, the global current
/// epoch, the jitter the shell drew for this input, and TILT.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Daemon {
    /// This daemon's id.
    pub(crate) myid: String,
    /// The global current epoch: every failover epoch is taken from it.
    pub(crate) current_epoch: u64,
    /// A random delay in `0..JITTER_RANGE` ms, drawn by the shell (the core
    /// draws nothing): candidacies and back-offs are spread by it.
    pub(crate) jitter: Millis,
    /// TILT holds failovers and votes back.
    pub(crate) tilt: bool,
    /// When TILT was entered, while it holds (`sentinel_tilt_since_seconds`).
    pub(crate) tilt_since: Option<Millis>,
    /// Peers may announce host names, not only IP addresses.
    pub(crate) resolve_hostnames: bool,
    /// The `SENTINEL DEBUG` timers.
    pub(crate) timers: Timers,
    /// When the shell's loop last turned ([`Core::pulse`]).
    pub(crate) last_pulse: Option<Millis>,
    /// A stall (a gap of more than `tilt-trigger` between two pulses)
    /// holds TILT until this time.
    pub(crate) stalled_until: Option<Millis>,
    /// The `SENTINEL SIMULATE-FAILURE` flags: bits of [`CrashPoint::bit`].
    /// Not persisted, as on Sentinel.
    pub(crate) crash_at: u8,
}

impl Daemon {
    /// A new epoch of our own: the next current epoch.
    pub(crate) fn next_epoch(&mut self) -> u64 {
        self.current_epoch = self.current_epoch.saturating_add(1);
        self.current_epoch
    }

    /// Ends the step with [`Output::Crash`] if `SENTINEL
    /// SIMULATE-FAILURE` asked for one at `point`.
    pub(crate) fn crash_if_asked(&self, point: CrashPoint, out: &mut Out) {
        if self.crash_at & point.bit() != 0 {
            out.push(Output::Crash { point });
        }
    }
}

impl Core {
    /// Sets the `SENTINEL SIMULATE-FAILURE` flags (bits of
    /// [`CrashPoint::bit`]).
    pub fn set_crash_points(&mut self, bits: u8) {
        self.daemon.crash_at = bits;
    }

    /// The `SENTINEL SIMULATE-FAILURE` flags in force.
    pub fn crash_points(&self) -> u8 {
        self.daemon.crash_at
    }
}

/// The range of [`Core::set_jitter`], in milliseconds.
pub const JITTER_RANGE: Millis = 100;

/// The decision core: all groups.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Core {
    daemon: Daemon,
    groups: BTreeMap<String, Group>,
    next_token: u64,
    /// Groups whose master counted as unreachable when last looked at: the
    /// input of TILT, kept up to date one group at a time so that an
    /// input for one group costs nothing for the others.
    unreachable: BTreeSet<String>,
}

/// What every rule of a group's step needs besides the group: the time,
/// this daemon's id (for events), the next command token, and where the
/// outputs go. [`Core`] builds one for each call into a group.
#[derive(Debug)]
pub(crate) struct Step<'a> {
    /// The time of this input (monotonic milliseconds).
    pub(crate) now: Millis,
    /// This daemon's id, current epoch, jitter and TILT.
    pub(crate) daemon: &'a mut Daemon,
    /// The token the next [`Output::Send`] gets.
    pub(crate) token: &'a mut u64,
    /// The outputs, in order.
    pub(crate) out: &'a mut Out,
}

impl<'a> Step<'a> {
    fn new(now: Millis, daemon: &'a mut Daemon, token: &'a mut u64, out: &'a mut Out) -> Step<'a> {
        Step {
            now,
            daemon,
            token,
            out,
        }
    }
}

/// Collects outputs during one step.
#[derive(Debug, Default)]
pub struct Out {
    outputs: Vec<Output>,
    /// The group whose step is running: its events are stamped with it.
    group: Option<String>,
}

impl Out {
    pub(crate) fn event(&mut self, channel: Channel, payload: String) {
        let mut event = Event::new(channel, payload);
        event.group.clone_from(&self.group);
        self.outputs.push(Output::Event(event));
    }

    /// Events from now on concern `group` (`None`: the whole daemon).
    fn within(&mut self, group: Option<&str>) {
        if self.group.as_deref() != group {
            self.group = group.map(str::to_string);
        }
    }

    pub(crate) fn push(&mut self, output: Output) {
        self.outputs.push(output);
    }
}

impl Core {
    /// A core monitoring `specs`, resuming from `restored` state if any.
    /// Returns the outputs to carry out first (watches, resumed failovers).
    pub fn new(
        settings: Settings,
        specs: Vec<GroupSpec>,
        restored: Option<&State>,
        now: Millis,
    ) -> (Core, Vec<Output>) {
        let mut core = Core {
            daemon: Daemon {
                myid: settings.myid,
                current_epoch: restored.map_or(0, |s| s.current_epoch),
                jitter: 0,
                tilt: false,
                tilt_since: None,
                resolve_hostnames: settings.resolve_hostnames,
                timers: settings.timers,
                last_pulse: None,
                stalled_until: None,
                crash_at: 0,
            },
            groups: BTreeMap::new(),
            next_token: 1,
            unreachable: BTreeSet::new(),
        };
        let mut out = Out::default();
        for spec in specs {
            let saved = restored.and_then(|s| s.groups.get(&spec.name));
            let group = Group::new(spec, saved, now);
            for addr in group.instances.keys() {
                out.push(Output::Watch {
                    group: group.spec.name.clone(),
                    addr: addr.clone(),
                });
            }
            // As Sentinel at its start: each group announced (and its
            // notification script run) as if just monitored.
            out.within(Some(&group.spec.name));
            out.event(
                Channel::Monitor,
                format!(
                    "{} quorum {}",
                    events::master(&group.spec.name, &group.master),
                    group.spec.quorum
                ),
            );
            core.groups.insert(group.spec.name.clone(), group);
        }
        // The current epoch is at least every epoch the groups hold (a state
        // file from before it was kept, or edited by hand).
        for g in core.groups.values() {
            core.daemon.current_epoch = core
                .daemon
                .current_epoch
                .max(g.epoch)
                .max(g.config_epoch)
                .max(g.leader_epoch);
        }
        // A failover that was in flight when the daemon stopped resumes with
        // the same epoch and the same replica: never a second promotion.
        let names: Vec<String> = core.groups.keys().cloned().collect();
        for name in names {
            let mut token = core.next_token;
            if let Some(g) = core.groups.get_mut(&name) {
                out.within(Some(&name));
                g.resume(&mut Step::new(now, &mut core.daemon, &mut token, &mut out));
            }
            core.next_token = token;
        }
        (core, out.outputs)
    }

    /// Handles one input at time `now`. An input about one group advances
    /// only that group's timers (and TILT); [`Input::Tick`]
    /// advances every group's. The shell ticks often enough (a twentieth
    /// of the shortest `down-after`) that no timer waits on another
    /// group's traffic, and with many groups an input costs one group's
    /// work, not all of theirs.
    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Output> {
        let mut out = Out::default();
        let mut token = self.next_token;
        // A peer's PING reply or link state only updates its liveness,
        // which the next tick judges: several a second per peer must not
        // each step every group.
        match &input {
            Input::PeerPing { runid, valid } => {
                self.peer_ping(now, runid, *valid, &mut out);
                return out.outputs;
            }
            Input::PeerLinkDown { runid } => {
                self.peer_link_down(runid);
                return Vec::new();
            }
            _ => {}
        }
        let touched = match &input {
            Input::Tick | Input::PeerPing { .. } | Input::PeerLinkDown { .. } => None,
            Input::Hello { payload, .. } => payload.split(',').nth(4).map(str::to_string),
            Input::PingOk { group, .. }
            | Input::PingRefused { group, .. }
            | Input::LinkDown { group, .. }
            | Input::Report { group, .. }
            | Input::Reply { group, .. }
            | Input::Routed { group, .. }
            | Input::DownReply { group, .. } => Some(group.clone()),
        };
        match input {
            Input::Tick => {}
            Input::Hello { payload, via } => self.hello(now, &payload, via, &mut out),
            // Handled above.
            Input::PeerPing { .. } | Input::PeerLinkDown { .. } => {}
            Input::DownReply {
                group,
                runid,
                answer,
            } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    g.down_reply(now, &runid, answer);
                }
            }
            Input::Routed { group, to } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
                    g.routed(cx, &to);
                }
            }
            Input::PingOk { group, addr } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    g.ping_ok(now, &addr);
                }
            }
            Input::PingRefused { group, addr } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    g.ping_refused(now, &addr);
                }
            }
            Input::LinkDown {
                group,
                addr,
                failure,
            } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
                    g.link_down(cx, &addr, failure);
                }
            }
            Input::Report { group, addr, info } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
                    g.observe_report(cx, &addr, info);
                }
            }
            Input::Reply {
                group,
                addr,
                token: t,
                reply,
            } => {
                if let Some(g) = self.groups.get_mut(&group) {
                    out.within(Some(&group));
                    let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
                    g.reply(cx, &addr, t, reply);
                }
            }
        }
        match touched {
            None => self.tick(now, &mut token, &mut out),
            Some(name) => self.tick_one(now, &name, &mut token, &mut out),
        }
        self.next_token = token;
        out.outputs
    }

    /// `SENTINEL FAILOVER <name>`: a coordinated switchover when the master
    /// is up, a forced failover when it is down.
    pub fn failover(&mut self, now: Millis, group: &str) -> Result<Vec<Output>, AdminError> {
        let mut out = Out::default();
        let mut token = self.next_token;
        let g = self.groups.get_mut(group).ok_or(AdminError::NoSuchMaster)?;
        out.within(Some(group));
        let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
        g.start_failover(cx, group::Trigger::Manual)?;
        self.next_token = token;
        Ok(out.outputs)
    }

    /// A switchover of `group` away from `from`, refused
    /// ([`AdminError::MasterMoved`]) when `from` is no longer its master:
    /// a request decided on an older view (the Kubernetes reconciler's,
    /// asked again before the first switchover shows) never moves the
    /// new master on.
    pub fn switch_over(
        &mut self,
        now: Millis,
        group: &str,
        from: &Addr,
    ) -> Result<Vec<Output>, AdminError> {
        let g = self.groups.get(group).ok_or(AdminError::NoSuchMaster)?;
        if g.master != *from {
            return Err(AdminError::MasterMoved);
        }
        self.failover(now, group)
    }

    /// Pauses (`paused`) or resumes `group`: while paused, monitoring and
    /// detection go on, a failover already running finishes, and nothing
    /// else is promoted; in peer mode no vote is given and our own
    /// candidacy ends. The state is persisted before anything else. A
    /// master that died meanwhile fails over at the first step after the
    /// resume. Returns whether anything changed, and the outputs.
    pub fn pause(&mut self, group: &str, paused: bool) -> Result<(bool, Vec<Output>), AdminError> {
        let g = self.groups.get_mut(group).ok_or(AdminError::NoSuchMaster)?;
        if g.paused == paused {
            return Ok((false, Vec::new()));
        }
        g.paused = paused;
        let mut out = Out::default();
        out.within(Some(group));
        g.persist(&mut out);
        let word = if paused { "paused" } else { "resumed" };
        g.log(&mut out, format!("{word} by an operator"));
        Ok((true, out.outputs))
    }

    /// Marks the instances of `group` in `retiring` as on their way out
    /// (never promoted) and every other one as not; addresses it does not
    /// know are ignored.
    /// The auto write fence is governed again at once when a replica is
    /// newly marked: it no longer counts, so its departure stops no write.
    /// An unmarked one counts again only from a master's report that
    /// comes [`RETIRED_GRACE`] later: a report asked before its old
    /// process went may still list it.
    pub fn retire(
        &mut self,
        now: Millis,
        group: &str,
        retiring: &BTreeSet<Addr>,
    ) -> Result<Vec<Output>, AdminError> {
        let mut out = Out::default();
        let mut token = self.next_token;
        let g = self.groups.get_mut(group).ok_or(AdminError::NoSuchMaster)?;
        let mut newly = false;
        for (addr, inst) in &mut g.instances {
            let now_retiring = retiring.contains(addr);
            newly |= !inst.retiring && now_retiring;
            if inst.retiring && !now_retiring {
                inst.retired_at = Some(now);
            }
            inst.retiring = now_retiring;
        }
        if newly {
            out.within(Some(group));
            let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
            g.govern_fence(cx);
        }
        self.next_token = token;
        Ok(out.outputs)
    }

    /// `SENTINEL MONITOR`: start monitoring a new group.
    pub fn monitor(&mut self, now: Millis, spec: GroupSpec) -> Result<Vec<Output>, AdminError> {
        if self.groups.contains_key(&spec.name) {
            return Err(AdminError::DuplicateMaster);
        }
        let mut out = Out::default();
        out.within(Some(&spec.name));
        let group = Group::new(spec, None, now);
        let name = group.spec.name.clone();
        // Durable before anything is watched, like every other decision.
        out.push(Output::Persist {
            group: name.clone(),
            state: group.persisted(),
        });
        for addr in group.instances.keys() {
            out.push(Output::Watch {
                group: name.clone(),
                addr: addr.clone(),
            });
        }
        out.event(
            Channel::Monitor,
            format!(
                "{} quorum {}",
                events::master(&name, &group.master),
                group.spec.quorum
            ),
        );
        out.push(Output::Topology {
            group: name.clone(),
        });
        self.groups.insert(name, group);
        Ok(out.outputs)
    }

    /// `SENTINEL REMOVE`: stop monitoring a group and forget its state.
    pub fn remove(&mut self, name: &str) -> Result<Vec<Output>, AdminError> {
        let g = self.groups.remove(name).ok_or(AdminError::NoSuchMaster)?;
        self.unreachable.remove(name);
        let mut out = Out::default();
        out.within(Some(name));
        out.event(Channel::MonitorRemoved, events::master(name, &g.master));
        out.push(Output::Forget {
            group: name.to_string(),
        });
        out.push(Output::Topology {
            group: name.to_string(),
        });
        Ok(out.outputs)
    }

    /// `SENTINEL SET`: new timers and quorum for a group, from `spec` (its
    /// name, master and known replicas are not changed). `changes` are the
    /// `<option> <value>` texts of the `+set` events, secrets already
    /// redacted.
    pub fn set(
        &mut self,
        name: &str,
        spec: &GroupSpec,
        changes: &[String],
    ) -> Result<Vec<Output>, AdminError> {
        let g = self.groups.get_mut(name).ok_or(AdminError::NoSuchMaster)?;
        g.spec.quorum = spec.quorum;
        g.spec.down_after = spec.down_after;
        g.spec.failover_timeout = spec.failover_timeout;
        g.spec.parallel_syncs = spec.parallel_syncs;
        g.spec.reboot_down_after = spec.reboot_down_after;
        g.spec.fence = spec.fence;
        let mut out = Out::default();
        out.within(Some(name));
        let master = events::master(name, &g.master);
        for change in changes {
            out.event(Channel::Set, format!("{master} {change}"));
        }
        out.push(Output::Topology {
            group: name.to_string(),
        });
        Ok(out.outputs)
    }

    /// `SENTINEL RESET`: resets the named groups; returns how many were
    /// reset (a group in the middle of a failover is not).
    pub fn reset(&mut self, names: &[String]) -> (usize, Vec<Output>) {
        let mut out = Out::default();
        let mut count = 0;
        for name in names {
            out.within(Some(name));
            if let Some(g) = self.groups.get_mut(name)
                && g.reset(&mut out)
            {
                count += 1;
            }
        }
        (count, out.outputs)
    }

    /// Sets the random delay (`0..JITTER_RANGE` ms) the next inputs use;
    /// the shell draws a new one before every input.
    pub fn set_jitter(&mut self, jitter: Millis) {
        self.daemon.jitter = jitter % JITTER_RANGE;
    }

    /// The global current epoch.
    pub fn current_epoch(&self) -> u64 {
        self.daemon.current_epoch
    }

    /// This daemon's id.
    pub fn myid(&self) -> &str {
        &self.daemon.myid
    }

    /// The earliest time a group needs a step sooner than the shell's
    /// regular tick (a candidacy due after its random delay).
    pub fn next_deadline(&self) -> Option<Millis> {
        self.groups.values().filter_map(|g| g.candidacy_at).min()
    }

    /// The peer links to keep: every known peer's run id and address (the
    /// address of its most recent hello when groups disagree).
    pub fn peer_links(&self) -> BTreeMap<String, Addr> {
        let mut links: BTreeMap<String, (Millis, Addr)> = BTreeMap::new();
        for g in self.groups.values() {
            for p in g.peers.values() {
                let newer = links
                    .get(&p.runid)
                    .is_none_or(|(heard, _)| p.last_hello > *heard);
                if newer {
                    links.insert(p.runid.clone(), (p.last_hello, p.addr.clone()));
                }
            }
        }
        links.into_iter().map(|(id, (_, a))| (id, a)).collect()
    }

    /// The hello of a group without its first two fields (our address and
    /// port, which depend on the connection carrying it):
    /// `runid,current_epoch,name,master_ip,master_port,config_epoch`.
    pub fn hello_tail(&self, group: &str) -> Option<String> {
        let g = self.groups.get(group)?;
        Some(format!(
            "{},{},{},{},{},{}",
            self.daemon.myid,
            self.daemon.current_epoch,
            g.spec.name,
            g.master.host,
            g.master.port,
            g.config_epoch
        ))
    }

    /// The groups, by name.
    pub fn groups(&self) -> &BTreeMap<String, Group> {
        &self.groups
    }

    /// The readiness verdict of `group` at `now`: which replica a failure
    /// now would promote, and what would hold the failover back. Pure: no
    /// output, no state change.
    pub fn readiness(&self, group: &str, now: Millis) -> Option<Readiness> {
        self.groups
            .get(group)
            .map(|g| g.readiness(now, &self.daemon, self.daemon.tilt_since))
    }

    /// Whether TILT (the mass-failure pause) currently holds failovers back.
    pub fn tilted(&self) -> bool {
        self.daemon.tilt
    }

    /// When the TILT now in force was entered; `None` outside TILT.
    pub fn tilt_since(&self) -> Option<Millis> {
        self.daemon.tilt_since
    }

    /// The state to persist.
    pub fn state(&self) -> State {
        State {
            groups: self
                .groups
                .iter()
                .map(|(n, g)| (n.clone(), g.persisted()))
                .collect(),
            current_epoch: self.daemon.current_epoch,
        }
    }

    fn tick(&mut self, now: Millis, token: &mut u64, out: &mut Out) {
        for (name, g) in self.groups.iter_mut() {
            out.within(Some(name));
            g.detect(&mut Step::new(now, &mut self.daemon, token, out));
        }
        self.unreachable = self
            .groups
            .iter()
            .filter(|(_, g)| g.master_unreachable())
            .map(|(n, _)| n.clone())
            .collect();
        self.update_tilt(now, out);
        for (name, g) in self.groups.iter_mut() {
            out.within(Some(name));
            g.step(&mut Step::new(now, &mut self.daemon, token, out));
        }
    }

    /// [`Core::tick`] for one group: its detection, its share of the
    /// TILT, its step.
    fn tick_one(&mut self, now: Millis, name: &str, token: &mut u64, out: &mut Out) {
        let Some(g) = self.groups.get_mut(name) else {
            return;
        };
        out.within(Some(name));
        g.detect(&mut Step::new(now, &mut self.daemon, token, out));
        // About to decide on a master that is down and may only be out of
        // our reach: look at every group first, so that TILT sees
        // every master that went unreachable at the same moment before
        // anyone acts. Only for unreachable masters (those are what the
        // TILT counts; a refused or hung one is evidence of its own),
        // and only until TILT trips: otherwise a thousand dead
        // masters would each cost a pass over every group.
        if !self.daemon.tilt && g.master_unreachable() {
            self.tick(now, token, out);
            return;
        }
        if g.master_unreachable() {
            self.unreachable.insert(name.to_string());
        } else {
            self.unreachable.remove(name);
        }
        self.update_tilt(now, out);
        if let Some(g) = self.groups.get_mut(name) {
            out.within(Some(name));
            g.step(&mut Step::new(now, &mut self.daemon, token, out));
        }
    }
}
