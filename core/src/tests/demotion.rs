//! A switchover's demotion of the old master before the promotion
//! (`core/src/group/switchover.rs`, phase `Demoting`), and each way out
//! of it: the old master made master again before it is unpaused, or the
//! group failed over when the daemon restarted in between.

use super::switchover::start;
use super::*;
use crate::group::PAUSE_MAX;

/// A switchover whose chosen replica R1 is level with the paused master
/// M: the demotion (`REPLICAOF <R1>` to M) is sent.
fn level() -> H {
    let mut h = H::new();
    let t = start(&mut h);
    h.reply(t, M, Reply::Report(master_info("m1", 100, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 100, 100)));
    h
}

/// The last two commands to M: master again, then unpaused.
fn assert_master_again(h: &H) {
    let sent: Vec<Command> = h
        .sends()
        .into_iter()
        .filter(|(to, _, _)| *to == a(M))
        .map(|(_, c, _)| c)
        .collect();
    let n = sent.len();
    assert_eq!(sent[n - 2..], [Command::ReplicaOfNoOne, Command::Unpause]);
}

#[test]
fn an_old_master_that_refuses_its_demotion_stays_the_master_and_nothing_is_promoted() {
    let mut h = level();
    let t = h.token_of(M, &Command::ReplicaOf(a(R1)));
    h.reply(t, M, Reply::Failed("NOPERM replicaof".into()));
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert!(
        !h.sends()
            .iter()
            .any(|(to, c, _)| *to == a(R1) && *c == Command::ReplicaOfNoOne)
    );
    // Master again (a no-op on a master that refused), then unpaused.
    assert_master_again(&h);
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
}

#[test]
fn a_switchover_given_up_while_demoting_makes_the_old_master_master_again() {
    let mut h = level();
    // The demotion's answer never comes; half the pause passes.
    h.now += PAUSE_MAX / 2 + 1;
    h.ping(M);
    h.ping(R1);
    h.feed(Input::Tick);
    assert!(h.group().failover.is_none());
    assert_master_again(&h);
}

#[test]
fn a_refused_promotion_makes_the_old_master_master_again_at_once() {
    let mut h = level();
    h.demoted_first();
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    h.reply(t, R1, Reply::Failed("NOPERM replicaof".into()));
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert_master_again(&h);
}

#[test]
fn a_promotion_that_does_not_come_after_the_demotion_makes_the_old_master_master_again() {
    let mut h = level();
    h.demoted_first();
    // R1 never reports the master role: the failover's deadline passes.
    h.now += 10 * 60_000;
    h.ping(M);
    h.ping(R1);
    h.feed(Input::Tick);
    assert!(h.group().failover.is_none());
    assert_eq!(h.group().master, a(M));
    assert_master_again(&h);
}

#[test]
fn a_daemon_restarted_between_the_demotion_and_the_promotion_fails_the_group_over() {
    let mut h = level();
    h.demoted_first();
    // The daemon dies before `REPLICAOF NO ONE` reaches R1; it restarts
    // from what it persisted.
    let state = h
        .log
        .iter()
        .rev()
        .find_map(|o| match o {
            Output::Persist { state, .. } => Some(state.clone()),
            _ => None,
        })
        .expect("persisted");
    let mut full = State::default();
    full.groups.insert("mymaster".into(), state);
    let mut h = H::with(vec![spec("mymaster", M)], Some(&full));
    // M follows R1, R1 has lost its link to M (no master anywhere), R2
    // still points at M.
    let end = h.now + 10_000;
    while h.now < end && h.group().master == a(M) {
        h.now += 100;
        h.info(M, replica_info("m1", R1, false, 100, 100));
        h.info(R1, replica_info("r1", M, false, 100, 100));
        h.info(R2, replica_info("r2", M, false, 90, 100));
        h.feed(Input::Tick);
        for (to, c, t) in h.sends() {
            if c == Command::ReplicaOfNoOne && to != a(M) && !h.group().instances[&to].demoted {
                let name = if to.port == R1 { "r1" } else { "r2" };
                h.reply(t, to.port, Reply::Ok);
                h.info(to.port, master_info(name, 100, &[]));
            }
        }
    }
    // Failed over to a replica that holds every write, and no node was
    // told to replicate from itself.
    assert_eq!(h.group().master, a(R1), "{:?}", h.channels());
    assert!(
        h.sends()
            .iter()
            .all(|(to, c, _)| !matches!(c, Command::ReplicaOf(t) if t == to))
    );
}

#[test]
fn an_ordinary_failovers_abort_leaves_the_old_master_alone() {
    // A failover of a master that went down demoted nothing first: its
    // abort must not make the old master a master again or unpause it.
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D + 200,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert!(h.group().failover.is_some());
    assert!(!h.group().failover.as_ref().unwrap().demoted_first);
    h.master_silent_for(
        10_100,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert!(h.channels().contains(&"-failover-abort-slave-timeout"));
    let restored = h
        .sends()
        .into_iter()
        .any(|(to, c, _)| to == a(M) && matches!(c, Command::ReplicaOfNoOne | Command::Unpause));
    assert!(!restored, "{:?}", h.sends());
}
