//! Rule-by-rule tests of the core: sequences of observations in, commands
//! and events out.

use super::*;

mod admin;
mod at_risk;
mod client_reconfig;
mod crash;
mod demotion;
mod detect;
mod guard;
mod info;
mod levels;
mod limits;
mod pause;
mod peering;
mod plan;
mod readiness;
mod reconcile;
mod refusals;
mod route;
mod switchover;
mod timers;
mod trust;
mod write_fence;

const M: u16 = 6379;
const R1: u16 = 6380;
const R2: u16 = 6381;
const D: Millis = 1_000;

fn a(port: u16) -> Addr {
    Addr::new("127.0.0.1", port)
}

fn master_info(run_id: &str, offset: u64, replicas: &[u16]) -> InfoReport {
    InfoReport {
        run_id: run_id.into(),
        role: Role::Master,
        offset,
        priority: 100,
        announced: true,
        replid: format!("replid-{run_id}"),
        replicas: replicas
            .iter()
            .map(|&p| ListedReplica {
                addr: a(p),
                offset,
                online: true,
                lag: Some(0),
            })
            .collect(),
        keys: Some(10),
    }
}

fn replica_info(
    run_id: &str,
    master: u16,
    link_up: bool,
    offset: u64,
    priority: u32,
) -> InfoReport {
    InfoReport {
        run_id: run_id.into(),
        role: Role::Replica {
            master: a(master),
            link_up,
            link_down_secs: if link_up { None } else { Some(1) },
            last_io_secs: if link_up { Some(0) } else { None },
            sync_in_progress: false,
        },
        offset,
        priority,
        announced: true,
        replid: "replid-m1".into(),
        replicas: vec![],
        keys: Some(10),
    }
}

fn spec(name: &str, master: u16) -> GroupSpec {
    GroupSpec {
        name: name.into(),
        master: a(master),
        quorum: 2,
        down_after: D,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![],
    }
}

struct H {
    core: Core,
    now: Millis,
    /// Every output so far, in order.
    log: Vec<Output>,
}

impl H {
    fn new() -> H {
        H::with(vec![spec("mymaster", M)], None)
    }

    fn with(specs: Vec<GroupSpec>, state: Option<&State>) -> H {
        let (core, out) = Core::new(Settings::new("0".repeat(40)), specs, state, 0);
        H {
            core,
            now: 0,
            log: out,
        }
    }

    fn feed(&mut self, input: Input) -> Vec<Output> {
        let out = self.core.handle(self.now, input);
        self.log.extend(out.iter().cloned());
        out
    }

    fn info(&mut self, port: u16, info: InfoReport) -> Vec<Output> {
        self.feed(Input::Report {
            group: "mymaster".into(),
            addr: a(port),
            info,
        })
    }

    fn ping(&mut self, port: u16) -> Vec<Output> {
        self.feed(Input::PingOk {
            group: "mymaster".into(),
            addr: a(port),
        })
    }

    fn down(&mut self, port: u16, failure: LinkFailure) -> Vec<Output> {
        self.feed(Input::LinkDown {
            group: "mymaster".into(),
            addr: a(port),
            failure,
        })
    }

    fn reply(&mut self, token: u64, port: u16, reply: Reply) -> Vec<Output> {
        self.feed(Input::Reply {
            group: "mymaster".into(),
            addr: a(port),
            token,
            reply,
        })
    }

    /// A healthy topology: master with two replicas, R1 ahead of R2.
    fn healthy(&mut self) {
        self.info(M, master_info("m1", 100, &[R1, R2]));
        self.info(R1, replica_info("r1", M, true, 100, 100));
        self.info(R2, replica_info("r2", M, true, 90, 100));
    }

    /// `SENTINEL FAILOVER mymaster`, accepted; its outputs logged.
    fn failover_asked(&mut self) {
        let out = self.core.failover(self.now, "mymaster").unwrap();
        self.log.extend(out);
    }

    /// Acknowledges a planned switchover's demotion of the paused master
    /// (`REPLICAOF <chosen>`, before the promotion).
    fn demoted_first(&mut self) {
        let f = self.group().failover.clone().expect("a switchover");
        assert_eq!(f.phase, crate::group::FailoverPhase::Demoting);
        let t = self.token_of(f.old_master.port, &Command::ReplicaOf(f.promoted.clone()));
        self.reply(t, f.old_master.port, Reply::Ok);
    }

    /// Answers a planned switchover's alignment, writes still going on: the
    /// master's INFO as it last reported, then the chosen replica's, level
    /// with it. The pause follows.
    fn aligned(&mut self) {
        let f = self.group().failover.clone().expect("a switchover");
        assert_eq!(f.phase, crate::group::FailoverPhase::Aligning);
        let info_of = |h: &H, a: &Addr| h.group().instances[a].info.clone().expect("reported");
        let master = info_of(self, &f.old_master);
        let t = self.token_of(f.old_master.port, &Command::AskInfo);
        self.reply(t, f.old_master.port, Reply::Report(master.clone()));
        let mut replica = info_of(self, &f.promoted);
        replica.offset = replica.offset.max(master.offset);
        let t = self.token_of(f.promoted.port, &Command::AskInfo);
        self.reply(t, f.promoted.port, Reply::Report(replica));
    }

    /// Time passes by `ms` with replicas answering and the master silent.
    fn master_silent_for(&mut self, ms: Millis, r1: InfoReport, r2: InfoReport) {
        let end = self.now + ms;
        while self.now < end {
            self.now += 100;
            self.ping(R1);
            self.ping(R2);
            self.info(R1, r1.clone());
            self.info(R2, r2.clone());
        }
    }

    fn events(&self) -> Vec<(&'static str, String)> {
        self.log
            .iter()
            .filter_map(|o| match o {
                Output::Event(e) => Some((e.channel.as_str(), e.payload.clone())),
                _ => None,
            })
            .collect()
    }

    /// [`H::events`] but the `+monitor` every start publishes.
    fn events_since_start(&self) -> Vec<(&'static str, String)> {
        let mut events = self.events();
        events.retain(|(c, _)| *c != "+monitor");
        events
    }

    fn channels(&self) -> Vec<&'static str> {
        self.events().into_iter().map(|(c, _)| c).collect()
    }

    fn sends(&self) -> Vec<(Addr, Command, u64)> {
        self.log
            .iter()
            .filter_map(|o| match o {
                Output::Send {
                    to, command, token, ..
                } => Some((to.clone(), command.clone(), *token)),
                _ => None,
            })
            .collect()
    }

    fn token_of(&self, to: u16, command: &Command) -> u64 {
        self.sends()
            .into_iter()
            .rev()
            .find(|(t, c, _)| *t == a(to) && c == command)
            .map(|(_, _, tok)| tok)
            .unwrap_or_else(|| panic!("no {command:?} sent to {to}: {:?}", self.sends()))
    }

    /// A group restored from a state file whose epochs are at their
    /// maximum: no failover can take an epoch of its own.
    fn with_exhausted_epoch() -> H {
        let mut state = State::default();
        state
            .groups
            .insert("mymaster".into(), GroupState::new(a(M), u64::MAX));
        H::with(vec![spec("mymaster", M)], Some(&state))
    }

    /// A healthy group of quorum 3 that knows one verified peer: two
    /// sentinels can never make 3 votes.
    fn quorum_three_with_one_peer() -> H {
        let mut s = spec("mymaster", M);
        s.quorum = 3;
        let mut h = H::with(vec![s], None);
        h.healthy();
        h.feed(peering::hello(peering::P1, 26380, 0, M, 0));
        h.feed(Input::PeerPing {
            runid: peering::P1.into(),
            valid: true,
        });
        h
    }

    /// A healthy group whose master restarted empty: R1 resynced from
    /// it (its history changed, its offset went back), and R2 is never a
    /// candidate (priority 0).
    fn lost_data_with_r2_unpromotable() -> H {
        let mut h = H::new();
        h.healthy();
        h.info(R2, replica_info("r2", M, true, 90, 0));
        h.now += 50;
        let mut r1 = replica_info("r1", M, true, 5, 100);
        r1.replid = "replid-m2".into();
        r1.keys = Some(0);
        h.info(R1, r1);
        h
    }

    fn group(&self) -> &Group {
        &self.core.groups()["mymaster"]
    }

    /// Drives a failover of a dead master through to the promotion of R1.
    fn fail_over_dead_master(&mut self) {
        self.healthy();
        self.down(M, LinkFailure::Refused);
        self.master_silent_for(
            D + 200,
            replica_info("r1", M, false, 100, 100),
            replica_info("r2", M, false, 90, 100),
        );
        let t = self.token_of(R1, &Command::ReplicaOfNoOne);
        self.reply(t, R1, Reply::Ok);
        let t = self.token_of(R1, &Command::AskInfo);
        self.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    }
}

/// Groups `a`, `b` and `c` (masters at 7000, 7100, 7200, a replica each
/// one port up): the masters of `a` and `b` time out at once, and for
/// five `down-after` periods every replica answers and reports its link
/// down, while `c`'s master answers. TILT follows.
fn two_of_three_masters_time_out(h: &mut H) {
    for (g, base) in [("a", 7000u16), ("b", 7100)] {
        h.feed(Input::LinkDown {
            group: g.into(),
            addr: a(base),
            failure: LinkFailure::ConnectTimeout,
        });
    }
    let end = h.now + 5 * D;
    while h.now < end {
        h.now += 100;
        for (g, base) in [("a", 7000u16), ("b", 7100), ("c", 7200)] {
            h.feed(Input::PingOk {
                group: g.into(),
                addr: a(base + 1),
            });
            h.feed(Input::Report {
                group: g.into(),
                addr: a(base + 1),
                info: replica_info("r", base, false, 100, 100),
            });
        }
        h.feed(Input::PingOk {
            group: "c".into(),
            addr: a(7200),
        });
    }
}

#[test]
fn replicas_are_discovered_from_the_master() {
    let mut h = H::new();
    let out = h.info(M, master_info("m1", 0, &[R1, R2]));
    assert!(out.contains(&Output::Watch {
        group: "mymaster".into(),
        addr: a(R1)
    }));
    assert_eq!(
        h.events(),
        vec![
            // The start announces the group, as Sentinel's does.
            (
                "+monitor",
                "master mymaster 127.0.0.1 6379 quorum 2".to_string()
            ),
            (
                "+slave",
                "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster 127.0.0.1 6379".into()
            ),
            (
                "+slave",
                "slave 127.0.0.1:6381 127.0.0.1 6381 @ mymaster 127.0.0.1 6379".into()
            ),
        ]
    );
}

#[test]
fn dead_master_fails_over_to_the_best_replica() {
    let mut h = H::new();
    h.fail_over_dead_master();
    let g = h.group();
    assert_eq!(g.master, a(R1));
    assert_eq!(g.epoch, 1);
    // The failover announces itself in Sentinel's order.
    let ch = h.channels();
    let order = [
        "+sdown",
        "+odown",
        "+new-epoch",
        "+try-failover",
        "+vote-for-leader",
        "+elected-leader",
        "+failover-state-select-slave",
        "+selected-slave",
        "+failover-state-send-slaveof-noone",
        "+failover-state-wait-promotion",
        "+promoted-slave",
        "+failover-state-reconf-slaves",
        "+switch-master",
    ];
    let mut at = 0;
    for name in order {
        at += ch[at..]
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("{name} missing after {at}: {ch:?}"));
    }
    assert!(h.events().contains(&(
        "+switch-master",
        "mymaster 127.0.0.1 6379 127.0.0.1 6380".into()
    )));
    assert!(h.events().contains(&(
        "+odown",
        "master mymaster 127.0.0.1 6379 #quorum 1/1".into()
    )));
}

#[test]
fn state_is_persisted_before_acting() {
    let mut h = H::new();
    h.fail_over_dead_master();
    let pos = |pred: &dyn Fn(&Output) -> bool| h.log.iter().position(pred).unwrap();
    let persisted_epoch = pos(
        &|o| matches!(o, Output::Persist { state, .. } if state.epoch == 1 && state.failover.is_some()),
    );
    let no_one = pos(&|o| {
        matches!(
            o,
            Output::Send {
                command: Command::ReplicaOfNoOne,
                ..
            }
        )
    });
    assert!(persisted_epoch < no_one);
    let persisted_master =
        pos(&|o| matches!(o, Output::Persist { state, .. } if state.master == a(R1)));
    let switch = pos(&|o| matches!(o, Output::Event(e) if e.channel == Channel::SwitchMaster));
    assert!(persisted_master < switch);
}

#[test]
fn promoted_clients_are_killed_before_it_is_advertised_and_replicas_reconfigured_one_at_a_time() {
    let mut spec = spec("mymaster", M);
    spec.parallel_syncs = 1;
    let mut h = H::with(vec![spec], None);
    // A third replica so parallel-syncs matters.
    h.info(M, master_info("m1", 100, &[R1, R2, 6382]));
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.info(R2, replica_info("r2", M, true, 90, 100));
    h.info(6382, replica_info("r3", M, true, 80, 100));
    h.down(M, LinkFailure::Refused);
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        for p in [R1, R2, 6382] {
            h.ping(p);
        }
    }
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    // The kills follow REPLICAOF NO ONE on the same link, before the INFO
    // that confirms the promotion (sent with them): a client that follows
    // the advertisement is never disconnected by them.
    let to_r1: Vec<Command> = h
        .sends()
        .into_iter()
        .filter(|(to, _, _)| *to == a(R1))
        .map(|(_, c, _)| c)
        .collect();
    assert_eq!(
        to_r1[to_r1.len() - 4..],
        [
            Command::ReplicaOfNoOne,
            Command::KillNormalClients,
            Command::KillPubsubClients,
            Command::AskInfo
        ]
    );
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    let sends = h.sends();
    let kills = |c: &Command| {
        sends
            .iter()
            .filter(|(t, k, _)| *t == a(R1) && k == c)
            .count()
    };
    assert_eq!(kills(&Command::KillNormalClients), 1, "{sends:?}");
    assert_eq!(kills(&Command::KillPubsubClients), 1, "{sends:?}");
    let reconf: Vec<Addr> = sends
        .iter()
        .filter(|(_, c, _)| *c == Command::ReplicaOf(a(R1)))
        .map(|(t, _, _)| t.clone())
        .collect();
    assert_eq!(reconf.len(), 1, "parallel-syncs 1: {reconf:?}");
    // The first finishes; the next starts.
    let first = reconf[0].port;
    let t = h.token_of(first, &Command::ReplicaOf(a(R1)));
    h.reply(t, first, Reply::Ok);
    h.info(first, replica_info("x", R1, true, 100, 100));
    h.now += 10;
    h.ping(R1);
    let reconf_after = h
        .sends()
        .iter()
        .filter(|(_, c, _)| *c == Command::ReplicaOf(a(R1)))
        .count();
    assert_eq!(reconf_after, 2);
    let second = if first == R2 { 6382 } else { R2 };
    let t = h.token_of(second, &Command::ReplicaOf(a(R1)));
    h.reply(t, second, Reply::Ok);
    h.info(second, replica_info("y", R1, true, 100, 100));
    h.now += 10;
    h.ping(R1);
    assert!(h.channels().contains(&"+failover-end"));
    assert!(h.group().failover.is_none());
    assert_eq!(
        h.channels()
            .iter()
            .filter(|c| **c == "+switch-master")
            .count(),
        1
    );
}

#[test]
fn replica_choice_priority_offset_runid() {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1, R2, 6382, 6383]));
    h.down(M, LinkFailure::Refused);
    // R1: best offset but priority 0; R2: priority 50; 6382 and 6383:
    // priority 10, and 6382 is further ahead.
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        for (p, off, prio) in [
            (R1, 500, 0),
            (R2, 400, 50),
            (6382, 450, 10),
            (6383, 100, 10),
        ] {
            h.ping(p);
            h.info(p, replica_info(&format!("r{p}"), M, false, off, prio));
        }
    }
    let chosen = h.group().failover.as_ref().map(|f| f.promoted.clone());
    assert_eq!(chosen, Some(a(6382)));

    // Same offsets and priorities: the smaller run id wins.
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.down(M, LinkFailure::Refused);
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        h.ping(R1);
        h.ping(R2);
        h.info(R1, replica_info("bbb", M, false, 100, 100));
        h.info(R2, replica_info("aaa", M, false, 100, 100));
    }
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.promoted.clone()),
        Some(a(R2))
    );
}

#[test]
fn stale_silent_disconnected_and_long_unlinked_replicas_are_skipped() {
    use super::select::{Skip, eligibility};
    let mut h = H::new();
    h.healthy();
    h.now = 10_000;
    // INFO from 10 s ago is stale even though pings are answered.
    h.ping(R1);
    let g = h.group().clone();
    assert_eq!(
        eligibility(&g, &g.instances[&a(R1)], h.now),
        Err(Skip::StaleInfo)
    );
    // Not answering PING for over 5 s.
    h.info(R2, replica_info("r2", M, true, 90, 100));
    let g = h.group().clone();
    assert_eq!(
        eligibility(&g, &g.instances[&a(R2)], h.now + 5_001),
        Err(Skip::Silent)
    );
    // A link failure since the last answer.
    h.down(R2, LinkFailure::Reset);
    let g = h.group().clone();
    assert_eq!(
        eligibility(&g, &g.instances[&a(R2)], h.now),
        Err(Skip::Disconnected)
    );
    // A link to the master down for far longer than the master has been.
    let mut old = replica_info("r1", M, false, 100, 100);
    if let Role::Replica { link_down_secs, .. } = &mut old.role {
        *link_down_secs = Some(3_600);
    }
    h.info(R1, old);
    h.ping(M);
    let g = h.group().clone();
    assert_eq!(
        eligibility(&g, &g.instances[&a(R1)], h.now),
        Err(Skip::LongLinkDown)
    );
    // Priority 0.
    h.info(R1, replica_info("r1", M, true, 100, 0));
    let g = h.group().clone();
    assert_eq!(
        eligibility(&g, &g.instances[&a(R1)], h.now),
        Err(Skip::PriorityZero)
    );
    // Never synced since it started, no history: `-1` link-down seconds
    // (parsed as none) and offset 1. With history (an RDB loaded at
    // start: offset above 1) it stays a candidate.
    let mut fresh = replica_info("r1", M, false, 1, 100);
    if let Role::Replica { link_down_secs, .. } = &mut fresh.role {
        *link_down_secs = None;
    }
    h.info(R1, fresh.clone());
    let g = h.group().clone();
    assert_eq!(
        eligibility(&g, &g.instances[&a(R1)], h.now),
        Err(Skip::NeverSynced)
    );
    fresh.offset = 5_000;
    h.info(R1, fresh);
    let g = h.group().clone();
    assert_eq!(eligibility(&g, &g.instances[&a(R1)], h.now), Ok(()));
}

#[test]
fn no_eligible_replica_reports_and_does_not_bump_the_epoch() {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1]));
    h.down(M, LinkFailure::Refused);
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        h.ping(R1);
        h.info(R1, replica_info("r1", M, false, 100, 0));
    }
    assert!(h.channels().contains(&"-failover-abort-no-good-slave"));
    assert_eq!(h.group().epoch, 0);
    assert!(h.group().failover.is_none());
}

#[test]
fn returning_old_master_is_demoted_and_never_advertised() {
    let mut h = H::new();
    h.fail_over_dead_master();
    let before = h.sends().len();
    // The old master comes back, still believing it is the master.
    h.now += 100;
    h.info(M, master_info("m1", 100, &[]));
    assert_eq!(h.group().master, a(R1));
    let new: Vec<_> = h.sends()[before..].to_vec();
    assert!(
        new.iter()
            .any(|(t, c, _)| *t == a(M) && *c == Command::ReplicaOf(a(R1)))
    );
    assert!(
        new.iter()
            .any(|(t, c, _)| *t == a(M) && *c == Command::KillNormalClients)
    );
    assert!(h.channels().contains(&"+convert-to-slave"));
    assert!(h.group().instances[&a(M)].demoted);
    // Not re-sent on every INFO.
    h.now += 10;
    h.info(M, master_info("m1", 100, &[]));
    let again = h.sends()[before..]
        .iter()
        .filter(|(t, c, _)| *t == a(M) && *c == Command::ReplicaOf(a(R1)))
        .count();
    assert_eq!(again, 1);
    // It is trusted again once it has resynced from the new master.
    h.info(M, replica_info("m1", R1, true, 100, 100));
    assert!(!h.group().instances[&a(M)].demoted);
    assert_eq!(h.group().master, a(R1));
}

#[test]
fn promotion_that_never_confirms_is_aborted_and_the_epoch_not_reused() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, 1);
    // R1 never acknowledges; failover-timeout passes.
    h.master_silent_for(
        10_100,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
    // The next attempt, after the retry delay, uses a new epoch.
    h.master_silent_for(
        10_200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, 2);
    assert_eq!(h.group().master, a(M));
}

#[test]
fn interrupted_failover_resumes_with_the_same_replica_or_is_abandoned() {
    let state = State {
        groups: [(
            "mymaster".to_string(),
            GroupState {
                epoch: 3,
                config_epoch: 2,
                master: a(M),
                demoted: vec![],
                master_lost: None,
                paused: false,
                failover: Some(PersistedFailover {
                    epoch: 3,
                    old_master: a(M),
                    promoted: a(R2),
                    confirmed: false,
                    min_offset: 90,
                }),
                leader: None,
                leader_epoch: 0,
                known_peers: Vec::new(),
                peered: false,
                replicas: Vec::new(),
            },
        )]
        .into(),
        current_epoch: 0,
    };
    // The promotion did happen before the crash: it is completed.
    let mut h = H::with(vec![spec("mymaster", M)], Some(&state));
    let t = h.token_of(R2, &Command::AskInfo);
    h.reply(t, R2, Reply::Report(master_info("r2", 90, &[])));
    assert_eq!(h.group().master, a(R2));
    assert_eq!(h.group().epoch, 3);
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );

    // It did not: the epoch is abandoned, nothing is promoted twice.
    let mut h = H::with(vec![spec("mymaster", M)], Some(&state));
    let t = h.token_of(R2, &Command::AskInfo);
    h.reply(t, R2, Reply::Report(replica_info("r2", M, false, 90, 100)));
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert_eq!(h.group().epoch, 3);
}

#[test]
fn events_carry_their_group_even_when_the_payload_does_not() {
    let mut h = H::new();
    h.fail_over_dead_master();
    let events: Vec<&Event> = h
        .log
        .iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(events.iter().any(|e| e.channel == Channel::NewEpoch));
    for e in &events {
        assert_eq!(e.group.as_deref(), Some("mymaster"), "{e:?}");
    }
}

#[test]
fn daemon_wide_events_carry_no_group() {
    // Two of three masters unreachable trips TILT: `+tilt` belongs
    // to no group, the `+sdown`s before it to theirs.
    let specs = vec![spec("a", 7000), spec("b", 7100), spec("c", 7200)];
    let mut h = H::with(specs, None);
    for (g, base) in [("a", 7000u16), ("b", 7100)] {
        h.feed(Input::LinkDown {
            group: g.into(),
            addr: a(base),
            failure: LinkFailure::ConnectTimeout,
        });
    }
    h.now = 2 * D;
    h.feed(Input::PingOk {
        group: "c".into(),
        addr: a(7200),
    });
    // Other groups' timers advance on the shell's tick, not on group c's
    // traffic.
    h.feed(Input::Tick);
    let mut tilt = 0;
    for o in &h.log {
        if let Output::Event(e) = o {
            match e.channel {
                Channel::Tilt => {
                    tilt += 1;
                    assert_eq!(e.group, None);
                }
                Channel::Sdown => {
                    let port = e.instance().unwrap().port;
                    let expected = match port {
                        7000 => "a",
                        7100 => "b",
                        _ => panic!("unexpected {e:?}"),
                    };
                    assert_eq!(e.group.as_deref(), Some(expected));
                }
                _ => {}
            }
        }
    }
    assert_eq!(tilt, 1);
}
