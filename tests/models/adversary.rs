//! Model check of the peer trust rules with stateright: one Valkyrie core
//! (`valkyrie::core::Core`, the code the daemon runs) over a master and two
//! replicas, and an adversary that publishes hellos (on a data node's
//! channel or on the Sentinel port) and sends vote requests with any of
//! the fields that matter: a stranger's run id or a verified peer's, the
//! attacker's own server, a replica or the master as the configuration's
//! master, epochs equal, one ahead, far ahead, or a config epoch above
//! the current one; votes for strangers, for the peer, for us, in near and
//! far epochs. The master may die at any moment; time passes in ticks of
//! 500 ms in which the replicas report and the core runs its timers;
//! commands to the data nodes are carried out at once.
//!
//! Two worlds: a lone daemon (no peer), and a daemon with one verified
//! peer that has fallen silent (whose name the adversary forges).
//!
//! Properties (always):
//! - no address without a history in the group is ever watched (dialled
//!   with the group's credentials) or advertised;
//! - the config epoch never decreases and never exceeds the current
//!   epoch;
//! - a lone daemon's failover is not delayed by anything the adversary
//!   sends: once the master has been dead for `down-after` plus two ticks,
//!   a replica has been promoted.
//!
//! Sometimes: a replica is promoted (the lone world), a forgery was sent
//! (so the checks are not vacuous).
//!
//! Each run explores its whole space; a run that reaches its state bound
//! fails (`VALKYRIE_MODEL_STATES` changes the bound).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use stateright::{Checker, Model, Property};
use valkyrie::core::{
    Addr, Command, Core, GroupSpec, GroupState, HelloVia, InfoReport, Input, KnownPeer,
    LinkFailure, ListedReplica, Millis, Output, Reply, Role, Settings, State,
};

const M: u16 = 6379;
const R1: u16 = 6380;
const R2: u16 = 6381;
/// The attacker's own server.
const EVIL: u16 = 9999;
const D: Millis = 1_000;
const TICK: Millis = 500;
/// Time ends here.
const HORIZON: Millis = 4_500;
/// At most this many forgeries per run.
const FORGERIES: u8 = 2;
const MYID: &str = "0000000000000000000000000000000000000000";
/// The verified peer (silent) of the peered world.
const PEER: &str = "1111111111111111111111111111111111111111";
const STRANGER: &str = "5555555555555555555555555555555555555555";

fn a(port: u16) -> Addr {
    Addr::new("127.0.0.1", port)
}

fn spec() -> GroupSpec {
    GroupSpec {
        name: "mymaster".into(),
        master: a(M),
        quorum: 1,
        down_after: D,
        failover_timeout: 2_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![a(R1), a(R2)],
    }
}

/// What the adversary sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Forgery {
    /// A hello from `runid` via `via`, naming `master` in `config` with
    /// the sender's current epoch `current` (both relative to ours).
    Hello {
        peer: bool,
        via: HelloVia,
        master: u16,
        epochs: Epochs,
    },
    /// `is-master-down-by-addr` with this candidate, `ahead` of our
    /// current epoch.
    Vote { candidate: Candidate, ahead: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Epochs {
    /// current = config = ours + 1.
    Next,
    /// current = 0, config = ours + 2^32 (config above current).
    Inflated,
    /// current = config = ours + 2^32.
    FarAhead,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Candidate {
    Stranger,
    Peer,
    Us,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    KillMaster,
    Forge(Forgery),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Sys {
    core: Core,
    now: Millis,
    /// Port of the node each node replicates from (0: a master).
    follows: [(u16, u16); 3],
    master_alive: bool,
    died_at: Option<Millis>,
    promoted: bool,
    forged: u8,
    violation: Option<String>,
}

impl Sys {
    fn follows(&self, port: u16) -> u16 {
        self.follows
            .iter()
            .find(|(p, _)| *p == port)
            .map_or(0, |(_, m)| *m)
    }

    fn set_follows(&mut self, port: u16, master: u16) {
        for f in &mut self.follows {
            if f.0 == port {
                f.1 = master;
            }
        }
    }

    fn info(&self, port: u16) -> InfoReport {
        let master = self.follows(port);
        InfoReport {
            run_id: format!("run{port}"),
            role: if master == 0 {
                Role::Master
            } else {
                Role::Replica {
                    master: a(master),
                    link_up: master != M || self.master_alive,
                    link_down_secs: None,
                    last_io_secs: Some(0),
                    sync_in_progress: false,
                }
            },
            offset: 100,
            priority: 100,
            announced: true,
            replid: "replid".into(),
            replicas: [R1, R2, M]
                .into_iter()
                .filter(|p| *p != port && self.follows(*p) == port)
                .map(|p| ListedReplica {
                    addr: a(p),
                    offset: 100,
                    online: true,
                    lag: Some(0),
                })
                .collect(),
            keys: Some(10),
        }
    }

    /// Feeds one input and carries out its outputs, checking what they
    /// may never do.
    fn feed(&mut self, input: Input) {
        let before = self.core.groups()["mymaster"].config_epoch;
        let out = self.core.handle(self.now, input);
        self.carry_out(out);
        self.check(before);
    }

    fn carry_out(&mut self, out: Vec<Output>) {
        let mut replies = Vec::new();
        for o in out {
            match o {
                Output::Watch { addr, .. } if !history(&addr) => {
                    self.violate(format!("watched {addr}, which has no history"));
                }
                Output::Send {
                    to, token, command, ..
                } => {
                    let port = to.port;
                    let alive = port != M || self.master_alive;
                    let reply = if !alive {
                        Reply::Failed("refused".into())
                    } else {
                        match command {
                            Command::ReplicaOfNoOne => {
                                self.set_follows(port, 0);
                                self.promoted = true;
                                Reply::Ok
                            }
                            Command::ReplicaOf(m) => {
                                self.set_follows(port, m.port);
                                Reply::Ok
                            }
                            Command::AskInfo => Reply::Report(self.info(port)),
                            _ => Reply::Ok,
                        }
                    };
                    replies.push((to, token, reply));
                }
                _ => {}
            }
        }
        for (to, token, reply) in replies {
            let out = self.core.handle(
                self.now,
                Input::Reply {
                    group: "mymaster".into(),
                    addr: to,
                    token,
                    reply,
                },
            );
            self.carry_out(out);
        }
    }

    fn check(&mut self, before: u64) {
        let g = &self.core.groups()["mymaster"];
        let (cfg, master) = (g.config_epoch, g.master.clone());
        if cfg < before {
            self.violate(format!("config epoch went back from {before} to {cfg}"));
        }
        if cfg > self.core.current_epoch() {
            self.violate(format!(
                "config epoch {cfg} above the current epoch {}",
                self.core.current_epoch()
            ));
        }
        if !history(&master) {
            self.violate(format!("advertised {master}, which has no history"));
        }
    }

    fn violate(&mut self, v: String) {
        self.violation.get_or_insert(v);
    }

    fn tick(&mut self) {
        self.now += TICK;
        for port in [M, R1, R2] {
            let input = if port == M && !self.master_alive {
                Input::LinkDown {
                    group: "mymaster".into(),
                    addr: a(M),
                    failure: LinkFailure::Refused,
                }
            } else {
                Input::PingOk {
                    group: "mymaster".into(),
                    addr: a(port),
                }
            };
            self.feed(input);
            if port != M || self.master_alive {
                let info = self.info(port);
                self.feed(Input::Report {
                    group: "mymaster".into(),
                    addr: a(port),
                    info,
                });
            }
        }
        self.feed(Input::Tick);
    }

    fn forge(&mut self, f: Forgery) {
        self.forged += 1;
        let cur = self.core.current_epoch();
        match f {
            Forgery::Hello {
                peer,
                via,
                master,
                epochs,
            } => {
                let (current, config) = match epochs {
                    Epochs::Next => (cur + 1, cur + 1),
                    Epochs::Inflated => (0, cur + (1 << 32)),
                    Epochs::FarAhead => (cur + (1 << 32), cur + (1 << 32)),
                };
                let (runid, port) = if peer {
                    (PEER, 26380)
                } else {
                    (STRANGER, 26390)
                };
                let payload = format!(
                    "127.0.0.1,{port},{runid},{current},mymaster,127.0.0.1,{master},{config}"
                );
                self.feed(Input::Hello { payload, via });
            }
            Forgery::Vote { candidate, ahead } => {
                let c = match candidate {
                    Candidate::Stranger => STRANGER,
                    Candidate::Peer => PEER,
                    Candidate::Us => MYID,
                };
                let before = self.core.groups()["mymaster"].config_epoch;
                if let Ok((_, out)) =
                    self.core
                        .is_master_down_by_addr(self.now, &a(M), cur + ahead, Some(c))
                {
                    self.carry_out(out);
                }
                self.check(before);
            }
        }
    }
}

/// The addresses with a history in the group.
fn history(addr: &Addr) -> bool {
    [M, R1, R2].contains(&addr.port) && addr.host == "127.0.0.1"
}

fn forgeries(peered: bool) -> Vec<Forgery> {
    let mut all = Vec::new();
    for peer in [false, true] {
        if peer && !peered {
            continue;
        }
        for via in [HelloVia::Channel, HelloVia::SentinelPort] {
            for master in [EVIL, R1, M] {
                for epochs in [Epochs::Next, Epochs::Inflated, Epochs::FarAhead] {
                    all.push(Forgery::Hello {
                        peer,
                        via,
                        master,
                        epochs,
                    });
                }
            }
        }
    }
    for candidate in [Candidate::Stranger, Candidate::Peer, Candidate::Us] {
        for ahead in [1, 1 << 20] {
            all.push(Forgery::Vote { candidate, ahead });
        }
    }
    all
}

struct World {
    peered: bool,
}

impl Model for World {
    type State = Sys;
    type Action = Action;

    fn init_states(&self) -> Vec<Sys> {
        let restored = self.peered.then(|| State {
            current_epoch: 0,
            groups: [(
                "mymaster".to_string(),
                GroupState {
                    epoch: 0,
                    config_epoch: 0,
                    master: a(M),
                    demoted: vec![],
                    master_lost: None,
                    paused: false,
                    failover: None,
                    leader: None,
                    leader_epoch: 0,
                    known_peers: vec![KnownPeer {
                        runid: PEER.into(),
                        addr: a(26380),
                    }],
                    peered: true,
                    replicas: vec![a(R1), a(R2)],
                },
            )]
            .into(),
        });
        let (core, _) = Core::new(Settings::new(MYID), vec![spec()], restored.as_ref(), 0);
        let mut s = Sys {
            core,
            now: 0,
            follows: [(M, 0), (R1, M), (R2, M)],
            master_alive: true,
            died_at: None,
            promoted: false,
            forged: 0,
            violation: None,
        };
        s.tick();
        vec![s]
    }

    fn actions(&self, s: &Sys, actions: &mut Vec<Action>) {
        if s.violation.is_some() || s.now >= HORIZON {
            return;
        }
        actions.push(Action::Tick);
        if s.master_alive {
            actions.push(Action::KillMaster);
        }
        if s.forged < FORGERIES {
            actions.extend(forgeries(self.peered).into_iter().map(Action::Forge));
        }
    }

    fn next_state(&self, s: &Sys, action: Action) -> Option<Sys> {
        let mut s = s.clone();
        match action {
            Action::Tick => s.tick(),
            Action::KillMaster => {
                s.master_alive = false;
                s.died_at = Some(s.now);
            }
            Action::Forge(f) => s.forge(f),
        }
        if !self.peered
            && let Some(d) = s.died_at
            && s.now >= d + D + 2 * TICK
            && !s.promoted
        {
            s.violate(format!(
                "the master died at {d} ms and nothing was promoted at {} ms",
                s.now
            ));
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always(
                "no address without history dialled or advertised",
                |_, s: &Sys| s.violation.as_ref().is_none_or(|v| !v.contains("history")),
            ),
            Property::always(
                "config epochs monotonic, never above the current",
                |_, s: &Sys| {
                    s.violation
                        .as_ref()
                        .is_none_or(|v| !v.contains("config epoch"))
                },
            ),
            Property::always("a lone failover is not delayed", |_, s: &Sys| {
                s.violation.as_ref().is_none_or(|v| !v.contains("promoted"))
            }),
            Property::sometimes("a forgery was sent", |_, s: &Sys| s.forged == FORGERIES),
        ];
        if !self.peered {
            p.push(Property::sometimes(
                "a replica is promoted",
                |_, s: &Sys| s.promoted && s.forged > 0,
            ));
        }
        p
    }
}

fn check(world: World, what: &str, default_states: usize) {
    let bound = std::env::var("VALKYRIE_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_states);
    let checker = world
        .checker()
        .threads(2)
        .target_state_count(bound)
        .spawn_bfs()
        .join();
    eprintln!(
        "{what}: {} unique states of {} generated (bound {bound}), max depth {}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth()
    );
    assert!(
        checker.state_count() < bound,
        "{what}: the search reached its bound of {bound} states before exploring the whole space"
    );
    checker.assert_properties();
}

#[test]
fn a_lone_daemon_withstands_forged_hellos_and_votes() {
    check(World { peered: false }, "lone", 3_000_000);
}

#[test]
fn forgeries_in_a_verified_peers_name_adopt_nothing_without_history() {
    check(World { peered: true }, "peered", 3_000_000);
}
