//! The bytes at risk of a failover: complete and 0 only when nothing
//! acknowledged can have been lost.

use super::*;

fn last(h: &H) -> crate::AtRisk {
    h.group().at_risk.back().cloned().expect("a record")
}

#[test]
fn a_dead_master_leaves_a_lower_bound() {
    let mut h = H::new();
    h.fail_over_dead_master();
    let r = last(&h);
    assert_eq!((r.old_master.port, r.promoted.port), (M, R1));
    assert_eq!((r.old_offset, r.promoted_offset, r.bytes()), (100, 100, 0));
    assert!(!r.complete, "a dead master may have acknowledged more");
    assert!(h.log.iter().any(|o| matches!(o,
        Output::Log { message, .. } if message.contains("at least 0 bytes at risk"))));
}

#[test]
fn the_old_master_seen_again_settles_the_figure() {
    let mut h = H::new();
    h.fail_over_dead_master();
    // The cut heals: the same process reports master, ahead of the fork.
    h.now += D;
    h.ping(M);
    h.info(M, master_info("m1", 180, &[]));
    let r = last(&h);
    assert!(r.complete);
    assert_eq!(r.bytes(), 80);
    // Another process (a restart) would have told nothing.
    let mut h = H::new();
    h.fail_over_dead_master();
    h.now += D;
    h.ping(M);
    h.info(M, master_info("m2", 180, &[]));
    assert!(!last(&h).complete);
}

#[test]
fn a_switchover_is_complete_and_zero() {
    let mut h = H::new();
    h.healthy();
    let out = h.core.failover(h.now, "mymaster").unwrap();
    h.log.extend(out);
    h.aligned();
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 150, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 150, 100)));
    h.demoted_first();
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 150, &[])));
    let r = last(&h);
    assert!(r.complete);
    assert_eq!(r.bytes(), 0);
    assert_eq!(r.fenced, crate::Fenced::Paused);
}

#[test]
fn a_failover_a_peer_ran_is_recorded_when_adopted() {
    let mut h = super::peering::peered();
    h.info(M, master_info("m1", 180, &[R1, R2]));
    h.info(R1, replica_info("r1", M, true, 150, 100));
    // The master is cut off from us; a peer promotes R1 in epoch 3.
    h.feed(super::peering::hello(super::peering::P1, 26380, 3, R1, 3));
    h.now += 100;
    h.info(R1, master_info("r1", 150, &[]));
    assert_eq!(h.group().master, a(R1));
    let r = last(&h);
    assert_eq!((r.epoch, r.old_master.port, r.promoted.port), (3, M, R1));
    assert_eq!((r.old_offset, r.promoted_offset, r.bytes()), (180, 150, 30));
    assert!(!r.complete, "the old master may have taken more");
    assert!(h.log.iter().any(|o| matches!(o,
        Output::Log { message, .. } if message.contains("+switch-master epoch 3: at least 30 bytes at risk"))));
    // The cut heals: the same process, still master, settles it.
    h.now += 100;
    h.info(M, master_info("m1", 200, &[]));
    let r = last(&h);
    assert!(r.complete);
    assert_eq!(r.bytes(), 50);
}

#[test]
fn an_adopted_master_never_seen_as_a_replica_is_not_given_a_figure() {
    let mut h = super::peering::peered();
    h.feed(super::peering::hello(super::peering::P1, 26380, 3, R1, 3));
    // R1 reports the master role from a new process: its offsets as a
    // replica were another process's.
    h.now += 100;
    h.info(R1, master_info("r1-again", 150, &[]));
    assert_eq!(h.group().master, a(R1));
    assert!(h.group().at_risk.is_empty());
    assert!(h.log.iter().any(|o| matches!(o,
        Output::Log { message, .. } if message.contains("bytes at risk unknown"))));
}
