//! The world of `tests/models/core_model/mod.rs`: the nodes as they are,
//! what the daemon sent them, and the safety checks run at every step.

use std::collections::BTreeMap;

use valkyrie::core::{
    Addr, Command, Core, FailoverPhase, GroupSpec, InfoReport, Input, ListedReplica, Millis,
    Output, Reply, Role, State, select,
};

pub const NODES: [u16; 3] = [1, 2, 3];

pub fn a(p: u16) -> Addr {
    Addr::new("n", p)
}

/// How long a switchover waits for its route in the switchover check (a
/// tick: the wait can run out).
pub const ROUTE_WAIT: Millis = 500;

pub fn spec() -> GroupSpec {
    GroupSpec {
        name: "g".into(),
        master: a(1),
        quorum: 1,
        down_after: 1_000,
        failover_timeout: 3_000,
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
    pub run: u8,
    pub replid: u8,
    /// Restarted empty and not resynced since: its data is gone.
    pub lost: bool,
    /// Alive but answering nothing (SIGSTOP, a stuck disk).
    pub hung: bool,
    /// Answers PING with an error (`-MISCONF` after a failed save) and
    /// INFO as ever; refuses writes.
    pub refusing: bool,
    /// `CLIENT PAUSE … WRITE`: writes refused (held) while `now` is
    /// below it; 0 once unpaused.
    pub paused_until: Millis,
    /// `min-replicas-to-write` (the write fence): writes are refused
    /// while fewer replicas are attached.
    pub min_replicas: u64,
}

impl Node {
    pub fn new(master_of: u16, offset: u64) -> Node {
        Node {
            alive: true,
            master_of,
            offset,
            run: 0,
            replid: 0,
            lost: false,
            hung: false,
            refusing: false,
            paused_until: 0,
            min_replicas: 0,
        }
    }

    /// A master that takes writes now.
    pub fn writable(&self, now: Millis) -> bool {
        self.alive
            && !self.hung
            && !self.refusing
            && self.master_of == 0
            && now >= self.paused_until
    }
}

/// A command on its way to a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pending {
    pub token: u64,
    pub to: u16,
    pub command: Command,
    /// A switchover's `REPLICAOF NO ONE`: the master it replaces.
    pub switchover_from: Option<u16>,
    /// The run of the node it was sent to: a restarted node never sees
    /// it (the link's connection to the old process broke with it).
    pub run: u8,
    /// Sent by a daemon that restarted since: its reply reaches nobody.
    pub stale: bool,
}

/// A switchover's promotion, once delivered: the old master (and the
/// run the switchover paused) and the promoted node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Handover {
    pub old: u16,
    pub old_run: u8,
    pub new: u16,
    /// The old master took the replica role since: the hand-over is done.
    pub demoted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sys {
    pub now: Millis,
    pub core: Core,
    pub persisted: State,
    pub nodes: BTreeMap<u16, Node>,
    pub pending: Vec<Pending>,
    /// The daemon cannot reach the master (replicas can).
    pub cut_off: bool,
    /// The link reported the master's established connection stalled;
    /// later observations come from fresh connects.
    pub stall_reported: bool,
    pub crashed: bool,
    pub restarted: bool,
    pub daemon_restarted: bool,
    pub last_view: (u64, u16),
    pub replaced: Vec<u16>,
    /// `SENTINEL FAILOVER` calls so far.
    pub switchovers: u8,
    /// Writes taken so far.
    pub writes: u8,
    /// Per replication history, the highest offset a master acknowledged
    /// a write at.
    pub acked: BTreeMap<u8, u64>,
    /// Where each history forked from its parent: a promoted node starts
    /// a new one holding the parent's up to its offset then.
    pub forks: BTreeMap<u8, (u8, u64)>,
    /// Commands or replies lost so far.
    pub losses: u8,
    /// Every node was observed since time last moved on.
    pub observed: bool,
    /// The master the last switchover started from, and its run then.
    pub paused: Option<(u16, u8)>,
    /// The last answer to the switchover's catch-up INFO.
    pub last_catchup: Option<InfoReport>,
    /// The last switchover's promotion, once delivered.
    pub handover: Option<Handover>,
    /// Client kills (no effect on the nodes here) run as soon as sent:
    /// fewer steps to explore.
    pub instant_kills: bool,
    pub violation: Option<String>,
    /// A promotion a ready verdict named beforehand ([`World::tick`]);
    /// a flag, not a count, so the state space hardly grows.
    pub predicted: bool,
    /// Pauses and resumes so far (the model's `TogglePause`, at most two).
    pub pause_toggles: u8,
    /// A failover started after the group was paused and resumed.
    pub resumed_failover: bool,
    /// Where the group's route (a `-master` Service) leads: moved by
    /// `Output::Route`, and to each new master by the role hook.
    pub route: u16,
    /// A route to this node awaits its answer (`Input::Routed`).
    pub route_asked: Option<u16>,
}

/// What replicas report as the last I/O from a hung master once it has
/// been hung for longer than a live master's idle ping period.
fn super_silent_io() -> u64 {
    valkyrie::core::group::WITNESS_IO_SECS + 1
}

pub fn info(nodes: &BTreeMap<u16, Node>, port: u16) -> InfoReport {
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
        announced: true,
        replid: format!("id{}", n.replid),
        replicas: nodes
            .iter()
            .filter(|(_, r)| r.master_of == port)
            .map(|(p, r)| ListedReplica {
                addr: a(*p),
                offset: r.offset,
                online: true,
                lag: Some(0),
            })
            .collect(),
        keys: Some(if n.lost { 0 } else { 5 }),
    }
}

impl Sys {
    /// Whether an operator could cleanly promote replica `p` of a healthy
    /// node 1: it follows node 1 on the same history and holds the data.
    pub fn can_hand_over_to(&self, p: u16) -> bool {
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

    /// Whether replica `p` follows a live master on its own history and
    /// is behind it: replication can stream it the missing writes.
    pub fn can_replicate(&self, p: u16) -> bool {
        let n = &self.nodes[&p];
        if !n.alive || n.hung || n.master_of == 0 {
            return false;
        }
        let m = &self.nodes[&n.master_of];
        m.alive
            && !m.hung
            && m.master_of == 0
            && m.replid == n.replid
            && m.lost == n.lost
            && n.offset < m.offset
    }

    /// Whether `p` is the switchover's catch-up INFO: asked of the chosen
    /// replica while its offset must reach the paused master's.
    pub fn catching_up(&self, p: &Pending) -> bool {
        let g = &self.core.groups()["g"];
        !p.stale
            && p.command == Command::AskInfo
            && g.failover
                .as_ref()
                .is_some_and(|f| f.phase == FailoverPhase::CatchingUp && f.promoted.port == p.to)
    }

    /// The catch-up asks the chosen replica's INFO again at each answer:
    /// while the answer would be the last one the core got, that loop
    /// changes nothing but time, and its INFO is left in flight.
    fn idle(&self, p: &Pending) -> bool {
        let n = &self.nodes[&p.to];
        self.catching_up(p)
            && n.alive
            && n.run == p.run
            && self.last_catchup.as_ref() == Some(&info(&self.nodes, p.to))
    }

    /// The first pending command that is not an idle catch-up INFO.
    pub fn next_pending(&self) -> Option<usize> {
        self.pending.iter().position(|p| !self.idle(p))
    }

    /// The daemon has heard from every live node since it last started,
    /// and since that node last restarted.
    pub fn picture_current(&self) -> bool {
        let g = &self.core.groups()["g"];
        self.nodes.iter().all(|(p, n)| {
            !n.alive
                || g.instances[&a(*p)]
                    .info
                    .as_ref()
                    .is_some_and(|i| i.run_id == format!("run{p}-{}", n.run))
        })
    }

    pub fn feed(&mut self, input: Input) {
        let dbg = std::env::var("TMP_DBG").is_ok();
        if dbg {
            eprintln!("      IN {input:?}");
        }
        let idle = self.paused_and_idle();
        let out = self.core.handle(self.now, input);
        self.check_pause(idle);
        if dbg {
            for o in &out {
                if !matches!(o, Output::Persist { .. }) {
                    eprintln!("      OUT {o:?}");
                }
            }
        }
        self.apply(out, false);
    }

    /// A tick, checked against the readiness verdict of the state before
    /// it: a tick that promotes a replica promotes the one a ready verdict
    /// named (the verdict and the failover are one computation).
    pub fn tick(&mut self) {
        let named = self
            .core
            .readiness("g", self.now)
            .filter(|r| r.ready)
            .and_then(|r| r.candidate)
            .map(|c| c.addr);
        let idle = self.paused_and_idle();
        let out = self.core.handle(self.now, Input::Tick);
        self.check_pause(idle);
        let promoted = out.iter().find_map(|o| match o {
            Output::Send {
                to,
                command: Command::ReplicaOfNoOne,
                ..
            } => Some(to.clone()),
            _ => None,
        });
        if let (Some(x), Some(y)) = (&named, &promoted)
            && x != y
            && self.violation.is_none()
        {
            self.violation = Some(format!("the verdict named {x}, the tick promoted {y}"));
        }
        self.predicted |= named.is_some() && promoted.is_some();
        self.apply(out, false);
    }

    /// Whether no failover runs, and whether the group is paused.
    fn paused_and_idle(&self) -> (bool, bool) {
        let g = &self.core.groups()["g"];
        (g.failover.is_none(), g.paused())
    }

    /// A step that began paused with no failover must not start one; one
    /// that starts after the resume is noted.
    fn check_pause(&mut self, (idle, paused): (bool, bool)) {
        let started = idle && self.core.groups()["g"].failover.is_some();
        if started && paused && self.violation.is_none() {
            self.violation = Some("a failover started while paused".into());
        }
        self.resumed_failover |= started && !paused && self.pause_toggles == 2;
    }

    /// Applies the core's outputs; `manual` when they answer the
    /// operator's `SENTINEL FAILOVER`.
    pub fn apply(&mut self, out: Vec<Output>, manual: bool) {
        // A switchover's commands are sent while its failover, paused
        // master and all, is the core's.
        let switchover_from = self.core.groups()["g"]
            .failover
            .as_ref()
            .filter(|f| f.paused_until.is_some())
            .map(|f| f.old_master.port);
        let mut instant = Vec::new();
        for o in out {
            match o {
                Output::Send {
                    to, token, command, ..
                } if self.instant_kills
                    && matches!(
                        command,
                        Command::KillNormalClients | Command::KillPubsubClients
                    ) =>
                {
                    instant.push(Pending {
                        token,
                        to: to.port,
                        run: self.nodes[&to.port].run,
                        command,
                        switchover_from: None,
                        stale: false,
                    });
                }
                Output::Send {
                    to, token, command, ..
                } => {
                    let switchover_from = switchover_from
                        .filter(|_| command == Command::ReplicaOfNoOne)
                        .filter(|_| {
                            self.core.groups()["g"].failover.as_ref().unwrap().promoted == to
                        });
                    self.check_command(&to, &command, manual || switchover_from.is_some());
                    self.pending.push(Pending {
                        token,
                        to: to.port,
                        run: self.nodes[&to.port].run,
                        command,
                        switchover_from,
                        stale: false,
                    });
                }
                Output::Persist { group, state } => {
                    self.persisted.groups.insert(group, state);
                }
                Output::Route { to, confirm, .. } => {
                    self.route = to.port;
                    self.route_asked = confirm.then_some(to.port);
                }
                _ => {}
            }
        }
        self.check_view();
        for p in instant {
            let reply = self.execute(&p);
            self.answer(&p, reply);
        }
    }

    /// `planned`: a promotion the operator asked for, which may replace a
    /// healthy master.
    fn check_command(&mut self, to: &Addr, command: &Command, planned: bool) {
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
                // replaced, whatever the daemon's own path to it. One
                // that refuses PING (and writes) serves nobody: as on
                // Sentinel, it is replaced.
                let m = &self.nodes[&1];
                let followers = self
                    .nodes
                    .iter()
                    .filter(|(p, n)| **p != 1 && n.alive && n.master_of == 1)
                    .count();
                // Node 1 itself told so is no replacement: a switchover
                // given up after demoting it makes it master again.
                if !planned
                    && to.port != 1
                    && m.alive
                    && !m.hung
                    && !m.refusing
                    && !m.lost
                    && m.master_of == 0
                    && followers * 2 > 2
                {
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
            // A replaced master that has not rejoined since (resynced
            // from a later master) is never advertised again, as long as
            // some node holds the data.
            if self.replaced.contains(&view.1) && data_exists {
                self.violation = Some(format!("replaced master {} advertised again", view.1));
            }
            self.replaced.push(m0);
            // The role hook moves the route with the advertised master.
            self.route = view.1;
        } else if view.0 < e0 {
            self.violation = Some("config epoch went back".into());
        }
        self.last_view = view;
        // A switchover's route leads to its chosen replica while it runs;
        // once none runs, to the master.
        if g.failover.is_none() && self.route != view.1 {
            self.violation = Some(format!(
                "the route leads to {} while {} is the master and no switchover runs",
                self.route, view.1
            ));
        }
    }

    /// Runs a command on its node; returns the node's reply.
    pub fn execute(&mut self, p: &Pending) -> Reply {
        let port = p.to;
        let n = &self.nodes[&port];
        if !n.alive || n.hung || (self.cut_off && port == 1) {
            return Reply::Failed("unreachable".into());
        }
        if n.run != p.run {
            return Reply::Failed("connection reset".into());
        }
        let now = self.now;
        match &p.command {
            Command::ReplicaOfNoOne => {
                if let Some(old) = p.switchover_from {
                    self.promoted_by_switchover(port, old);
                }
                let n = self.nodes.get_mut(&port).unwrap();
                // On a master, `REPLICAOF NO ONE` changes nothing (no
                // new history).
                if n.master_of != 0 {
                    n.master_of = 0;
                    let parent = (n.replid, n.offset);
                    n.replid = n.replid.wrapping_add(10 + port as u8);
                    self.forks.insert(n.replid, parent);
                }
            }
            Command::ReplicaOf(t) => self.nodes.get_mut(&port).unwrap().master_of = t.port,
            Command::AskInfo => return Reply::Report(info(&self.nodes, port)),
            Command::PauseWrites { ms } => {
                self.nodes.get_mut(&port).unwrap().paused_until = now + ms;
            }
            Command::Unpause => self.nodes.get_mut(&port).unwrap().paused_until = 0,
            Command::KillNormalClients | Command::KillPubsubClients => {}
            Command::SetWriteFence(f) => {
                self.nodes.get_mut(&port).unwrap().min_replicas = f.replicas
            }
        }
        Reply::Ok
    }

    /// The reply to `p` reaches the daemon that sent it, if it still runs.
    pub fn answer(&mut self, p: &Pending, reply: Reply) {
        if !p.stale {
            self.feed(Input::Reply {
                group: "g".into(),
                addr: a(p.to),
                token: p.token,
                reply,
            });
        }
    }

    /// Whether a node on history `replid` at `offset` holds the writes of
    /// history `r` up to `k`.
    pub fn holds(&self, replid: u8, offset: u64, r: u8, k: u64) -> bool {
        let (mut h, mut off) = (replid, offset);
        for _ in 0..16 {
            if h == r {
                return off >= k;
            }
            let Some(&(parent, at)) = self.forks.get(&h) else {
                return false;
            };
            (h, off) = (parent, off.min(at));
        }
        false
    }

    /// A switchover's `REPLICAOF NO ONE` reaches `to`, replacing `old`:
    /// every acknowledged write that a node still holds — the paused
    /// master first — must be on `to` already. (An empty restart loses
    /// writes by itself: a node that restarted empty, or resynced from
    /// one, holds nothing, and one promoted so is never advertised.)
    pub fn promoted_by_switchover(&mut self, to: u16, old: u16) {
        let n = &self.nodes[&to];
        for (q, x) in &self.nodes {
            if !x.alive || x.lost || n.lost {
                continue;
            }
            let held = x
                .offset
                .min(self.acked.get(&x.replid).copied().unwrap_or(0));
            if held > 0 && !self.holds(n.replid, n.offset, x.replid, held) {
                self.violation = Some(format!(
                    "switchover promoted {to} at offset {} (history {}) while {q} holds writes \
                     acknowledged up to {held} (history {})",
                    n.offset, n.replid, x.replid
                ));
            }
        }
        // The run paused when the switchover started.
        let old_run = match self.paused {
            Some((p, run)) if p == old => run,
            _ => self.nodes[&old].run,
        };
        self.handover = Some(Handover {
            old,
            old_run,
            new: to,
            demoted: false,
        });
    }

    /// Never two writable masters during a switchover: once the
    /// switchover promoted a node, the old master (the same run) takes no
    /// write while it still reports master and the promoted one does too
    /// — neither unpaused by `CLIENT UNPAUSE` nor by its pause running out.
    pub fn check_handover(&mut self) {
        let Some(h) = &mut self.handover else {
            return;
        };
        let (o, n) = (&self.nodes[&h.old], &self.nodes[&h.new]);
        h.demoted |= o.master_of != 0;
        // An old master that restarted, or restarted empty and was paused
        // so, is the empty-restart guard's business.
        if h.demoted || o.run != h.old_run || o.lost {
            return;
        }
        if o.writable(self.now) && n.alive && n.master_of == 0 {
            let how = if o.paused_until == 0 {
                "unpaused, or never paused".to_string()
            } else {
                format!("its pause ran out at {}", o.paused_until)
            };
            self.violation = Some(format!(
                "two writable masters at {}: {} ({how}) beside {}, promoted by the switchover",
                self.now, h.old, h.new
            ));
        }
    }

    /// The last switchover went through: the promoted node is advertised,
    /// the old master follows it and was unpaused.
    pub fn switchover_completed(&self) -> bool {
        self.handover.as_ref().is_some_and(|h| {
            let o = &self.nodes[&h.old];
            h.demoted
                && self.core.groups()["g"].master.port == h.new
                && o.master_of == h.new
                && o.paused_until == 0
        })
    }
}
