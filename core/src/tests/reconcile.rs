//! The persisted view against a world that moved on: adoption of the
//! master the others follow, and the guards that keep a stale view from
//! doing harm.

use super::*;

/// A daemon restarted with a state file naming `M` as master (epoch 2).
fn restarted() -> H {
    let mut state = State::default();
    state
        .groups
        .insert("mymaster".into(), GroupState::new(a(M), 2));
    let mut s = spec("mymaster", M);
    s.known_replicas = vec![a(R1)];
    H::with(vec![s], Some(&state))
}

/// R1 promoted by hand while the daemon was down, M following it.
fn r1_promoted(offset: u64) -> (InfoReport, InfoReport) {
    let mut r1 = master_info("r1", offset, &[M]);
    r1.replid = "replid-r1".into();
    let mut m = replica_info("m1", R1, true, offset, 100);
    m.replid = "replid-r1".into();
    (r1, m)
}

fn replicaofs(h: &H) -> Vec<(Addr, Addr)> {
    h.sends()
        .into_iter()
        .filter_map(|(to, c, _)| match c {
            Command::ReplicaOf(t) => Some((to, t)),
            _ => None,
        })
        .collect()
}

#[test]
fn roles_swapped_while_down_adopts_the_new_master_master_first() {
    let mut h = restarted();
    let (r1, m) = r1_promoted(500);
    h.info(M, m);
    h.info(R1, r1);
    let g = h.group();
    assert_eq!(g.master, a(R1));
    assert!(g.config_epoch > 2 && g.epoch >= g.config_epoch);
    assert!(h.channels().contains(&"+switch-master"));
    assert_eq!(replicaofs(&h), vec![], "the world was consistent already");
}

#[test]
fn roles_swapped_while_down_adopts_the_new_master_replica_first() {
    // The new master's INFO comes first: it must not be demoted towards a
    // master that is itself a replica (both would end up replicas).
    let mut h = restarted();
    let (r1, m) = r1_promoted(500);
    h.info(R1, r1.clone());
    h.now += 10;
    h.info(M, m);
    h.now += 10;
    h.info(R1, r1);
    assert_eq!(h.group().master, a(R1));
    assert_eq!(replicaofs(&h), vec![]);
}

#[test]
fn an_unknown_followed_master_is_watched_then_adopted() {
    let mut h = restarted();
    let r2 = 7000;
    let mut m = replica_info("m1", r2, true, 500, 100);
    m.replid = "replid-r2".into();
    let out = h.info(M, m.clone());
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Watch { addr, .. } if *addr == a(r2)))
    );
    let mut top = master_info("r2", 500, &[M]);
    top.replid = "replid-r2".into();
    h.info(r2, top);
    assert_eq!(h.group().master, a(r2));
}

#[test]
fn a_master_that_lost_its_data_is_never_adopted() {
    // R1 restarted empty as a master; M points at it but still holds its
    // keys (the link is not up yet).
    let mut h = restarted();
    let mut r1 = master_info("r1-new", 0, &[]);
    r1.replid = "replid-empty".into();
    r1.keys = Some(0);
    let m = replica_info("m1", R1, false, 500, 100);
    h.info(R1, r1);
    h.info(M, m);
    assert_eq!(h.group().master, a(M));
    assert!(!h.channels().contains(&"+switch-master"));
    assert!(
        replicaofs(&h).iter().all(|(to, t)| to != t),
        "told an instance to replicate from itself: {:?}",
        replicaofs(&h)
    );
}

#[test]
fn a_master_reporting_replica_of_nobody_adoptable_is_failed_over() {
    // M replicates from a node that is itself a replica; R1 and R2 follow
    // M. After down-after plus two INFO periods M counts as down, and the
    // best replica is promoted; M is never told to replicate from itself.
    let mut h = H::new();
    h.healthy();
    master_follows_a_replica(&mut h, false);
    assert!(h.channels().contains(&"+sdown"));
    assert_eq!(h.group().epoch, 1, "a failover started");
    assert!(replicaofs(&h).iter().all(|(to, t)| to != t));
}

#[test]
fn a_replica_is_never_told_to_replicate_from_itself() {
    // A replica reports it follows itself (a misconfiguration): the usual
    // correction points it at the master, never at itself; and the master
    // reporting a replica of itself gets nothing at all.
    let mut h = H::new();
    h.healthy();
    h.now += 100;
    h.info(R1, replica_info("r1", R1, false, 100, 100));
    assert!(replicaofs(&h).contains(&(a(R1), a(M))));
    h.now += 2_000;
    let mut m = replica_info("m1", M, false, 100, 100);
    m.replid = "replid-m1".into();
    h.info(M, m);
    assert!(replicaofs(&h).iter().all(|(to, t)| to != t));
}

/// For down-after plus 2.5 s, the master reports it replicates from a
/// node that is itself a replica of R2 (nobody to adopt), while R1 and R2
/// follow the master; `ping_master`: the master also answers PINGs.
pub(super) fn master_follows_a_replica(h: &mut H, ping_master: bool) {
    let chained = 7000;
    let mut m = replica_info("m1", chained, true, 100, 100);
    m.replid = "replid-m1".into();
    let mut relay = replica_info("x", R2, true, 100, 100);
    relay.replid = "replid-m1".into();
    h.info(chained, relay);
    let end = h.now + D + 2_500;
    while h.now < end {
        h.now += 100;
        if ping_master {
            h.ping(M);
        }
        h.info(M, m.clone());
        h.info(R1, replica_info("r1", M, true, 100, 100));
        h.info(R2, replica_info("r2", M, true, 90, 100));
        h.feed(Input::Tick);
    }
}
