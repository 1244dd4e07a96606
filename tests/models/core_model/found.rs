//! What the switchover check found with an operator in a hurry (one who
//! does not wait for the daemon to hear from every node): two bugs in the
//! core, fixed, and replayed here step by step so they stay fixed.

use super::world::Sys;
use super::{Action, Env};
use stateright::Model;
use valkyrie::core::AdminError;

/// Takes `path` from the initial state, each action enabled on the way;
/// returns the last state.
fn replay(env: &Env, path: &[Action]) -> Sys {
    let mut s = env.init_states().pop().unwrap();
    for action in path {
        let mut enabled = Vec::new();
        env.actions(&s, &mut enabled);
        assert!(enabled.contains(action), "{action:?} not among {enabled:?}");
        s = env.next_state(&s, action.clone()).unwrap();
    }
    s
}

/// The switchover world with an operator who does not wait for the
/// daemon to hear from every node.
fn operator_in_a_hurry() -> Env {
    Env {
        cut_off_allowed: false,
        liveness: false,
        world_change: false,
        switchover: true,
        operator_waits: false,
        writes: 2,
    }
}

/// Found by the switchover check with an operator in a hurry: the master
/// acknowledged write 11 (replica 3 has it, replica 2 not yet), crashed and
/// restarted empty, and `SENTINEL FAILOVER` came before the daemon's next
/// INFO of it. The INFO after the pause is the empty master's (offset 0, a
/// new history): replica 2, chosen on the daemon's stale offsets, counts
/// as caught up at once and is promoted; write 11 is lost. The daemon did
/// not notice the master's new run id in that INFO, nor that the replica
/// is on another history; left alone, its empty-restart guard would have
/// promoted replica 3.
#[test]

fn a_switchover_from_a_master_that_restarted_empty_loses_no_write() {
    use Action::*;
    let path = [
        Write(1),
        Replicate(3),
        CrashMaster,
        RestartEmpty,
        Switchover,
        // The route (the `-master` Service) reaches the chosen replica.
        Routed,
        Deliver,
        Deliver,
        Deliver,
        Deliver,
    ];
    let s = replay(&operator_in_a_hurry(), &path);
    assert_eq!(s.violation, None);
}

/// Found by the switchover check with an operator in a hurry: the daemon
/// restarted halfway through a switchover; the master restarted empty and
/// replica 2 resynced from it. The restarted daemon heard from replica 2
/// only (resuming the interrupted promotion) when the operator asked again:
/// it chose among the replicas that had reported — an automatic failover
/// waits for every live one — paused the empty master, found replica 2
/// caught up with it, and advertised it while replica 3 still held the
/// data, and told replica 3 to replicate from it.
#[test]

fn a_switchover_right_after_a_daemon_restart_never_advertises_an_empty_replica() {
    use Action::*;
    let path = [
        Switchover,
        Routed,
        DaemonRestart,
        CrashMaster,
        RestartEmpty,
        Resync(2),
        // The old daemon's alignment INFO to the master.
        Lose,
        Deliver,
    ];
    // The second `SENTINEL FAILOVER` is refused while replica 3 has not
    // reported since the daemon restarted; once it has, the choice is made
    // on every replica.
    let env = operator_in_a_hurry();
    let s = replay(&env, &path);
    assert_eq!(s.violation, None);
    assert_eq!(
        s.core.clone().failover(s.now, "g"),
        Err(AdminError::NotEveryReplicaReported)
    );
    assert!(env.next_state(&s, Action::Switchover).is_none());
}
