//! Rule-by-rule tests of the core: sequences of observations in, commands
//! and events out.

use super::*;

mod info;
mod limits;
mod reconcile;

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
        replid: format!("replid-{run_id}"),
        replicas: replicas
            .iter()
            .map(|&p| ListedReplica {
                addr: a(p),
                offset,
                online: true,
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
        let (core, out) = Core::new(
            Settings {
                myid: "0".repeat(40),
            },
            specs,
            state,
            0,
        );
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
fn sdown_needs_down_after_without_a_valid_reply() {
    let mut h = H::new();
    h.healthy();
    h.now = D;
    h.ping(R1);
    h.ping(R2);
    assert!(!h.group().master_instance().unwrap().sdown);
    h.now = D + 1;
    h.ping(R1);
    assert!(h.group().master_instance().unwrap().sdown);
    assert!(h.channels().contains(&"+sdown"));
    // A valid reply clears it.
    h.ping(M);
    assert!(!h.group().master_instance().unwrap().sdown);
    assert!(h.channels().contains(&"-sdown"));
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
fn promoted_master_clients_are_killed_and_replicas_reconfigured_one_at_a_time() {
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
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    let sends = h.sends();
    assert!(
        sends
            .iter()
            .any(|(t, c, _)| *t == a(R1) && *c == Command::KillNormalClients)
    );
    assert!(
        sends
            .iter()
            .any(|(t, c, _)| *t == a(R1) && *c == Command::KillPubsubClients)
    );
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
fn unreachable_master_vouched_for_by_replicas_is_not_failed_over() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::ConnectTimeout);
    h.master_silent_for(
        5 * D,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert!(h.group().master_instance().unwrap().sdown);
    assert!(!h.channels().contains(&"+odown"));
    assert_eq!(h.group().epoch, 0);
    // Once the replicas lose it too, the master really is gone.
    h.master_silent_for(
        500,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert!(h.channels().contains(&"+odown"));
    assert_eq!(h.group().epoch, 1);
}

#[test]
fn stalled_master_waits_for_a_fresh_connect_then_witnesses_veto() {
    // The partition of a daemon in another zone: our established
    // connection goes quiet, the fresh connect times out, and the replicas
    // still hear from the master. Nothing may be failed over.
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Stalled);
    h.master_silent_for(
        D + 100,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert!(h.group().master_instance().unwrap().sdown);
    assert!(!h.channels().contains(&"+odown"));
    h.down(M, LinkFailure::ConnectTimeout);
    h.master_silent_for(
        8 * D,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert!(!h.channels().contains(&"+odown"));
    assert_eq!(h.group().epoch, 0);
    assert_eq!(h.group().master, a(M));
}

#[test]
fn stalled_master_found_hung_by_a_fresh_connect_is_failed_over() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Stalled);
    h.master_silent_for(
        D + 100,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert_eq!(h.group().epoch, 0, "a stall alone decides nothing");
    h.down(M, LinkFailure::Silent);
    h.master_silent_for(
        200,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert_eq!(h.group().epoch, 1);
}

#[test]
fn stall_never_classified_falls_back_to_the_witnesses() {
    // The fresh connect's verdict never arrives: after two down-after
    // periods the replicas decide, and they say the master is gone.
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Stalled);
    h.master_silent_for(
        D + 100,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, 0);
    h.master_silent_for(
        D + 100,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, 1);
}

#[test]
fn unreachable_master_with_no_reachable_replica_is_not_odown() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::ConnectTimeout);
    h.down(R1, LinkFailure::ConnectTimeout);
    h.down(R2, LinkFailure::ConnectTimeout);
    let end = h.now + 8 * D;
    while h.now < end {
        h.now += 100;
        h.feed(Input::Tick);
    }
    assert!(h.group().master_instance().unwrap().sdown);
    assert!(!h.channels().contains(&"+odown"));
    assert_eq!(h.group().epoch, 0);
}

#[test]
fn hung_master_needs_no_witnesses() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Silent);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert_eq!(h.group().epoch, 1);
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
fn master_restarted_empty_is_failed_over_at_once() {
    let mut h = H::new();
    h.healthy();
    h.now += 50;
    // Restarted inside down-after: new run id, offset 0, no keys.
    let mut empty = master_info("m2", 0, &[]);
    empty.keys = Some(0);
    h.info(M, empty);
    assert!(!h.group().master_instance().unwrap().sdown);
    assert!(h.channels().contains(&"+reboot"));
    let f = h.group().failover.clone().expect("failover started");
    assert_eq!(f.promoted, a(R1));
    assert_eq!(h.group().epoch, 1);
}

#[test]
fn replicas_that_resynced_from_an_empty_master_are_not_promoted() {
    let mut h = H::new();
    h.healthy();
    h.now += 50;
    // R1 already took a full sync from the restarted, empty master.
    let mut r1 = replica_info("r1", M, true, 0, 100);
    r1.replid = "replid-m2".into();
    h.info(R1, r1);
    let mut empty = master_info("m2", 0, &[]);
    empty.keys = Some(0);
    h.info(M, empty);
    let f = h.group().failover.clone().expect("failover started");
    assert_eq!(f.promoted, a(R2));
}

#[test]
fn a_replica_that_resynced_from_an_empty_master_before_its_promotion_is_not_advertised() {
    // Found by the model checker: chosen with offset 100, the replica
    // resyncs from the restarted empty master before REPLICAOF NO ONE
    // lands, and reports itself master with offset 0.
    let mut h = H::new();
    h.healthy();
    h.now += 50;
    let mut empty = master_info("m2", 0, &[]);
    empty.keys = Some(0);
    h.info(M, empty);
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.promoted.clone()),
        Some(a(R1))
    );
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 0, &[])));
    assert_eq!(
        h.group().master,
        a(M),
        "an empty node must not be advertised"
    );
    assert_eq!(h.group().config_epoch, 0);
    // Nothing is pointed at the empty master meanwhile.
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOf(a(M)))
    );
    // The next attempt picks the replica that still has the data.
    h.now += 10;
    h.ping(R2);
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.promoted.clone()),
        Some(a(R2))
    );
    assert_eq!(h.group().epoch, 2);
}

#[test]
fn restart_with_persistence_is_not_data_loss() {
    let mut h = H::new();
    h.healthy();
    h.now += 50;
    // New run id but the same replication history and offset.
    let mut back = master_info("m2", 100, &[R1, R2]);
    back.replid = "replid-m1".into();
    h.info(M, back);
    assert!(h.channels().contains(&"+reboot"));
    assert!(h.group().failover.is_none());
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
fn mass_failure_tilt_holds_failovers() {
    let specs = vec![spec("a", 7000), spec("b", 7100), spec("c", 7200)];
    let mut h = H::with(specs, None);
    for (g, base) in [("a", 7000u16), ("b", 7100), ("c", 7200)] {
        h.feed(Input::Report {
            group: g.into(),
            addr: a(base),
            info: master_info("m", 100, &[base + 1]),
        });
        h.feed(Input::Report {
            group: g.into(),
            addr: a(base + 1),
            info: replica_info("r", base, true, 100, 100),
        });
    }
    // Two of three masters time out at once.
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
    assert!(h.core.tilted());
    assert!(h.channels().contains(&"+tilt"));
    assert!(h.core.groups().values().all(|g| g.epoch == 0));
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
                failover: Some(PersistedFailover {
                    epoch: 3,
                    old_master: a(M),
                    promoted: a(R2),
                    confirmed: false,
                    min_offset: 90,
                }),
            },
        )]
        .into(),
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
fn manual_failover_is_coordinated_through_valkey() {
    let mut h = H::new();
    h.healthy();
    let out = h.core.failover(h.now, "mymaster").unwrap();
    h.log.extend(out);
    let t = h.token_of(
        M,
        &Command::Failover {
            to: a(R1),
            timeout: 10_000,
        },
    );
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::InProgress)
    );
    h.reply(t, M, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    assert_eq!(h.group().master, a(R1));
    assert_eq!(h.group().epoch, 1);
    assert_eq!(
        h.core.failover(h.now, "nosuch"),
        Err(AdminError::NoSuchMaster)
    );
}

#[test]
fn manual_failover_without_candidates() {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[]));
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::NoGoodReplica)
    );
}

#[test]
fn monitor_persists_then_watches_and_rejects_duplicates() {
    let mut h = H::new();
    let out = h.core.monitor(0, spec("other", 7000)).unwrap();
    assert!(
        matches!(&out[0], Output::Persist { group, state } if group == "other" && state.epoch == 0),
        "durable before anything else: {out:?}"
    );
    assert!(out.iter().any(
        |o| matches!(o, Output::Watch { group, addr } if group == "other" && *addr == a(7000))
    ));
    assert!(out.iter().any(|o| matches!(o, Output::Event(e)
        if e.channel == Channel::Monitor && e.payload == "master other 127.0.0.1 7000 quorum 2")));
    assert_eq!(
        h.core.monitor(0, spec("other", 7001)),
        Err(AdminError::DuplicateMaster)
    );
    assert_eq!(h.core.groups()["other"].master, a(7000));
}

#[test]
fn remove_forgets_the_group() {
    let mut h = H::new();
    assert_eq!(h.core.remove("nosuch"), Err(AdminError::NoSuchMaster));
    let out = h.core.remove("mymaster").unwrap();
    assert!(out.iter().any(|o| matches!(o, Output::Event(e)
        if e.channel == Channel::MonitorRemoved && e.payload == "master mymaster 127.0.0.1 6379")));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Forget { group } if group == "mymaster"))
    );
    assert!(h.core.groups().is_empty());
    // Inputs for it are ignored from now on.
    assert!(h.ping(M).is_empty());
}

#[test]
fn set_changes_the_timers_the_core_uses() {
    let mut h = H::new();
    h.healthy();
    let out = h
        .core
        .set(
            "mymaster",
            &GroupSpec {
                quorum: 3,
                down_after: 5 * D,
                failover_timeout: 20_000,
                parallel_syncs: 2,
                reboot_down_after: 0,
                ..spec("mymaster", M)
            },
            &["quorum 3".to_string()],
        )
        .unwrap();
    assert!(out.iter().any(|o| matches!(o, Output::Event(e)
        if e.channel == Channel::Set && e.payload == "master mymaster 127.0.0.1 6379 quorum 3")));
    let g = &h.core.groups()["mymaster"];
    assert_eq!(
        (g.spec.quorum, g.spec.down_after, g.spec.parallel_syncs),
        (3, 5 * D, 2)
    );
    // The old down-after no longer makes the master SDOWN.
    h.master_silent_for(
        2 * D,
        replica_info("r1", M, true, 100, 100),
        replica_info("r2", M, true, 90, 100),
    );
    assert!(!h.core.groups()["mymaster"].master_instance().unwrap().sdown);
    assert_eq!(
        h.core.set("nosuch", &spec("nosuch", M), &[]),
        Err(AdminError::NoSuchMaster)
    );
}

#[test]
fn reset_forgets_replicas_but_not_what_must_survive() {
    let mut h = H::new();
    h.healthy();
    assert_eq!(h.core.groups()["mymaster"].instances.len(), 3);
    let (n, out) = h
        .core
        .reset(&["mymaster".to_string(), "nosuch".to_string()]);
    assert_eq!(n, 1);
    for r in [R1, R2] {
        assert!(
            out.iter()
                .any(|o| matches!(o, Output::Unwatch { addr, .. } if *addr == a(r)))
        );
    }
    assert!(out.iter().any(|o| matches!(o, Output::Event(e)
        if e.channel == Channel::ResetMaster && e.payload == "master mymaster 127.0.0.1 6379")));
    let g = &h.core.groups()["mymaster"];
    assert_eq!(g.instances.keys().cloned().collect::<Vec<_>>(), vec![a(M)]);
    // The master's next INFO brings them back.
    let out = h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(
        out.iter()
            .filter(|o| matches!(o, Output::Watch { .. }))
            .count(),
        2
    );
}

#[test]
fn reset_leaves_a_failover_in_progress_alone() {
    let mut h = H::new();
    h.healthy();
    h.core.failover(h.now, "mymaster").unwrap();
    let (n, out) = h.core.reset(&["mymaster".to_string()]);
    assert_eq!(n, 0);
    assert!(!out.iter().any(|o| matches!(o, Output::Unwatch { .. })));
    assert!(h.core.groups()["mymaster"].failover.is_some());
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

#[test]
fn the_sentinel_port_switches_at_promotion_and_flags_the_failover() {
    use valkyrie_protocol::Frame;
    let mut h = H::new();
    h.fail_over_dead_master();
    // Promotion confirmed, replicas still being reconfigured: the new
    // master is advertised already, with the failover flagged.
    let t = crate::runtime::view(&h.core);
    let g = &t.groups["mymaster"];
    assert_eq!(g.master, a(R1));
    assert!(g.failover_in_progress);
    assert_eq!(g.failover_state, Some("reconf_slaves"));
    let Frame::Map(fields) = crate::sentinel::cmd::sentinel::master_map("mymaster", g, h.now)
    else {
        panic!("a map")
    };
    let field = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| *key == Frame::bulk(k.to_string()))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("port"), Some(Frame::bulk(R1.to_string())));
    assert_eq!(
        field("flags"),
        Some(Frame::bulk("master,failover_in_progress"))
    );
    assert_eq!(field("failover-state"), Some(Frame::bulk("reconf_slaves")));
}

/// A brand-new master with no data, whose replicas have not synced yet:
/// each replica reports offset 1 on its own replication id. That is no
/// evidence of lost data, and nothing may be failed over.
#[test]
fn unsynced_replicas_of_an_empty_new_master_are_no_evidence() {
    let mut h = H::new();
    let mut m = master_info("m1", 0, &[R1, R2]);
    m.keys = Some(0);
    let unsynced = |run: &str| {
        let mut i = replica_info(run, M, false, 1, 100);
        i.replid = format!("own-{run}");
        i.keys = Some(0);
        i
    };
    let (i1, i2) = (unsynced("r1"), unsynced("r2"));
    // The master lists its replicas, which are then watched.
    h.info(M, m.clone());
    h.info(R1, i1.clone());
    h.info(R2, i2.clone());
    for _ in 0..30 {
        h.now += 100;
        h.ping(M);
        h.info(R1, i1.clone());
        h.info(R2, i2.clone());
        h.info(M, m.clone());
    }
    assert!(
        h.core.groups()["mymaster"].failover.is_none(),
        "{:?}",
        h.events()
    );
    assert!(!h.events().iter().any(|(c, _)| *c == "+try-failover"));
}

/// A replica's first sync from a new, idle master takes its offset from 1
/// (unsynced, its own replication id) to 0 on the master's history: not a
/// resync from a master that lost data.
#[test]
fn a_first_sync_from_an_idle_master_is_no_evidence() {
    let mut h = H::new();
    let mut m = master_info("m1", 0, &[R1, R2]);
    m.keys = Some(0);
    h.info(M, m.clone());
    for (port, run) in [(R1, "r1"), (R2, "r2")] {
        let mut unsynced = replica_info(run, M, false, 1, 100);
        unsynced.replid = format!("own-{run}");
        unsynced.keys = Some(0);
        h.info(port, unsynced);
    }
    h.now += 100;
    for (port, run) in [(R1, "r1"), (R2, "r2")] {
        let mut synced = replica_info(run, M, true, 0, 100);
        synced.replid = m.replid.clone();
        synced.keys = Some(0);
        h.info(port, synced);
    }
    h.info(M, m);
    assert!(
        h.core.groups()["mymaster"].failover.is_none(),
        "{:?}",
        h.events()
    );
    assert!(!h.events().iter().any(|(c, _)| *c == "+try-failover"));
}
