//! Model check of the real core with stateright: the same `Core` the daemon
//! runs, driven by an environment of a master and two replicas with
//! offsets, against every interleaving of observations, command deliveries,
//! lost replies, a master crash, an empty restart, replicas resyncing on
//! their own, a daemon cut off from the master only (its established
//! connection stalls first, then fresh connects time out, exactly as the
//! link reports it), a master that hangs (a stall, then fresh connects
//! that answer nothing), a daemon crash with restart from the persisted
//! state, and the world changing while the daemon is down (an operator
//! promotes a replica and points the others at it).
//!
//! Properties (always):
//! - the advertised master changes only together with a higher config
//!   epoch, and one config epoch never shows two masters;
//! - a promotion never picks a replica with a lower offset than another
//!   eligible one;
//! - no node holding the data is ever pointed (`REPLICAOF`) at a node that
//!   lost it (restarted empty, or resynced from one);
//! - the advertised master never switches to a node that lost its data
//!   while another node still holds it;
//! - a replaced master is never advertised again;
//! - no replica is promoted while the master is alive, answering and
//!   serving a majority of its replicas (only the daemon's path to it is
//!   cut);
//! - no instance is told to replicate from itself;
//! - the advertised master never switches to a node that reports itself
//!   a replica.
//!
//! And (sometimes): a new master gets advertised, so the checks are not
//! vacuous. Liveness (eventually) is checked under fair scheduling: every
//! round, time passes, every node is observed and every command delivered;
//! whatever round the master dies in, a new master is advertised before the
//! horizon; and whenever the world changed while the daemon was down, the
//! advertised master is eventually the node that reports itself master.
//! `cargo test` runs a bounded search; `VALKYRIE_MODEL_STATES`
//! raises the bound (docs/failover.md records a deeper run).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use stateright::{Checker, Model, Property};
use valkyrie::core::{
    Addr, Command, Core, GroupSpec, InfoReport, Input, LinkFailure, ListedReplica, Millis, Output,
    Reply, Role, Settings, State, select,
};

const NODES: [u16; 3] = [1, 2, 3];
const TICK: Millis = 500;
const HORIZON: Millis = 6_000;

fn a(p: u16) -> Addr {
    Addr::new("n", p)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Node {
    alive: bool,
    /// 0 = master, else the port it replicates from.
    master_of: u16,
    offset: u64,
    run: u8,
    replid: u8,
    /// Restarted empty and not resynced since: its data is gone.
    lost: bool,
    /// Alive but answering nothing (SIGSTOP, a stuck disk).
    hung: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Sys {
    now: Millis,
    core: Core,
    persisted: State,
    nodes: BTreeMap<u16, Node>,
    pending: Vec<(u64, u16, Command)>,
    /// The daemon cannot reach the master (replicas can).
    cut_off: bool,
    /// The link reported the master's established connection stalled;
    /// later observations come from fresh connects.
    stall_reported: bool,
    crashed: bool,
    restarted: bool,
    daemon_restarted: bool,
    last_view: (u64, u16),
    replaced: Vec<u16>,
    violation: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Observe,
    Deliver,
    Lose,
    CrashMaster,
    RestartEmpty,
    Resync(u16),
    CutOff,
    Hang,
    DaemonRestart,
    /// The daemon is down while an operator promotes this replica and
    /// points the other nodes at it; then it restarts from its state file.
    WorldChangedWhileDown(u16),
    /// Liveness mode: one fair round — time passes, every node is
    /// observed, every pending command is delivered.
    Round,
}

struct Env {
    cut_off_allowed: bool,
    /// Fair scheduling only (no lost replies, no other faults): the master
    /// crashes at some round and must be replaced.
    liveness: bool,
    /// Liveness mode with the world changing while the daemon is down,
    /// instead of a master crash.
    world_change: bool,
}

fn spec() -> GroupSpec {
    GroupSpec {
        name: "g".into(),
        master: a(1),
        quorum: 1,
        down_after: 1_000,
        failover_timeout: 3_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        known_replicas: vec![a(2), a(3)],
    }
}

/// What replicas report as the last I/O from a hung master once it has
/// been hung for longer than a live master's idle ping period.
fn super_silent_io() -> u64 {
    valkyrie::core::group::WITNESS_IO_SECS + 1
}

fn info(nodes: &BTreeMap<u16, Node>, port: u16) -> InfoReport {
    let n = &nodes[&port];
    let role = if n.master_of == 0 {
        Role::Master
    } else {
        let m = &nodes[&n.master_of];
        let up = m.alive && m.master_of == 0;
        // A hung master keeps the replication link open (until
        // repl-timeout) but sends nothing on it.
        let io = if m.hung { super_silent_io() } else { 0 };
        Role::Replica {
            master: a(n.master_of),
            link_up: up,
            link_down_secs: if up { None } else { Some(1) },
            last_io_secs: if up { Some(io) } else { None },
            sync_in_progress: false,
        }
    };
    InfoReport {
        run_id: format!("run{port}-{}", n.run),
        role,
        offset: n.offset,
        priority: 100,
        replid: format!("id{}", n.replid),
        replicas: nodes
            .iter()
            .filter(|(_, r)| r.master_of == port)
            .map(|(p, r)| ListedReplica {
                addr: a(*p),
                offset: r.offset,
                online: true,
            })
            .collect(),
        keys: Some(if n.lost { 0 } else { 5 }),
    }
}

impl Sys {
    /// Whether an operator could cleanly promote replica `p` of a healthy
    /// node 1: it follows node 1 on the same history and holds the data.
    fn can_hand_over_to(&self, p: u16) -> bool {
        let (m, n) = (&self.nodes[&1], &self.nodes[&p]);
        m.alive
            && !m.hung
            && !m.lost
            && m.master_of == 0
            && n.alive
            && !n.lost
            && n.master_of == 1
            && n.replid == m.replid
    }

    fn feed(&mut self, input: Input) {
        let out = self.core.handle(self.now, input);
        self.apply(out);
    }

    fn apply(&mut self, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send {
                    to, token, command, ..
                } => {
                    self.check_command(&to, &command);
                    self.pending.push((token, to.port, command));
                }
                Output::Persist { group, state } => {
                    self.persisted.groups.insert(group, state);
                }
                _ => {}
            }
        }
        self.check_view();
    }

    fn check_command(&mut self, to: &Addr, command: &Command) {
        if matches!(command, Command::ReplicaOf(t) if t == to) {
            self.violation = Some(format!("{to} told to replicate from itself"));
        }
        match command {
            // The harm: a node holding the data told to resync from one
            // that lost it.
            Command::ReplicaOf(target)
                if self.nodes[&target.port].lost && !self.nodes[&to.port].lost =>
            {
                self.violation = Some(format!("{to} pointed at empty {target}"));
            }
            Command::ReplicaOfNoOne => {
                // The partition rule: a master that is alive, answering
                // and followed by a majority of its replicas is never
                // replaced, whatever the daemon's own path to it.
                let m = &self.nodes[&1];
                let followers = self
                    .nodes
                    .iter()
                    .filter(|(p, n)| **p != 1 && n.alive && n.master_of == 1)
                    .count();
                if m.alive && !m.hung && !m.lost && m.master_of == 0 && followers * 2 > 2 {
                    self.violation = Some(format!(
                        "promoted {to} while the master serves {followers} of 2 replicas"
                    ));
                }
                // Offsets the core knew, among replicas it deems eligible.
                let g = &self.core.groups()["g"];
                let chosen = g.instances[to].info.as_ref().map_or(0, |i| i.offset);
                for (addr, inst) in &g.instances {
                    if addr == to || *addr == g.master {
                        continue;
                    }
                    let ok = select::eligibility(g, inst, self.now).is_ok();
                    let off = inst.info.as_ref().map_or(0, |i| i.offset);
                    let same_history = inst.info.as_ref().map(|i| &i.replid)
                        == g.instances[to].info.as_ref().map(|i| &i.replid);
                    if ok && same_history && off > chosen {
                        self.violation =
                            Some(format!("promoted {to} ({chosen}) over {addr} ({off})"));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_view(&mut self) {
        let g = &self.core.groups()["g"];
        let view = (g.config_epoch, g.master.port);
        let (e0, m0) = self.last_view;
        if view.1 != m0 {
            if view.0 <= e0 {
                self.violation = Some(format!("master {m0}->{} without a higher epoch", view.1));
            }
            // Switching to an empty node is wrong while some node still
            // holds the data (if every node lost it, nothing more is lost).
            let data_exists = self.nodes.values().any(|n| n.alive && !n.lost);
            if self.nodes[&view.1].lost && data_exists {
                self.violation = Some(format!("switched to {} which lost its data", view.1));
            }
            if self.nodes[&view.1].master_of != 0 {
                self.violation = Some(format!("switched to {}, which reports a replica", view.1));
            }
            if self.replaced.contains(&view.1) {
                self.violation = Some(format!("replaced master {} advertised again", view.1));
            }
            self.replaced.push(m0);
        } else if view.0 < e0 {
            self.violation = Some("config epoch went back".into());
        }
        self.last_view = view;
    }
}

impl Model for Env {
    type State = Sys;
    type Action = Action;

    fn init_states(&self) -> Vec<Sys> {
        let (core, out) = Core::new(
            Settings {
                myid: "0".repeat(40),
            },
            vec![spec()],
            None,
            0,
        );
        let mut nodes = BTreeMap::new();
        nodes.insert(
            1,
            Node {
                alive: true,
                master_of: 0,
                offset: 10,
                run: 0,
                replid: 0,
                lost: false,
                hung: false,
            },
        );
        nodes.insert(
            2,
            Node {
                alive: true,
                master_of: 1,
                offset: 10,
                run: 0,
                replid: 0,
                lost: false,
                hung: false,
            },
        );
        nodes.insert(
            3,
            Node {
                alive: true,
                master_of: 1,
                offset: 8,
                run: 0,
                replid: 0,
                lost: false,
                hung: false,
            },
        );
        let mut s = Sys {
            now: 0,
            core,
            persisted: State::default(),
            nodes,
            pending: Vec::new(),
            cut_off: false,
            stall_reported: false,
            crashed: false,
            restarted: false,
            daemon_restarted: false,
            last_view: (0, 1),
            replaced: Vec::new(),
            violation: None,
        };
        s.apply(out);
        // Everyone observed once.
        for p in NODES {
            let i = info(&s.nodes, p);
            s.feed(Input::Report {
                group: "g".into(),
                addr: a(p),
                info: i,
            });
        }
        vec![s]
    }

    fn actions(&self, s: &Sys, actions: &mut Vec<Action>) {
        if s.violation.is_some() {
            return;
        }
        if self.liveness && self.world_change {
            if s.now >= HORIZON {
                return;
            }
            if !s.daemon_restarted {
                actions.push(Action::WorldChangedWhileDown(2));
                if s.now < 4 * TICK {
                    actions.push(Action::Round);
                }
            } else {
                actions.push(Action::Round);
            }
            return;
        }
        if self.liveness {
            if s.now >= HORIZON {
                return;
            }
            if !s.crashed {
                actions.push(Action::CrashMaster);
                // The crash happens by the fourth round at the latest.
                if s.now < 4 * TICK {
                    actions.push(Action::Round);
                }
            } else {
                actions.push(Action::Round);
            }
            return;
        }
        if s.now < HORIZON {
            actions.push(Action::Tick);
        }
        actions.push(Action::Observe);
        if !s.pending.is_empty() {
            actions.push(Action::Deliver);
            actions.push(Action::Lose);
        }
        if !s.crashed {
            actions.push(Action::CrashMaster);
        }
        if s.crashed && !s.restarted {
            actions.push(Action::RestartEmpty);
        }
        for p in [2u16, 3] {
            let n = &s.nodes[&p];
            if n.alive && n.master_of != 0 {
                let m = &s.nodes[&n.master_of];
                if m.alive && m.master_of == 0 && (m.replid != n.replid || m.lost != n.lost) {
                    actions.push(Action::Resync(p));
                }
            }
        }
        if self.cut_off_allowed && !s.cut_off && !s.crashed {
            actions.push(Action::CutOff);
        }
        if self.cut_off_allowed && !s.crashed && !s.nodes[&1].hung {
            actions.push(Action::Hang);
        }
        if !s.daemon_restarted {
            actions.push(Action::DaemonRestart);
            for p in [2u16, 3] {
                if s.can_hand_over_to(p) {
                    actions.push(Action::WorldChangedWhileDown(p));
                }
            }
        }
    }

    fn next_state(&self, last: &Sys, action: Action) -> Option<Sys> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += TICK;
                s.feed(Input::Tick);
            }
            Action::Observe => {
                for p in NODES {
                    let n = s.nodes[&p].clone();
                    let master_port = s.core.groups()["g"].master.port;
                    let silent = (s.cut_off || n.hung) && p == 1 && master_port == 1;
                    let input = if silent && n.alive {
                        // As the link reports it: the established
                        // connection stalls first; every later attempt is
                        // a fresh connect, which times out behind the cut
                        // and connects but gets no answer from a hung node.
                        let failure = if !s.stall_reported {
                            LinkFailure::Stalled
                        } else if s.cut_off {
                            LinkFailure::ConnectTimeout
                        } else {
                            LinkFailure::Silent
                        };
                        s.stall_reported = true;
                        Input::LinkDown {
                            group: "g".into(),
                            addr: a(p),
                            failure,
                        }
                    } else if !n.alive {
                        Input::LinkDown {
                            group: "g".into(),
                            addr: a(p),
                            failure: LinkFailure::Refused,
                        }
                    } else {
                        Input::Report {
                            group: "g".into(),
                            addr: a(p),
                            info: info(&s.nodes, p),
                        }
                    };
                    s.feed(input);
                }
            }
            Action::Deliver => {
                let (token, port, command) = s.pending.remove(0);
                let alive =
                    s.nodes[&port].alive && !s.nodes[&port].hung && !(s.cut_off && port == 1);
                let reply = if !alive {
                    Reply::Failed("unreachable".into())
                } else {
                    match &command {
                        Command::ReplicaOfNoOne => {
                            let n = s.nodes.get_mut(&port).unwrap();
                            n.master_of = 0;
                            n.replid = n.replid.wrapping_add(10 + port as u8);
                            Reply::Ok
                        }
                        Command::ReplicaOf(t) => {
                            s.nodes.get_mut(&port).unwrap().master_of = t.port;
                            Reply::Ok
                        }
                        Command::AskInfo => Reply::Report(info(&s.nodes, port)),
                        _ => Reply::Ok,
                    }
                };
                s.feed(Input::Reply {
                    group: "g".into(),
                    addr: a(port),
                    token,
                    reply,
                });
            }
            Action::Lose => {
                s.pending.remove(0);
            }
            Action::CrashMaster => {
                s.crashed = true;
                s.nodes.get_mut(&1).unwrap().alive = false;
            }
            Action::RestartEmpty => {
                s.restarted = true;
                let n = s.nodes.get_mut(&1).unwrap();
                *n = Node {
                    alive: true,
                    master_of: 0,
                    offset: 0,
                    run: n.run + 1,
                    replid: 99,
                    lost: true,
                    hung: false,
                };
            }
            Action::Resync(p) => {
                let m = s.nodes[&s.nodes[&p].master_of].clone();
                let n = s.nodes.get_mut(&p).unwrap();
                n.offset = m.offset;
                n.replid = m.replid;
                n.lost = m.lost;
            }
            Action::CutOff => s.cut_off = true,
            Action::Hang => s.nodes.get_mut(&1).unwrap().hung = true,
            Action::Round => {
                let t = self.next_state(&s, Action::Tick)?;
                let mut t = self.next_state(&t, Action::Observe)?;
                while !t.pending.is_empty() {
                    t = self.next_state(&t, Action::Deliver)?;
                }
                return Some(t);
            }
            Action::WorldChangedWhileDown(p) => {
                let promoted = {
                    let n = s.nodes.get_mut(&p).unwrap();
                    n.master_of = 0;
                    n.replid = n.replid.wrapping_add(10 + p as u8);
                    n.clone()
                };
                // The others follow it and continue its history (a
                // partial resync: nothing of theirs is lost).
                for (q, n) in s.nodes.iter_mut() {
                    if *q != p && n.alive {
                        n.master_of = p;
                        n.replid = promoted.replid;
                        n.offset = promoted.offset;
                        n.lost = false;
                    }
                }
                return self.next_state(&s, Action::DaemonRestart);
            }
            Action::DaemonRestart => {
                s.daemon_restarted = true;
                // The new link's first attempt is a fresh connect.
                s.stall_reported = s.cut_off || s.nodes[&1].hung;
                let (core, out) = Core::new(
                    Settings {
                        myid: "1".repeat(40),
                    },
                    vec![spec()],
                    Some(&s.persisted.clone()),
                    s.now,
                );
                s.core = core;
                s.apply(out);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        if self.liveness && self.world_change {
            return vec![
                Property::<Self>::always("safety", |_, s| s.violation.is_none()),
                Property::<Self>::eventually(
                    "the master promoted while the daemon was down is adopted",
                    |_, s| s.core.groups()["g"].master.port == 2,
                ),
            ];
        }
        if self.liveness {
            return vec![
                Property::<Self>::always("safety", |_, s| s.violation.is_none()),
                Property::<Self>::eventually("the dead master is replaced", |_, s| {
                    s.core.groups()["g"].master.port != 1
                }),
            ];
        }
        let mut properties = vec![
            Property::<Self>::always("safety", |_, s| s.violation.is_none()),
            Property::<Self>::sometimes("a new master is advertised", |_, s| {
                s.core.groups()["g"].master.port != 1
            }),
            Property::<Self>::sometimes("the empty restart is caught", |_, s| {
                s.restarted && s.core.groups()["g"].master.port != 1
            }),
            Property::<Self>::sometimes("a master promoted while down is adopted", |_, s| {
                s.daemon_restarted
                    && !s.crashed
                    && s.nodes[&s.core.groups()["g"].master.port].master_of == 0
                    && s.core.groups()["g"].master.port != 1
            }),
        ];
        if self.cut_off_allowed {
            properties.push(Property::<Self>::sometimes(
                "a hung master is replaced",
                |_, s| {
                    s.nodes[&1].hung && s.nodes[&1].alive && s.core.groups()["g"].master.port != 1
                },
            ));
        }
        properties
    }
}

fn run(env: Env, default_states: usize) {
    let states = std::env::var("VALKYRIE_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_states);
    let checker = env
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_bfs()
        .join();
    eprintln!(
        "explored {} unique states (max depth {})",
        checker.unique_state_count(),
        checker.max_depth()
    );
    checker.assert_properties();
}

#[test]
fn core_is_safe_under_crashes_restarts_and_lost_replies() {
    let env = Env {
        cut_off_allowed: false,
        liveness: false,
        world_change: false,
    };
    run(env, 60_000);
}

#[test]
fn core_is_safe_when_cut_off_from_the_master() {
    let env = Env {
        cut_off_allowed: true,
        liveness: false,
        world_change: false,
    };
    run(env, 60_000);
}

/// Liveness under fair scheduling: whenever the master dies, a new master
/// is advertised before the horizon.
#[test]
fn a_dead_master_is_eventually_replaced() {
    let env = Env {
        cut_off_allowed: false,
        liveness: true,
        world_change: false,
    };
    run(env, 60_000);
}

/// Liveness under fair scheduling: whenever an operator promoted a replica
/// while the daemon was down, the daemon ends up advertising it (with a
/// writable master, not two replicas).
#[test]
fn a_master_promoted_while_the_daemon_was_down_is_adopted() {
    let env = Env {
        cut_off_allowed: false,
        liveness: true,
        world_change: true,
    };
    run(env, 60_000);
}
