//! Failure detection: SDOWN, the liveness classification of a silent
//! master (stall, hung, unreachable) and the replica witnesses, TILT.

use super::*;

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

/// A master that answers INFO but refuses PING (`-MISCONF` after a
/// failed save, a wrong password) is SDOWN after down-after, as on
/// Sentinel, and its replicas' links do not vouch for it.
#[test]
fn a_master_refusing_pings_is_sdown_whatever_its_info_says() {
    let mut h = H::new();
    h.healthy();
    let refused = |h: &mut H| {
        h.feed(Input::PingRefused {
            group: "mymaster".into(),
            addr: a(M),
        })
    };
    refused(&mut h);
    // INFO goes on (a misconfigured Valkey still answers it), every
    // replica still follows the master; only PING is refused.
    let mut t = 0;
    while t <= D {
        h.now = t;
        h.healthy();
        h.ping(R1);
        h.ping(R2);
        refused(&mut h);
        assert!(!h.group().master_instance().unwrap().sdown, "at {t}");
        t += D / 10;
    }
    h.now = D + 1;
    h.healthy();
    h.ping(R1);
    assert!(h.group().master_instance().unwrap().sdown);
    assert!(h.channels().contains(&"+sdown"));
    // Not taken for a master only we are cut off from: the replicas'
    // links vouch for nothing, and it is failed over.
    assert!(!h.group().master_unreachable());
    assert!(h.channels().contains(&"+odown"));
    // A valid PING reply clears the refusal (here after the failover
    // started: the old master is only no longer SDOWN).
    h.ping(M);
    assert!(h.group().instances[&a(M)].refused_since.is_none());
    assert!(!h.group().instances[&a(M)].sdown);
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
    assert_eq!(h.core.tilt_since(), None);
    let start = h.now;
    // Two of three masters time out at once.
    two_of_three_masters_time_out(&mut h);
    assert!(h.core.tilted());
    // INFO's sentinel_tilt_since_seconds counts from here.
    assert!(
        h.core
            .tilt_since()
            .is_some_and(|t| t >= start && t <= h.now)
    );
    assert!(h.channels().contains(&"+tilt"));
    assert!(h.core.groups().values().all(|g| g.epoch == 0));
}
