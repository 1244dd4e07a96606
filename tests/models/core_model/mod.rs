//! Model check of the real core with stateright: the same `Core` the daemon
//! runs, driven by an environment of a master and two replicas with
//! offsets, against every interleaving of observations, command deliveries,
//! lost replies, a master crash, an empty restart, replicas resyncing on
//! their own, a daemon cut off from the master only (its established
//! connection stalls first, then fresh connects time out, exactly as the
//! link reports it), a master that hangs (a stall, then fresh connects
//! that answer nothing), a master that refuses PING and writes with
//! `-MISCONF` while its INFO answers, a daemon crash with restart from the persisted
//! state, and the world changing while the daemon is down (an operator
//! promotes a replica and points the others at it). A command reaches only
//! the process it was sent to (a node that restarted since never runs it),
//! and the replies to a daemon that restarted since reach nobody.
//!
//! The planned switchover (`SENTINEL FAILOVER` with the master up) has a
//! check of its own, with more actors: the operator (at most twice a run,
//! once the daemon has heard from every node since it, or the node, last
//! restarted), clients writing to whichever node is a writable master
//! (`CLIENT PAUSE … WRITE` holds writes until `CLIENT UNPAUSE` or until the
//! pause runs out), replicas streaming their master's writes (the only way
//! a replica catches up, so the catch-up really waits), commands lost as
//! the link reports them (an error, whether the command ran or not), a
//! master crash, an empty restart, a daemon restart, and the group's
//! route (a `ValkeyCluster`'s `-master` Service), moved to the chosen
//! replica ahead of each switchover and confirmed, late, or never. Its
//! world is
//! timely — commands resolve and every node is observed before time moves
//! on, and at most one command or reply is lost — as a pause that ends by
//! itself is only safe if the demotion comes first: with the demotion lost
//! over and over, or delayed past the pause, no core could keep the old
//! master from taking writes again.
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
//! - a replaced master is never advertised again while some node holds
//!   the data, unless it rejoined (resynced from a later master) or the
//!   operator handed it the role back;
//! - no replica is promoted while the master is alive, answering and
//!   serving a majority of its replicas (only the daemon's path to it is
//!   cut), unless the operator asked for it;
//! - no instance is told to replicate from itself;
//! - the advertised master never switches to a node that reports itself
//!   a replica;
//! - a switchover never loses an acknowledged write: when its `REPLICAOF
//!   NO ONE` runs, the promoted node holds every acknowledged write that a
//!   node still holds — every write the paused master acknowledged first
//!   (writes on a node that restarted empty are the empty-restart guard's);
//! - never two writable masters during a switchover: once it promoted a
//!   node, the old master (the process it paused) is not unpaused — by
//!   `CLIENT UNPAUSE` or by its pause running out — while it still reports
//!   master beside the promoted one;
//! - whenever no failover runs, the route leads to the advertised master
//!   (a switchover given up moved it back).
//!
//! And (sometimes): a new master gets advertised, and a switchover
//! completes (the promoted node advertised, the old master following it
//! and unpaused), so the checks are not vacuous. Liveness (eventually) is
//! checked under fair scheduling: every round, time passes, every node is
//! observed and every command delivered; whatever round the master dies
//! in, a new master is advertised before the horizon; and whenever the
//! world changed while the daemon was down, the advertised master is
//! eventually the node that reports itself master.
//!
//! `cargo test` runs bounded searches: breadth first up to a number of
//! states (`VALKYRIE_MODEL_STATES` raises it; docs/failover.md records a
//! deeper run); the switchover check goes through every interleaving of
//! eight steps (`VALKYRIE_MODEL_STEPS`), then depth first up to a number of
//! states (`VALKYRIE_MODEL_STATES`). `found.rs` replays what the
//! switchover check found when the operator does not wait: two core bugs,
//! fixed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod found;
mod world;

use std::collections::BTreeMap;

use stateright::{Checker, Model, Property};
use valkyrie::core::{Command, Core, Input, LinkFailure, Millis, Reply, Settings, State};
use world::{NODES, Node, Sys, a, info, spec};

const TICK: Millis = 500;
const HORIZON: Millis = 6_000;
/// `SENTINEL FAILOVER` calls per run.
const MAX_SWITCHOVERS: u8 = 2;
/// Commands or replies lost per run, in the switchover check.
const MAX_LOSSES: u8 = 1;
/// The switchover check: every interleaving of this many steps (breadth
/// first), then this many states depth first.
const SWITCHOVER_STEPS: usize = 8;
const SWITCHOVER_DEPTH: usize = 1_000_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Observe,
    Deliver,
    /// The first pending command is lost: in the switchover check, as the
    /// link reports it (answered with an error); elsewhere unanswered.
    Lose,
    /// The first pending command runs, but its reply is lost.
    LoseReply,
    CrashMaster,
    RestartEmpty,
    Resync(u16),
    CutOff,
    Hang,
    /// The master's saves fail: it refuses PING (and writes) with
    /// `-MISCONF`, and answers INFO as ever.
    Misconfigure,
    DaemonRestart,
    /// The daemon is down while an operator promotes this replica and
    /// points the other nodes at it; then it restarts from its state file.
    WorldChangedWhileDown(u16),
    /// Liveness mode: one fair round — time passes, every node is
    /// observed, every pending command is delivered.
    Round,
    /// The operator's `SENTINEL FAILOVER`.
    Switchover,
    /// The route (the `-master` Service) reaches the switchover's chosen
    /// replica: the shell's answer, which may also never come.
    Routed,
    /// A client's write, acknowledged by this master.
    Write(u16),
    /// This replica streams what its master has and it lacks.
    Replicate(u16),
    /// An operator pauses the group, or resumes it (`VALKYRIE PAUSE`).
    TogglePause,
}

struct Env {
    cut_off_allowed: bool,
    /// Fair scheduling only (no lost replies, no other faults): the master
    /// crashes at some round and must be replaced.
    liveness: bool,
    /// Liveness mode with the world changing while the daemon is down,
    /// instead of a master crash.
    world_change: bool,
    /// Planned switchovers, with writes and replication streaming.
    switchover: bool,
    /// The operator asks for a switchover only once the daemon has heard
    /// from every node since the daemon, or that node, last restarted.
    operator_waits: bool,
    /// Client writes per run.
    writes: u8,
}

impl Env {
    /// The group: in the switchover check, with a route (a
    /// `ValkeyCluster`'s `-master` Service) moved ahead of each
    /// switchover.
    fn spec(&self) -> valkyrie::core::GroupSpec {
        let mut spec = spec();
        if self.switchover {
            spec.route_wait = world::ROUTE_WAIT;
        }
        spec
    }
}

impl Model for Env {
    type State = Sys;
    type Action = Action;

    fn init_states(&self) -> Vec<Sys> {
        let (core, out) = Core::new(Settings::new("0".repeat(40)), vec![self.spec()], None, 0);
        let nodes = BTreeMap::from([
            (1, Node::new(0, 10)),
            (2, Node::new(1, 10)),
            (3, Node::new(1, 8)),
        ]);
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
            switchovers: 0,
            writes: 0,
            // Every write up to 10 was acknowledged.
            acked: BTreeMap::from([(0, 10)]),
            forks: BTreeMap::new(),
            losses: 0,
            observed: true,
            paused: None,
            last_catchup: None,
            handover: None,
            instant_kills: self.switchover,
            violation: None,
            predicted: false,
            pause_toggles: 0,
            resumed_failover: false,
            route: 1,
            route_asked: None,
        };
        s.apply(out, false);
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
        if self.switchover {
            // A timely world: commands resolve, and every node is
            // observed, before time moves on; only a bounded number of
            // commands or replies is lost.
            let next = s.next_pending();
            if s.now < HORIZON && next.is_none() && s.observed {
                actions.push(Action::Tick);
            }
            actions.push(Action::Observe);
            if let Some(i) = next {
                actions.push(Action::Deliver);
                if s.losses < MAX_LOSSES {
                    actions.push(Action::Lose);
                    // An INFO that ran changed nothing: as if lost.
                    if s.pending[i].command != Command::AskInfo {
                        actions.push(Action::LoseReply);
                    }
                }
            }
        } else {
            if s.now < HORIZON {
                actions.push(Action::Tick);
            }
            actions.push(Action::Observe);
            if !s.pending.is_empty() {
                actions.push(Action::Deliver);
                actions.push(Action::Lose);
            }
        }
        if !s.crashed {
            actions.push(Action::CrashMaster);
        }
        if s.crashed && !s.restarted {
            actions.push(Action::RestartEmpty);
        }
        // Node 1 becomes a replica only through a switchover here.
        let replicas: &[u16] = if self.switchover { &NODES } else { &[2, 3] };
        for &p in replicas {
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
        if !self.switchover && s.pause_toggles < 2 {
            actions.push(Action::TogglePause);
        }
        if self.cut_off_allowed && !s.crashed && !s.nodes[&1].hung {
            actions.push(Action::Hang);
        }
        if self.cut_off_allowed && !s.crashed && !s.nodes[&1].refusing {
            actions.push(Action::Misconfigure);
        }
        if !s.daemon_restarted {
            actions.push(Action::DaemonRestart);
            for p in [2u16, 3] {
                if !self.switchover && s.can_hand_over_to(p) {
                    actions.push(Action::WorldChangedWhileDown(p));
                }
            }
        }
        if self.switchover {
            if s.switchovers < MAX_SWITCHOVERS
                && s.core.groups()["g"].failover.is_none()
                && (!self.operator_waits || s.picture_current())
            {
                actions.push(Action::Switchover);
            }
            if s.route_asked.is_some() {
                actions.push(Action::Routed);
            }
            for p in NODES {
                if s.writes < self.writes && s.nodes[&p].writable(s.now) {
                    actions.push(Action::Write(p));
                }
                if s.can_replicate(p) {
                    actions.push(Action::Replicate(p));
                }
            }
        }
    }

    fn next_state(&self, last: &Sys, action: Action) -> Option<Sys> {
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += TICK;
                s.observed = false;
                s.tick();
            }
            Action::Observe => {
                s.observed = true;
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
                        if n.refusing {
                            s.feed(Input::PingRefused {
                                group: "g".into(),
                                addr: a(p),
                            });
                        }
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
                let p = s.pending.remove(s.next_pending().unwrap_or(0));
                let catching_up = s.catching_up(&p);
                let reply = s.execute(&p);
                if let (true, Reply::Report(i)) = (catching_up, &reply) {
                    s.last_catchup = Some(i.clone());
                }
                s.answer(&p, reply);
            }
            Action::Lose if self.switchover => {
                // As the link reports it: a command that never ran is
                // answered with an error.
                s.losses += 1;
                let p = s.pending.remove(s.next_pending().unwrap());
                s.answer(&p, Reply::Failed("connection lost".into()));
            }
            Action::Lose => {
                s.pending.remove(0);
            }
            Action::LoseReply => {
                // It ran; its reply was lost (a timeout).
                s.losses += 1;
                let p = s.pending.remove(s.next_pending().unwrap());
                s.execute(&p);
                s.answer(&p, Reply::Failed("timeout".into()));
            }
            Action::CrashMaster => {
                s.crashed = true;
                s.nodes.get_mut(&1).unwrap().alive = false;
            }
            Action::RestartEmpty => {
                s.restarted = true;
                let n = s.nodes.get_mut(&1).unwrap();
                *n = Node {
                    run: n.run + 1,
                    replid: 99,
                    lost: true,
                    ..Node::new(0, 0)
                };
            }
            Action::Resync(p) => {
                let m = s.nodes[&s.nodes[&p].master_of].clone();
                let n = s.nodes.get_mut(&p).unwrap();
                n.offset = m.offset;
                n.replid = m.replid;
                n.lost = m.lost;
                // It rejoined: a candidate like any replica.
                s.replaced.retain(|q| *q != p);
            }
            Action::Replicate(p) => {
                let offset = s.nodes[&s.nodes[&p].master_of].offset;
                s.nodes.get_mut(&p).unwrap().offset = offset;
            }
            Action::Write(p) => {
                s.writes += 1;
                let n = s.nodes.get_mut(&p).unwrap();
                n.offset += 1;
                let acked = s.acked.entry(n.replid).or_default();
                *acked = (*acked).max(n.offset);
            }
            Action::Switchover => {
                s.switchovers += 1;
                s.last_catchup = None;
                let m = s.core.groups()["g"].master.port;
                s.paused = Some((m, s.nodes[&m].run));
                let out = s.core.failover(s.now, "g").ok()?;
                // The operator's choice: a master replaced earlier may
                // be handed the role back.
                if let Some(f) = &s.core.groups()["g"].failover {
                    let to = f.promoted.port;
                    s.replaced.retain(|p| *p != to);
                }
                s.apply(out, true);
            }
            Action::Routed => {
                let to = s.route_asked.take()?;
                s.feed(Input::Routed {
                    group: "g".into(),
                    to: a(to),
                });
            }
            Action::CutOff => s.cut_off = true,
            Action::Hang => s.nodes.get_mut(&1).unwrap().hung = true,
            Action::Misconfigure => s.nodes.get_mut(&1).unwrap().refusing = true,
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
            Action::TogglePause => {
                s.pause_toggles += 1;
                let paused = !s.core.groups()["g"].paused();
                if let Ok((_, out)) = s.core.pause("g", paused) {
                    s.apply(out, false);
                }
            }
            Action::DaemonRestart => {
                s.daemon_restarted = true;
                // The new daemon has seen nothing yet.
                s.observed = false;
                // Commands in flight may still run; their replies come
                // back to nobody.
                for p in &mut s.pending {
                    p.stale = true;
                }
                // The new link's first attempt is a fresh connect.
                s.stall_reported = s.cut_off || s.nodes[&1].hung;
                s.route_asked = None;
                let (core, out) = Core::new(
                    Settings::new("1".repeat(40)),
                    vec![self.spec()],
                    Some(&s.persisted.clone()),
                    s.now,
                );
                s.core = core;
                s.apply(out, false);
            }
        }
        s.check_handover();
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
        if self.switchover {
            return vec![
                Property::<Self>::always("safety", |_, s| s.violation.is_none()),
                Property::<Self>::sometimes("a switchover completes", |_, s| {
                    s.switchover_completed()
                }),
                Property::<Self>::sometimes("the empty restart is caught", |_, s| {
                    s.restarted && s.core.groups()["g"].master.port != 1
                }),
            ];
        }
        let mut properties = vec![
            Property::<Self>::always("safety", |_, s| s.violation.is_none()),
            Property::<Self>::sometimes("a new master is advertised", |_, s| {
                s.core.groups()["g"].master.port != 1
            }),
            Property::<Self>::sometimes("a promotion the verdict named", |_, s| s.predicted),
            Property::<Self>::sometimes("a failover starts after a pause and resume", |_, s| {
                s.resumed_failover
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
            properties.push(Property::<Self>::sometimes(
                "a master refusing PING is replaced",
                |_, s| {
                    s.nodes[&1].refusing
                        && s.nodes[&1].alive
                        && s.core.groups()["g"].master.port != 1
                },
            ));
        }
        properties
    }
}

/// The search's bound: `VALKYRIE_MODEL_STATES`, or `default_states`.
fn bound(default_states: usize) -> usize {
    std::env::var("VALKYRIE_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_states)
}

/// The switchover check's breadth-first depth: `VALKYRIE_MODEL_STEPS`,
/// or [`SWITCHOVER_STEPS`].
fn steps() -> usize {
    std::env::var("VALKYRIE_MODEL_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SWITCHOVER_STEPS)
}

/// A bounded breadth-first search: up to `default_states` generated
/// states (or `VALKYRIE_MODEL_STATES`).
fn run(env: Env, default_states: usize) {
    let states = bound(default_states);
    let checker = env
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_bfs()
        .join();
    report(&checker, "breadth first", Some(states));
    checker.assert_properties();
}

/// Prints how far a search went and by what it was bounded: `states`,
/// a bound on generated states, which stateright stops at only once it
/// has generated at least that many (so fewer means the whole space was
/// explored), or else the depth.
fn report(checker: &impl Checker<Env>, how: &str, states: Option<usize>) {
    let bounded = match states {
        Some(b) if checker.state_count() >= b => {
            format!("bounded, stopped at the bound of {b} generated states")
        }
        Some(b) => format!("the whole space (bound {b} not reached)"),
        None => "every interleaving to that depth".into(),
    };
    eprintln!(
        "{how}: {} unique states, {} generated (max depth {}): {bounded}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth()
    );
}

/// Crashes, restarts and lost replies. Bounded: breadth first up to
/// 60,000 generated states (`VALKYRIE_MODEL_STATES`), far from the whole
/// space; the run prints whether it stopped at the bound.
#[test]
fn core_is_safe_under_crashes_restarts_and_lost_replies() {
    let env = Env {
        cut_off_allowed: false,
        liveness: false,
        world_change: false,
        switchover: false,
        operator_waits: false,
        writes: 0,
    };
    run(env, 60_000);
}

/// The daemon cut off from the master. Bounded as
/// [`core_is_safe_under_crashes_restarts_and_lost_replies`].
#[test]
fn core_is_safe_when_cut_off_from_the_master() {
    let env = Env {
        cut_off_allowed: true,
        liveness: false,
        world_change: false,
        switchover: false,
        operator_waits: false,
        writes: 0,
    };
    run(env, 60_000);
}

/// Liveness under fair scheduling: whenever the master dies, a new master
/// is advertised before the horizon. Bounded as the safety runs (the
/// fair rounds' space is small: the run prints that it was explored
/// whole).
#[test]
fn a_dead_master_is_eventually_replaced() {
    let env = Env {
        cut_off_allowed: false,
        liveness: true,
        world_change: false,
        switchover: false,
        operator_waits: false,
        writes: 0,
    };
    run(env, 60_000);
}

/// Liveness under fair scheduling: whenever an operator promoted a replica
/// while the daemon was down, the daemon ends up advertising it (with a
/// writable master, not two replicas). Bounded as the runs above.
#[test]
fn a_master_promoted_while_the_daemon_was_down_is_adopted() {
    let env = Env {
        cut_off_allowed: false,
        liveness: true,
        world_change: true,
        switchover: false,
        operator_waits: false,
        writes: 0,
    };
    run(env, 60_000);
}

/// Planned switchovers (`SENTINEL FAILOVER` with the master up) among
/// client writes, replication streaming, lost replies, a master crash, an
/// empty restart and a daemon restart: no acknowledged write is lost, and
/// the old master never takes writes beside the promoted one. Bounded:
/// every interleaving of [`SWITCHOVER_STEPS`] steps, then depth first up
/// to [`SWITCHOVER_DEPTH`] generated states.
#[test]
fn a_switchover_loses_no_write_and_never_leaves_two_masters() {
    let env = |writes| Env {
        cut_off_allowed: false,
        liveness: false,
        world_change: false,
        switchover: true,
        operator_waits: std::env::var("VALKYRIE_MODEL_OPERATOR_WAITS").is_ok(),
        writes,
    };
    // Every interleaving of up to SWITCHOVER_STEPS steps first (a
    // switchover and a fault fit in eight).
    let checker = env(1)
        .checker()
        .threads(2)
        // The initial state is at depth 1, and states at the maximum depth
        // are not checked.
        .target_max_depth(steps() + 2)
        .spawn_bfs()
        .join();
    report(&checker, "breadth first", None);
    checker.assert_no_discovery("safety");
    // Then long ones: switchovers that complete or are given up, then
    // time, writes and faults after them, pauses running out.
    let checker = env(2)
        .checker()
        .threads(2)
        .target_state_count(bound(SWITCHOVER_DEPTH))
        .spawn_dfs()
        .join();
    report(&checker, "depth first", Some(bound(SWITCHOVER_DEPTH)));
    checker.assert_properties();
}
