//! The world of `tests/models/peers/mod.rs`: the data nodes, the daemons
//! (Valkyries and the Sentinel model), messages, faults, and the checks
//! of every state.

use std::collections::BTreeMap;

use valkyrie::core::{
    Addr, Command, Core, DownAnswer, GroupSpec, InfoReport, ListedReplica, Millis, Role, Settings,
    State,
};

pub const G: &str = "g";
pub const NODES: [u16; 3] = [1, 2, 3];
pub const TICK: Millis = 500;
pub const DOWN_AFTER: Millis = 1_000;
pub const FAILOVER_TIMEOUT: Millis = 2_000;
pub const QUORUM: usize = 2;
pub const HELLO_PERIOD: Millis = 2_000;
/// The model's choice of a non-zero jitter for a Valkyrie.
pub const JITTER: Millis = 50;
/// Sentinel's `ask-period`.
pub const SEN_ASK_PERIOD: Millis = 1_000;
/// Sentinel's `5 × ask-period`.
pub const SEN_ANSWER_TTL: Millis = 5_000;
/// Sentinel's election timeout: `min(10 s, failover-timeout)`.
pub const SEN_ELECTION_TIMEOUT: Millis = if FAILOVER_TIMEOUT < 10_000 {
    FAILOVER_TIMEOUT
} else {
    10_000
};
/// No step once some sentinel's current epoch passes this (keeps the
/// space finite: split votes retried at once could otherwise climb).
pub const EPOCH_CAP: u64 = 6;
/// The Sentinel model's index (Valkyries are 0, 1, 2).
pub const SEN: Id = 9;

/// A sentinel: a Valkyrie's index, or [`SEN`].
pub type Id = u8;

pub fn a(p: u16) -> Addr {
    Addr::new("n", p)
}

/// Sentinel `i`'s settings: the model names hosts (`n`, `s`), so host
/// names are allowed.
pub fn settings(i: Id) -> Settings {
    Settings {
        resolve_hostnames: true,
        ..Settings::new(runid(i))
    }
}

pub fn runid(i: Id) -> String {
    let c = if i == SEN { 'e' } else { char::from(b'1' + i) };
    c.to_string().repeat(40)
}

pub fn index_of(runid: &str) -> Id {
    match runid.as_bytes().first() {
        Some(b'e') => SEN,
        Some(d) => d - b'1',
        None => panic!("empty run id"),
    }
}

pub fn name(i: Id) -> String {
    if i == SEN {
        "S".into()
    } else {
        format!("V{i}")
    }
}

pub fn port(i: Id) -> u16 {
    26_000 + u16::from(i)
}

pub fn spec() -> GroupSpec {
    GroupSpec {
        name: G.into(),
        master: a(1),
        quorum: QUORUM as u32,
        down_after: DOWN_AFTER,
        failover_timeout: FAILOVER_TIMEOUT,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![a(2), a(3)],
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub alive: bool,
    /// 0 = master, else the port it replicates from.
    pub master_of: u16,
    pub offset: u64,
    pub replid: u8,
}

pub fn info(nodes: &BTreeMap<u16, Node>, port: u16) -> InfoReport {
    let n = &nodes[&port];
    let role = if n.master_of == 0 {
        Role::Master
    } else {
        let m = &nodes[&n.master_of];
        let up = m.alive && m.master_of == 0;
        Role::Replica {
            master: a(n.master_of),
            link_up: up,
            link_down_secs: if up { None } else { Some(1) },
            last_io_secs: if up { Some(0) } else { None },
            sync_in_progress: false,
        }
    };
    InfoReport {
        run_id: format!("run{port}"),
        role,
        offset: n.offset,
        priority: 100,
        announced: true,
        replid: format!("id{}", n.replid),
        replicas: nodes
            .iter()
            .filter(|(_, r)| r.alive && r.master_of == port)
            .map(|(p, r)| ListedReplica {
                addr: a(*p),
                offset: r.offset,
                online: true,
                lag: Some(0),
            })
            .collect(),
        keys: Some(5),
    }
}

/// A message kind; the network holds one message per (kind, from, to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Hello,
    Ask,
}

/// An answer to `is-master-down-by-addr` (the core's `DownAnswer`, with
/// the leader as a sentinel index).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ans {
    pub down: bool,
    pub leader: Option<Id>,
    pub leader_epoch: u64,
}

impl Ans {
    pub fn of(d: &DownAnswer) -> Ans {
        Ans {
            down: d.down,
            leader: d.leader.as_deref().map(index_of),
            leader_epoch: d.leader_epoch,
        }
    }

    pub fn to_core(&self) -> DownAnswer {
        DownAnswer {
            down: self.down,
            leader: self.leader.map(runid),
            leader_epoch: self.leader_epoch,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    /// The full 8-field payload.
    Hello(String),
    Ask {
        master: u16,
        epoch: u64,
        candidate: Option<Id>,
    },
}

/// A Valkyrie daemon: its core, what its `Persist` outputs recorded, and
/// whether it runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Val {
    pub core: Core,
    pub persisted: State,
    pub up: bool,
    pub jitter: Millis,
}

/// The Sentinel model's record of one peer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SenPeer {
    pub master_down: bool,
    pub reply_at: Option<Millis>,
    pub leader: Option<Id>,
    pub leader_epoch: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SenPhase {
    WaitStart,
    WaitPromotion(u16),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SenFailover {
    pub epoch: u64,
    pub phase: SenPhase,
    pub changed: Millis,
}

/// A real Sentinel 8.0.1, as far as its peers can tell (spec §4–§6).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sen {
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub master: u16,
    /// Its own vote.
    pub leader: Option<Id>,
    pub leader_epoch: u64,
    pub peers: BTreeMap<Id, SenPeer>,
    /// Its master's last valid reply.
    pub last_ok: Millis,
    pub sdown: bool,
    pub failover: Option<SenFailover>,
    /// `failover_start_time` (`None`: 0, long ago).
    pub failover_start: Option<Millis>,
    /// Its `rand() % 1000`, fixed per run.
    pub jitter: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sys {
    pub now: Millis,
    pub nodes: BTreeMap<u16, Node>,
    pub vals: Vec<Val>,
    pub sen: Sen,
    pub net: BTreeMap<(Kind, Id, Id), Msg>,
    /// Commands from each Valkyrie to the data nodes, in order.
    pub cmds: Vec<Vec<(u64, u16, Command)>>,
    pub partitioned: Option<Id>,
    /// The partitioned sentinel's current epoch when it was cut off.
    pub partition_epoch: u64,
    pub faults: u8,
    /// Record `core.current_epoch()` with every `Persist`, as the runtime
    /// does; when false, only the group states are kept (the current
    /// epoch stays at 0): the group states alone must hold every vote.
    pub persist_epoch: bool,
    // Ghosts: what happened, across crashes.
    /// (voter, epoch) → candidate.
    pub votes: BTreeMap<(Id, u64), Id>,
    /// epoch → (promoter, node).
    pub promotions: BTreeMap<u64, (Id, u16)>,
    /// config epoch → master.
    pub configs: BTreeMap<u64, u16>,
    /// Each sentinel's last advertised (config epoch, master).
    pub views: BTreeMap<Id, (u64, u16)>,
    pub violation: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    Partition(Id),
    Heal,
    Crash(Id),
    Restart(Id),
    /// Everything in flight is lost.
    Silence,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Time passes, nothing in flight; this sentinel's timer runs first.
    Tick(Id),
    /// Time passes while messages or commands are in flight.
    Delay(Id),
    /// The Sentinel model's timer runs between ticks (when that changes
    /// anything: a candidacy, a vote for itself, a won election).
    SenStep,
    Deliver(Kind, Id, Id),
    /// Everything one sentinel sent is delivered, in a fixed order.
    DeliverFrom(Id),
    Drop(Kind, Id, Id),
    Duplicate(Kind, Id, Id),
    /// A question is answered, and the answer lost.
    LoseAnswer(Id, Id),
    /// A Valkyrie answers a question (from the first sentinel) and
    /// crashes before the answer leaves.
    CrashAnswering(Id, Id),
    /// The head of a Valkyrie's command queue reaches its node.
    Command(Id),
    LoseCommand(Id),
    Crash(Id),
    Restart(Id),
    Partition(Id),
    Heal,
    CrashReplica,
    ReviveMaster,
    /// Liveness mode: one fair round (after a fault, if any).
    Round(Option<Fault>),
}

/// The faults a run may inject (each counts against `max_faults`; a
/// restart or a heal is free).
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Time passes while messages or commands are in flight.
    pub delay: bool,
    /// A hello or a question is lost.
    pub drop: bool,
    /// A hello or a question is delivered twice.
    pub duplicate: bool,
    /// A question is answered and the answer lost.
    pub lose_answer: bool,
    /// A command to a data node is lost.
    pub lose_command: bool,
    /// A Valkyrie crashes (and may restart from its persisted state).
    pub crash: bool,
    /// A sentinel is cut off from everyone (and may heal).
    pub partition: bool,
    /// Replica 2 dies.
    pub replica: bool,
    /// The dead master comes back (with its data, as a master).
    pub revive: bool,
    /// Liveness mode: a round in which everything in flight is lost.
    pub silence: bool,
}

pub struct Env {
    pub valkyries: u8,
    /// Jitter choices per Valkyrie (every combination is an initial state).
    /// The Valkyries' jitters, one vector per initial state.
    pub jitters: Vec<Vec<Millis>>,
    /// Jitter choices for the Sentinel model (its `rand() % 1000`).
    pub sen_jitters: Vec<Millis>,
    pub max_faults: u8,
    pub faults: Faults,
    /// Deliveries by sender (everything one sentinel sent, at once)
    /// rather than one message at a time: fewer interleavings.
    pub batched: bool,
    /// Faults only involve V0 (or the Sentinel model): with one fault,
    /// they stand for those of any Valkyrie.
    pub v0_faults: bool,
    pub persist_epoch: bool,
    pub horizon: Millis,
    /// Liveness mode: fair rounds; faults only before this time.
    pub liveness: Option<Millis>,
}

impl Sys {
    pub fn sentinels(&self) -> Vec<Id> {
        let n = u8::try_from(self.vals.len()).unwrap();
        (0..n).chain([SEN]).collect()
    }

    pub fn up(&self, i: Id) -> bool {
        i == SEN || self.vals[usize::from(i)].up
    }

    pub fn cut(&self, i: Id) -> bool {
        self.partitioned == Some(i)
    }

    pub fn reachable(&self, i: Id, j: Id) -> bool {
        self.up(i) && self.up(j) && !self.cut(i) && !self.cut(j)
    }

    pub fn violation(&mut self, text: String) {
        if self.violation.is_none() {
            self.violation = Some(text);
        }
    }

    pub fn threshold(&self) -> usize {
        let voters = self.vals.len() + 1;
        (voters / 2 + 1).max(QUORUM)
    }

    pub fn current_epoch(&self, i: Id) -> u64 {
        if i == SEN {
            self.sen.current_epoch
        } else {
            self.vals[usize::from(i)].core.current_epoch()
        }
    }

    /// (config epoch, master) a sentinel advertises.
    pub fn view(&self, i: Id) -> (u64, u16) {
        if i == SEN {
            (self.sen.config_epoch, self.sen.master)
        } else {
            let g = &self.vals[usize::from(i)].core.groups()[G];
            (g.config_epoch, g.master.port)
        }
    }

    // ----- ghosts and checks -----

    pub fn voted(&mut self, voter: Id, candidate: Id, epoch: u64) {
        match self.votes.get(&(voter, epoch)) {
            Some(c) if *c != candidate => self.violation(format!(
                "{} voted for {} and for {} in epoch {epoch}",
                name(voter),
                name(*c),
                name(candidate)
            )),
            Some(_) => {}
            None => {
                self.votes.insert((voter, epoch), candidate);
            }
        }
    }

    pub fn check_answer(&mut self, voter: Id, ans: &Ans) {
        if let Some(l) = ans.leader {
            let granted = self.votes.get(&(voter, ans.leader_epoch)).copied();
            if granted != Some(l) {
                self.violation(format!(
                    "{} answers a vote for {} in epoch {}, but granted {:?}",
                    name(voter),
                    name(l),
                    ans.leader_epoch,
                    granted.map(name)
                ));
            }
        }
    }

    pub fn promoted(&mut self, who: Id, epoch: u64, node: u16) {
        match self.promotions.get(&epoch).copied() {
            Some((w, n)) => {
                if w != who {
                    self.violation(format!(
                        "epoch {epoch}: promotions by {} (node {n}) and by {} (node {node})",
                        name(w),
                        name(who)
                    ));
                } else if n != node {
                    self.violation(format!(
                        "epoch {epoch}: {} promoted node {n} and node {node}",
                        name(who)
                    ));
                }
            }
            None => {
                self.promotions.insert(epoch, (who, node));
            }
        }
        if who != SEN {
            let votes = self
                .votes
                .iter()
                .filter(|((_, e), c)| *e == epoch && **c == who)
                .count();
            if votes < self.threshold() {
                self.violation(format!(
                    "{} promoted node {node} in epoch {epoch} with {votes} votes",
                    name(who)
                ));
            }
        }
        if self.cut(who) && epoch > self.partition_epoch {
            self.violation(format!(
                "{} promoted node {node} in epoch {epoch}, started while partitioned",
                name(who)
            ));
        }
    }

    pub fn check_views(&mut self) {
        for i in self.sentinels() {
            if !self.up(i) {
                continue;
            }
            let (e, m) = self.view(i);
            if let Some(&(e0, m0)) = self.views.get(&i) {
                if e < e0 {
                    self.violation(format!("{}: config epoch {e0} went back to {e}", name(i)));
                } else if m != m0 && e == e0 {
                    self.violation(format!(
                        "{}: master {m0} -> {m} without a higher config epoch ({e})",
                        name(i)
                    ));
                }
            }
            self.views.insert(i, (e, m));
            match self.configs.get(&e).copied() {
                Some(m2) if m2 != m => self.violation(format!(
                    "config epoch {e}: {} advertises node {m}, another sentinel node {m2}",
                    name(i)
                )),
                Some(_) => {}
                None => {
                    self.configs.insert(e, m);
                }
            }
        }
    }

    // ----- the network -----
}
