//! Operator values at their extremes, and failovers that must end.

use super::*;
use crate::group::{MAX_FAILOVER_WAIT, PAUSE_MAX};

#[test]
fn a_switchover_pauses_writes_for_a_bounded_time() {
    for (timeout, paused) in [(i64::MAX as u64, PAUSE_MAX), (4_000, 4_000)] {
        let mut s = spec("mymaster", M);
        s.failover_timeout = timeout;
        let mut h = H::with(vec![s], None);
        h.healthy();
        let out = h.core.failover(h.now, "mymaster").unwrap();
        h.log.extend(out);
        h.aligned();
        let sent = h.sends().into_iter().find_map(|(_, c, _)| match c {
            Command::PauseWrites { ms } => Some(ms),
            _ => None,
        });
        assert_eq!(sent, Some(paused), "failover-timeout {timeout}");
    }
}

#[test]
fn a_failover_never_waits_past_its_own_deadline() {
    let mut s = spec("mymaster", M);
    s.failover_timeout = u64::MAX;
    let mut h = H::with(vec![s], None);
    h.healthy();
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, 1);
    // REPLICAOF NO ONE is never answered; R1 keeps answering as a replica.
    h.now += MAX_FAILOVER_WAIT + 1;
    h.ping(R1);
    h.feed(Input::Tick);
    assert!(h.group().failover.is_none());
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
}

#[test]
fn a_failover_whose_chosen_replica_dies_is_abandoned() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    let promoted = h.group().failover.as_ref().unwrap().promoted.clone();
    assert_eq!(promoted, a(R1));
    // R1 crashes before confirming; only R2 answers from now on.
    h.down(R1, LinkFailure::Refused);
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        h.ping(R2);
        h.feed(Input::Tick);
    }
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
    assert!(
        h.group()
            .failover
            .as_ref()
            .is_none_or(|f| f.promoted != a(R1)),
        "still waiting on a dead replica"
    );
}

#[test]
fn no_failover_once_the_epoch_is_exhausted() {
    let mut h = H::with_exhausted_epoch();
    h.healthy();
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::EpochExhausted)
    );
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert_eq!(h.group().epoch, u64::MAX);
    assert!(h.group().failover.is_none());
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );
}

#[test]
fn an_input_for_one_group_does_not_advance_another() {
    // With hundreds of groups, each input must cost one group's work: a
    // reply from group "a" leaves group "b"'s timers to the next tick.
    let specs = vec![spec("a", 7000), spec("b", 7100)];
    let mut h = H::with(specs, None);
    h.now = 3 * D;
    h.feed(Input::PingOk {
        group: "a".into(),
        addr: a(7000),
    });
    assert!(!h.core.groups()["b"].instances[&a(7100)].sdown);
    h.feed(Input::Tick);
    assert!(h.core.groups()["b"].instances[&a(7100)].sdown);
}

/// A master that restarted and answers INFO (as Valkey does while it
/// loads its dataset) but never PONG, with `master-reboot-down-after-period`
/// at `period`; `pong_after` is when its first PONG comes, if ever.
fn rebooted_master(period: Millis, pong_after: Option<Millis>) -> H {
    let mut s = spec("mymaster", M);
    s.down_after = 30_000;
    s.reboot_down_after = period;
    let mut h = H::with(vec![s], None);
    h.healthy();
    h.now += 100;
    h.ping(M);
    // Same data, new process: not an empty restart.
    h.info(M, master_info("m2", 100, &[R1, R2]));
    let start = h.now;
    while h.now < start + 8_000 {
        h.now += 100;
        h.info(M, master_info("m2", 100, &[R1, R2]));
        h.ping(R1);
        h.ping(R2);
        h.info(R1, replica_info("r1", M, true, 100, 100));
        h.info(R2, replica_info("r2", M, true, 90, 100));
        if pong_after.is_some_and(|t| h.now >= start + t) {
            h.ping(M);
        }
        h.feed(Input::Tick);
    }
    h
}

#[test]
fn a_rebooted_master_without_pong_is_down_after_the_reboot_period() {
    let h = rebooted_master(5_000, None);
    assert!(h.channels().contains(&"+reboot"));
    assert!(h.channels().contains(&"+sdown"));
    assert_eq!(h.group().epoch, 1, "failed over although INFO answered");
}

#[test]
fn a_pong_within_the_reboot_period_keeps_the_master() {
    let h = rebooted_master(5_000, Some(2_000));
    assert!(!h.channels().contains(&"+sdown"));
    assert_eq!(h.group().epoch, 0);
}

#[test]
fn without_a_reboot_period_a_restarted_master_is_judged_as_usual() {
    let h = rebooted_master(0, None);
    assert!(!h.channels().contains(&"+sdown"));
    assert_eq!(h.group().epoch, 0);
}
