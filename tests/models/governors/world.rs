//! The world of `tests/models/governors/mod.rs`: the master, the two
//! replicas' pods, the two governors' cores and the `CONFIG SET`s each
//! has in flight, the update's marks, and the property's check.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use valkyrie::core::{
    Addr, Command, Core, FenceMode, FenceSetting, GroupSpec, InfoReport, Input, LinkFailure,
    ListedReplica, Millis, Output, Reply, Role, Settings, WriteFence,
};

use crate::search::Traced;

pub const SECOND: Millis = 1_000;
/// `write-fence-lag`.
const LAG: u64 = 1;
pub const MASTER: u16 = 1;
/// In the order the update replaces them.
pub const REPLICAS: [u16; 2] = [2, 3];
pub const HOLDER: usize = 0;
pub const FOLLOWER: usize = 1;
const NAMES: [&str; 2] = ["holder", "follower"];
/// A core with this many settings in flight sends nothing more (its
/// actions that could wait) until one lands: a bound on the search.
pub const MAX_IN_FLIGHT: usize = 2;

pub fn a(p: u16) -> Addr {
    Addr::new("n", p)
}

fn run_id(port: u16, run: u8) -> String {
    format!("run{port}.{run}")
}

fn spec() -> GroupSpec {
    GroupSpec {
        name: "g".into(),
        master: a(MASTER),
        quorum: 2,
        down_after: SECOND,
        failover_timeout: 5 * SECOND,
        parallel_syncs: 1,
        reboot_down_after: 0,
        route_wait: 0,
        fence: WriteFence {
            mode: FenceMode::Auto,
            lag_secs: LAG,
        },
        known_replicas: REPLICAS.map(a).to_vec(),
    }
}

/// A replica's pod: its process (each return a new one, a new run id),
/// whether it exists, whether its sync is done (it acknowledges).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pod {
    pub run: u8,
    pub up: bool,
    pub synced: bool,
}

impl std::fmt::Debug for Pod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match (self.up, self.synced) {
            (false, _) => "deleted",
            (true, false) => "syncing",
            (true, true) => "synced",
        };
        write!(f, "{state}#{}", self.run)
    }
}

/// Where the update is, at `REPLICAS[i]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Roll {
    /// Next to replace, once every replica is in sync.
    Next(usize),
    /// Marked; the deletion waits for the holder's fence to ask no more
    /// than `need`, and for the follower as far as the test has it.
    Marked { i: usize, need: u64 },
    /// Deleted; the marks are cleared once it is back in sync.
    Deleted(usize),
    /// Every replica replaced, the marks cleared.
    Done,
}

/// A `CONFIG SET` on its way to the master: its token, its setting.
type Sent = (u64, FenceSetting);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sys {
    pub now: Millis,
    /// The holder's core, the follower's.
    pub cores: [Core; 2],
    /// Each core observed the nodes this second.
    pub observed: [bool; 2],
    /// Whether each core's settings are in flight (or run at once), and
    /// those sent and not yet run, oldest first.
    delayed: [bool; 2],
    pub in_flight: [VecDeque<Sent>; 2],
    pub pods: BTreeMap<u16, Pod>,
    /// The master's `min-replicas-to-write`, the core that set it last,
    /// when each replica it lists acknowledged.
    pub min_replicas: u64,
    pub set_by: Option<usize>,
    pub acks: BTreeMap<u16, Millis>,
    /// The marks in the custom resource's status; the follower's.
    pub published: BTreeSet<u16>,
    pub follower_marks: BTreeSet<u16>,
    pub roll: Roll,
    pub refused: Option<String>,
}

impl Sys {
    /// Two seconds of a healthy group, every setting run at once: both
    /// governors' fence (2 of 2) in force. From then on, core `c`'s
    /// settings are in flight if `delayed[c]`.
    pub fn settled(delayed: [bool; 2]) -> Sys {
        let core = |id: char| {
            let settings = Settings::new(id.to_string().repeat(40));
            Core::new(settings, vec![spec()], None, 0).0
        };
        let (run, up, synced) = (0, true, true);
        let mut s = Sys {
            now: 0,
            cores: [core('a'), core('b')],
            observed: [false; 2],
            delayed: [false; 2],
            in_flight: Default::default(),
            pods: REPLICAS.map(|p| (p, Pod { run, up, synced })).into(),
            min_replicas: 0,
            set_by: None,
            acks: BTreeMap::new(),
            published: BTreeSet::new(),
            follower_marks: BTreeSet::new(),
            roll: Roll::Next(0),
            refused: None,
        };
        for _ in 0..2 {
            s.second();
            s.observe(HOLDER);
            s.observe(FOLLOWER);
        }
        s.delayed = delayed;
        s.check();
        s
    }

    fn info(&self, port: u16) -> InfoReport {
        let listed = |(p, t): (&u16, &Millis)| ListedReplica {
            addr: a(*p),
            offset: 0,
            online: true,
            lag: Some((self.now - t) / SECOND),
        };
        let (run_id, role, replicas) = match self.pods.get(&port) {
            None => {
                let listed = self.acks.iter().map(listed).collect();
                (run_id(MASTER, 0), Role::Master, listed)
            }
            Some(pod) => {
                let role = Role::Replica {
                    master: a(MASTER),
                    link_up: pod.synced,
                    link_down_secs: (!pod.synced).then_some(1),
                    last_io_secs: pod.synced.then(|| (self.now - self.acks[&port]) / SECOND),
                    sync_in_progress: !pod.synced,
                };
                (run_id(port, pod.run), role, Vec::new())
            }
        };
        InfoReport {
            run_id,
            role,
            offset: 0,
            priority: 100,
            announced: true,
            replid: "h".into(),
            replicas,
            keys: Some(5),
        }
    }

    /// Replica `r` acknowledged within the lag: a good replica.
    fn fresh(&self, r: u16) -> bool {
        self.acks
            .get(&r)
            .is_some_and(|t| self.now - t <= LAG * SECOND)
    }

    /// The master's count of good replicas, current: Valkey counts each
    /// second, at `CONFIG SET` and as a replica leaves or goes online, the
    /// only moments here an acknowledgement or the time changes.
    fn good(&self) -> u64 {
        REPLICAS.iter().filter(|r| self.fresh(**r)).count() as u64
    }

    /// A second passes: every replica whose pod is up syncs (a returned
    /// one within its first second: the master counts it as it goes
    /// online) and acknowledges.
    pub fn second(&mut self) {
        self.now += SECOND;
        self.observed = [false; 2];
        for (p, pod) in self.pods.iter_mut().filter(|(_, pod)| pod.up) {
            pod.synced = true;
            self.acks.insert(*p, self.now);
        }
    }

    /// Carries out what core `c` returned: a `CONFIG SET` to the master
    /// joins the core's in flight (if delayed); any other command runs
    /// at once, its reply goes back to the core, and so on.
    fn carry_out(&mut self, c: usize, out: Vec<Output>) {
        let mut queue = VecDeque::from(out);
        let mut budget = 32;
        while let Some(o) = queue.pop_front() {
            let Output::Send {
                to, token, command, ..
            } = o
            else {
                continue;
            };
            budget -= 1;
            assert!(budget > 0, "the {} keeps sending commands", NAMES[c]);
            let reply = match command {
                Command::SetWriteFence(f) if to.port == MASTER => {
                    self.in_flight[c].push_back((token, f));
                    let n = self.in_flight[c].len();
                    assert!(n <= MAX_IN_FLIGHT, "the {} has {n} in flight", NAMES[c]);
                    if !self.delayed[c] {
                        self.land(c);
                    }
                    continue;
                }
                Command::AskInfo if self.pods.get(&to.port).is_none_or(|p| p.up) => {
                    Reply::Report(self.info(to.port))
                }
                Command::AskInfo => Reply::Failed("connection refused".into()),
                other => panic!("the {} sent {other:?} to {to:?}", NAMES[c]),
            };
            queue.extend(self.reply(c, to, token, reply));
        }
    }

    fn reply(&mut self, c: usize, addr: Addr, token: u64, reply: Reply) -> Vec<Output> {
        let group = "g".into();
        let input = Input::Reply {
            group,
            addr,
            token,
            reply,
        };
        self.cores[c].handle(self.now, input)
    }

    /// Core `c`'s oldest setting in flight runs on the master (the last
    /// `CONFIG SET` wins) and its `OK` reaches the core.
    pub fn land(&mut self, c: usize) {
        let (token, f) = self.in_flight[c].pop_front().unwrap();
        self.min_replicas = f.replicas;
        self.set_by = Some(c);
        let out = self.reply(c, a(MASTER), token, Reply::Ok);
        self.carry_out(c, out);
    }

    /// Core `c`'s second: a tick, then every node observed (a deleted
    /// pod's address refuses).
    pub fn observe(&mut self, c: usize) {
        self.observed[c] = true;
        let mut inputs = vec![Input::Tick];
        for p in std::iter::once(MASTER).chain(REPLICAS) {
            let (group, addr) = ("g".to_string(), a(p));
            if self.pods.get(&p).is_none_or(|pod| pod.up) {
                let (g, ad, info) = (group.clone(), addr.clone(), self.info(p));
                inputs.push(Input::PingOk { group: g, addr: ad });
                inputs.push(Input::Report { group, addr, info });
            } else {
                let failure = LinkFailure::Refused;
                inputs.push(Input::LinkDown {
                    group,
                    addr,
                    failure,
                });
            }
        }
        for input in inputs {
            let out = self.cores[c].handle(self.now, input);
            self.carry_out(c, out);
        }
    }

    pub fn retire(&mut self, c: usize, marks: &BTreeSet<u16>) {
        let addrs = marks.iter().map(|p| a(*p)).collect();
        let out = self.cores[c].retire(self.now, "g", &addrs).unwrap();
        self.carry_out(c, out);
    }

    /// Replica `r` in sync as the reconciler sees it: its pod up, and the
    /// holder's latest report of its current process says linked.
    pub fn in_sync(&self, r: u16) -> bool {
        let pod = &self.pods[&r];
        let seen = self.cores[HOLDER].groups()["g"].instances.get(&a(r));
        pod.up
            && seen
                .filter(|i| i.failure.is_none())
                .and_then(|i| i.info.as_ref())
                .is_some_and(|info| {
                    info.run_id == run_id(r, pod.run)
                        && matches!(info.role, Role::Replica { link_up: true, .. })
                })
    }

    /// The replica the update is at.
    pub fn leaving(&self) -> u16 {
        match self.roll {
            Roll::Next(i) | Roll::Marked { i, .. } | Roll::Deleted(i) => REPLICAS[i],
            Roll::Done => unreachable!("the update is done"),
        }
    }

    /// The property in the state reached: writes refused (fewer good
    /// replicas than `min-replicas-to-write`) while every replica not
    /// published as retiring is in sync and acknowledged within the lag.
    pub fn check(&mut self) {
        let staying = REPLICAS.iter().filter(|r| !self.published.contains(r));
        let ready = staying
            .clone()
            .all(|r| self.pods[r].synced && self.fresh(*r));
        if ready && self.good() < self.min_replicas && self.refused.is_none() {
            self.refused = Some(format!(
                "writes refused at {} ms: {} good replicas, min-replicas-to-write {} set by the \
                 {}, while every replica that stays ({:?}) acknowledges",
                self.now,
                self.good(),
                self.min_replicas,
                self.set_by.map_or("nobody", |c| NAMES[c]),
                staying.collect::<Vec<_>>()
            ));
        }
    }
}

impl Traced for Sys {
    fn summary(&self) -> String {
        let by = self.set_by.map_or("nobody", |c| NAMES[c]);
        let flight = self
            .in_flight
            .each_ref()
            .map(|q| q.iter().map(|(_, f)| f.replicas).collect::<Vec<_>>());
        let sent = self.cores[HOLDER].groups()["g"].fence_sent();
        let sent = sent.map(|(f, acknowledged)| (f.replicas, acknowledged));
        let s = self;
        format!(
            "t={} seen={:?} min={} by {by} in flight={flight:?} holder sent={sent:?} acks={:?} \
             pods={:?} published={:?} follower={:?} {:?}",
            s.now,
            s.observed,
            s.min_replicas,
            s.acks,
            s.pods,
            s.published,
            s.follower_marks,
            s.roll
        )
    }

    fn violation(&self) -> Option<&str> {
        self.refused.as_deref()
    }
}
