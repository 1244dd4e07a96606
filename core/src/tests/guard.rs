//! The empty-restart guard: masters that lost their data, and the
//! patterns that are no evidence of it.

use super::*;

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

#[test]
fn a_replica_that_restarted_empty_is_no_evidence_against_its_master() {
    // Found by tests/failover/migration/mod.rs: the old master, killed and restarted
    // without persistence, comes back as a replica of the new master and
    // reports offset 0 on a history of its own while its first sync runs.
    // Its offset went back because it restarted, not because the master
    // lost anything.
    let mut h = H::new();
    h.healthy();
    h.now += 50;
    let mut restarted = replica_info("r2-new", M, false, 0, 100);
    restarted.replid = "replid-r2-new".into();
    restarted.keys = Some(0);
    h.info(R2, restarted);
    assert!(h.channels().contains(&"+reboot"));
    assert_eq!(h.group().epoch, 0, "no failover");
    assert!(h.group().failover.is_none());
    assert!(h.group().master_lost.is_none());
}

/// A manual `SENTINEL FAILOVER` while the master's lost history is known
/// chooses as the automatic path does: never a replica that already
/// resynced from the empty master.
#[test]
fn a_manual_failover_never_promotes_a_replica_on_the_lost_history() {
    let mut h = H::lost_data_with_r2_unpromotable();
    assert_eq!(h.group().master_lost.as_deref(), Some("replid-m2"));
    assert!(h.group().failover.is_none(), "no automatic candidate");
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::NoGoodReplica)
    );
    assert!(h.group().failover.is_none());
}

/// An election started because the master went down, and won after the
/// master came back empty: the failover it starts keeps out the replica
/// that already resynced onto the empty history, as the empty-restart
/// guard's own does.
#[test]
fn an_election_won_after_the_master_lost_its_data_keeps_its_history_out() {
    use super::peering::{P1, P2, answer, peered};
    let mut h = peered();
    h.info(R1, replica_info("r1", M, true, 100, 50));
    h.down(M, LinkFailure::Refused);
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        for p in [R1, R2] {
            h.ping(p);
        }
        h.info(R1, replica_info("r1", M, false, 100, 50));
        h.info(R2, replica_info("r2", M, false, 90, 100));
        for id in [P1, P2] {
            h.feed(Input::PeerPing {
                runid: id.into(),
                valid: true,
            });
        }
    }
    answer(&mut h, P1, true, None, 0);
    assert!(h.group().election.is_some(), "an election for ODOWN");
    // The master is back, empty; R1 (the better priority) resyncs from it.
    h.now += 100;
    let mut empty = master_info("m2", 0, &[R1, R2]);
    empty.keys = Some(0);
    empty.replid = "replid-m2".into();
    h.ping(M);
    h.info(M, empty);
    let mut r1 = replica_info("r1", M, true, 5, 50);
    r1.replid = "replid-m2".into();
    r1.keys = Some(0);
    h.info(R1, r1);
    assert!(h.group().master_lost.is_some());
    answer(&mut h, P1, true, Some(&"0".repeat(40)), 1);
    let promoted = h.group().failover.as_ref().map(|f| f.promoted.clone());
    assert_eq!(promoted, Some(a(R2)), "R1 holds only the empty history");
}
