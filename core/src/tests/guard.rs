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
