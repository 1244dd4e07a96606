//! Administrative requests: manual failover, MONITOR, REMOVE, SET, RESET.

use super::*;

#[test]
fn manual_failover_with_the_master_up_is_a_switchover() {
    let mut h = H::new();
    h.healthy();
    let out = h.core.failover(h.now, "mymaster").unwrap();
    h.log.extend(out);
    // Writes go on while the replica is brought level, then are paused:
    // no promotion yet (the steps are in tests/switchover.rs).
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| matches!(c, Command::PauseWrites { .. }))
    );
    h.aligned();
    h.token_of(M, &Command::PauseWrites { ms: 10_000 });
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::InProgress)
    );
    assert_eq!(
        h.core.failover(h.now, "nosuch"),
        Err(AdminError::NoSuchMaster)
    );
}

#[test]
fn a_switchover_from_a_master_that_moved_is_refused_and_does_nothing() {
    let mut h = H::new();
    h.healthy();
    let before = h.sends().len();
    assert_eq!(
        h.core.switch_over(h.now, "mymaster", &a(R1)),
        Err(AdminError::MasterMoved)
    );
    assert_eq!(h.sends().len(), before);
    assert!(h.group().failover.is_none());
    assert_eq!(
        h.core.switch_over(h.now, "nosuch", &a(M)),
        Err(AdminError::NoSuchMaster)
    );
    let out = h.core.switch_over(h.now, "mymaster", &a(M)).unwrap();
    h.log.extend(out);
    h.aligned();
    h.token_of(M, &Command::PauseWrites { ms: 10_000 });
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
                fence: Default::default(),
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
fn retiring_replicas_are_never_chosen() {
    use std::collections::BTreeSet;
    // Both replicas retiring: nothing to promote.
    let mut h = H::new();
    h.healthy();
    let both = BTreeSet::from([a(R1), a(R2)]);
    h.core.retire(h.now, "mymaster", &both).unwrap();
    assert_eq!(
        h.core.failover(h.now, "mymaster"),
        Err(AdminError::NoGoodReplica)
    );
    // The mark is replaced, not added to: with one left, it is chosen.
    for (retiring, chosen) in [(R1, R2), (R2, R1)] {
        let mut h = H::new();
        h.healthy();
        h.core.retire(h.now, "mymaster", &both).unwrap();
        h.core
            .retire(h.now, "mymaster", &BTreeSet::from([a(retiring)]))
            .unwrap();
        let out = h.core.failover(h.now, "mymaster").unwrap();
        h.log.extend(out);
        assert_eq!(
            h.group().failover.as_ref().map(|f| f.promoted.clone()),
            Some(a(chosen))
        );
    }
    assert_eq!(
        H::new().core.retire(0, "nosuch", &BTreeSet::new()),
        Err(AdminError::NoSuchMaster)
    );
}
