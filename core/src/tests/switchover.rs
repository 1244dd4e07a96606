//! The planned switchover (`SENTINEL FAILOVER` with the master up): writes
//! paused, the replica caught up, the old master demoted, the replica
//! promoted, and the old master unpaused last; every way it is given up leaves the master the
//! master, unpaused.

use super::*;
use crate::group::PAUSE_MAX;

/// Starts a switchover on a healthy group; returns the token of the
/// master's INFO asked after the pause.
pub(super) fn start(h: &mut H) -> u64 {
    h.healthy();
    h.failover_asked();
    h.aligned();
    let sends = h.sends();
    let pause = sends
        .iter()
        .position(|(to, c, _)| *to == a(M) && matches!(c, Command::PauseWrites { .. }))
        .expect("CLIENT PAUSE sent");
    let info = sends
        .iter()
        .rposition(|(to, c, _)| *to == a(M) && *c == Command::AskInfo)
        .expect("INFO asked");
    assert!(
        pause < info,
        "INFO after the pause: it must show where writes stopped"
    );
    sends[info].2
}

#[test]
fn the_demotion_logs_where_the_write_stall_went() {
    let mut h = H::new();
    let t = start(&mut h);
    h.now += 3;
    h.reply(t, M, Reply::Report(master_info("m1", 150, &[R1, R2])));
    h.now += 2;
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 120, 100)));
    h.now += 4;
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 150, 100)));
    h.now += 1;
    h.demoted_first();
    h.now += 4;
    // The confirming INFO goes with the promotion, before its `+OK` is in.
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 150, &[])));
    assert_eq!(h.group().master, a(R1));
    let line = h
        .log
        .iter()
        .find_map(|o| match o {
            Output::Log { message, .. } if message.starts_with("switchover: ") => Some(message),
            _ => None,
        })
        .expect("the switchover's timeline is logged");
    assert!(
        line.contains("writes paused 14 ms until the demotion")
            && line.contains("offset after 3 ms")
            && line.contains("caught up after 9 ms in 2 INFO round(s), 30 bytes behind")
            && line.contains("the old master a replica 1 ms later")
            && line.contains("in the 4 ms after"),
        "{line}"
    );
}

fn unpaused(h: &H) -> bool {
    h.sends()
        .iter()
        .any(|(to, c, _)| *to == a(M) && *c == Command::Unpause)
}

#[test]
fn the_replica_is_promoted_once_it_holds_every_write_and_the_old_master_unpaused_last() {
    let mut h = H::new();
    let t = start(&mut h);
    // The paused master stopped at 150; R1 is at 100.
    h.reply(t, M, Reply::Report(master_info("m1", 150, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 120, 100)));
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne),
        "promoted before it caught up"
    );
    // Asked again at once; now it has everything.
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 150, 100)));
    // The old master demoted first: nothing promoted before it follows R1.
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne),
        "promoted before the old master was demoted"
    );
    h.demoted_first();
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    assert!(h.channels().contains(&"+failover-state-send-slaveof-noone"));
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 150, &[])));
    assert_eq!(h.group().master, a(R1));
    assert!(h.channels().contains(&"+switch-master"));
    // The old master: told to follow R1, its clients killed, and still
    // paused until it acknowledged.
    let t = h.token_of(M, &Command::ReplicaOf(a(R1)));
    h.token_of(M, &Command::KillNormalClients);
    assert!(!unpaused(&h), "unpaused before it was demoted");
    h.reply(t, M, Reply::Ok);
    assert!(unpaused(&h));
    // Durable before advertised, as any failover.
    let persisted = h
        .log
        .iter()
        .position(|o| matches!(o, Output::Persist { state, .. } if state.master == a(R1)))
        .unwrap();
    let switched = h
        .log
        .iter()
        .position(|o| matches!(o, Output::Event(e) if e.channel == Channel::SwitchMaster))
        .unwrap();
    assert!(persisted < switched);
}

#[test]
fn a_replica_that_does_not_catch_up_in_time_gives_up_and_unpauses() {
    let mut h = H::new();
    let t = start(&mut h);
    h.reply(t, M, Reply::Report(master_info("m1", 500, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 100, 100)));
    // Half the pause passes.
    h.now += PAUSE_MAX / 2 + 1;
    h.ping(M);
    h.ping(R1);
    h.feed(Input::Tick);
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert!(unpaused(&h));
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );
    // A late answer changes nothing.
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 500, 100)));
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );
}

#[test]
fn a_refused_pause_changes_nothing() {
    let mut h = H::new();
    h.healthy();
    h.failover_asked();
    h.aligned();
    let t = h.token_of(M, &Command::PauseWrites { ms: 10_000 });
    h.reply(t, M, Reply::Failed("NOPERM no permissions".into()));
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert!(
        h.core.failover(h.now, "mymaster").is_ok(),
        "may be asked again"
    );
}

#[test]
fn the_switchover_stops_when_the_chosen_replica_or_the_master_goes_down() {
    for (port, who) in [(R1, "replica"), (M, "master")] {
        let mut h = H::new();
        let t = start(&mut h);
        h.reply(t, M, Reply::Report(master_info("m1", 150, &[R1, R2])));
        h.down(port, LinkFailure::Refused);
        h.feed(Input::Tick);
        assert!(h.group().failover.is_none(), "{who} down");
        assert!(unpaused(&h), "{who} down");
        assert!(
            !h.sends()
                .iter()
                .any(|(_, c, _)| *c == Command::ReplicaOfNoOne),
            "{who} down"
        );
    }
}

#[test]
fn a_master_that_is_no_master_when_paused_is_not_switched_over() {
    let mut h = H::new();
    let t = start(&mut h);
    h.reply(t, M, Reply::Report(replica_info("m1", R2, true, 150, 100)));
    assert!(h.group().failover.is_none());
    assert!(unpaused(&h));
}

#[test]
fn a_master_that_restarted_since_it_last_reported_is_not_switched_over() {
    let mut h = H::new();
    let t = start(&mut h);
    // The INFO after the pause comes from another process (a new run
    // id, offset 0): the master restarted unseen, perhaps empty. Any
    // replica would "catch up" with 0 at once, chosen on offsets from
    // before the restart. The switchover is given up (the empty-restart
    // guard judges the report next).
    let before = h.log.len();
    h.reply(t, M, Reply::Report(master_info("m2", 0, &[])));
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
    assert!(unpaused(&h));
    assert!(
        h.log[before..].iter().any(|o| matches!(
            o,
            Output::Log { message, .. } if message.contains("restarted since it last reported")
        )),
        "{:?}",
        &h.log[before..]
    );
}

#[test]
fn a_switchover_waits_until_every_replica_has_reported() {
    let mut h = H::new();
    // R2 is listed by the master but has not reported yet (as right after
    // a daemon restart): it may hold what R1 lacks.
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.info(R1, replica_info("r1", M, true, 100, 100));
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::NotEveryReplicaReported)
    );
    assert!(h.group().failover.is_none());
    // Once it reported, the switchover goes ahead.
    h.info(R2, replica_info("r2", M, true, 90, 100));
    assert!(h.core.failover(h.now, "mymaster").is_ok());
}

#[test]
fn a_switchover_prefers_a_replica_whose_link_is_up() {
    let mut h = H::new();
    h.healthy();
    // R1 is ahead but its link is down (a reconnection, a resync): it
    // could not catch up with the paused master. R2 can.
    h.info(R1, replica_info("r1", M, false, 120, 100));
    h.failover_asked();
    assert_eq!(h.group().failover.as_ref().unwrap().promoted, a(R2));
}

#[test]
fn a_switchover_with_no_linked_replica_takes_the_best_one() {
    let mut h = H::new();
    h.healthy();
    h.info(R1, replica_info("r1", M, false, 120, 100));
    h.info(R2, replica_info("r2", M, false, 90, 100));
    h.failover_asked();
    assert_eq!(h.group().failover.as_ref().unwrap().promoted, a(R1));
}

#[test]
fn with_one_replica_the_switchover_ends_only_once_the_old_master_is_demoted_and_unpaused() {
    let mut h = H::new();
    h.info(M, master_info("m1", 100, &[R1]));
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.failover_asked();
    h.aligned();
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 100, &[R1])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 100, 100)));
    h.demoted_first();
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    assert_eq!(h.group().master, a(R1));
    // No other replica to reconfigure, but the old master is still
    // paused: the switchover goes on, so it stays the paused master (no
    // hello is sent to it) and its acknowledgement unpauses it.
    assert!(!h.channels().contains(&"+failover-end"));
    assert_eq!(h.group().paused_master(), Some(&a(M)));
    let t = h.token_of(M, &Command::ReplicaOf(a(R1)));
    h.reply(t, M, Reply::Ok);
    assert!(unpaused(&h));
    h.feed(Input::Tick);
    assert!(h.channels().contains(&"+failover-end"));
    assert!(h.group().failover.is_none());
}

#[test]
fn writes_are_paused_only_once_the_replica_is_level_with_the_master() {
    let mut h = H::new();
    h.healthy();
    h.failover_asked();
    let paused = |h: &H| {
        h.sends()
            .iter()
            .any(|(_, c, _)| matches!(c, Command::PauseWrites { .. }))
    };
    // The master is at 300, R1 at 200: writes go on, both asked again.
    for (master, replica) in [(300, 200), (400, 390)] {
        let t = h.token_of(M, &Command::AskInfo);
        h.reply(t, M, Reply::Report(master_info("m1", master, &[R1, R2])));
        h.now += 1;
        let t = h.token_of(R1, &Command::AskInfo);
        h.reply(
            t,
            R1,
            Reply::Report(replica_info("r1", M, true, replica, 100)),
        );
        assert!(!paused(&h), "paused with R1 at {replica} < {master}");
    }
    // R1 holds what the master had when asked: now writes are paused.
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 500, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 500, 100)));
    assert!(paused(&h));
    let f = h.group().failover.clone().unwrap();
    assert_eq!(f.phase, crate::group::FailoverPhase::Pausing);
    assert_eq!(f.timeline.align_rounds, 3);
}

#[test]
fn a_replica_that_stays_behind_is_waited_for_at_most_align_max() {
    let mut h = H::new();
    h.healthy();
    h.failover_asked();
    let start = h.now;
    let mut rounds = 0;
    loop {
        let t = h.token_of(M, &Command::AskInfo);
        h.reply(
            t,
            M,
            Reply::Report(master_info("m1", 1_000 + rounds, &[R1, R2])),
        );
        h.now += 100;
        let t = h.token_of(R1, &Command::AskInfo);
        h.reply(
            t,
            R1,
            Reply::Report(replica_info("r1", M, true, 900 + rounds, 100)),
        );
        rounds += 1;
        if h.sends()
            .iter()
            .any(|(_, c, _)| matches!(c, Command::PauseWrites { .. }))
        {
            break;
        }
        assert!(h.now - start <= crate::group::ALIGN_MAX, "still waiting");
    }
    // Paused anyway: the catch-up runs in the pause, as it did before.
    assert_eq!(h.now - start, crate::group::ALIGN_MAX);
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.phase),
        Some(crate::group::FailoverPhase::Pausing)
    );
}

#[test]
fn a_switchover_given_up_before_the_pause_sends_no_unpause() {
    let mut h = H::new();
    h.healthy();
    h.failover_asked();
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 100, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    // The chosen replica was promoted by someone else meanwhile.
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert!(!unpaused(&h), "nothing was paused");
}

/// A replica fresh from a full sync gets no stream until its first
/// `REPLCONF ACK`, up to a second later: it stands still while the
/// master's offset grows. Its rounds are paced rather than spent at once
/// (they ran out in 100–170 ms and the wait moved into the pause), and
/// once the stream starts the switchover pauses with the replica level.
#[test]
fn a_replica_that_stands_still_is_asked_again_only_after_a_pause() {
    let mut h = H::new();
    h.healthy();
    h.failover_asked();
    let masters_asked = |h: &H| {
        h.sends()
            .iter()
            .filter(|(to, c, _)| *to == a(M) && *c == Command::AskInfo)
            .count()
    };
    // Two answers at 100: the second stood still.
    for master in [300, 310] {
        let t = h.token_of(M, &Command::AskInfo);
        h.reply(t, M, Reply::Report(master_info("m1", master, &[R1, R2])));
        let t = h.token_of(R1, &Command::AskInfo);
        h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 100, 100)));
    }
    let asked = masters_asked(&h);
    // Inputs before the pace asks nothing more.
    h.now += crate::group::ALIGN_PACE - 1;
    h.ping(M);
    assert_eq!(masters_asked(&h), asked, "asked again at once");
    // Past it, the next input or tick starts the next round.
    h.now += 1;
    h.ping(M);
    assert_eq!(masters_asked(&h), asked + 1);
    // The stream started: level, and writes paused.
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 320, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 320, 100)));
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.phase),
        Some(crate::group::FailoverPhase::Pausing)
    );
}
