//! Pause and resume (`Core::pause`): detection goes on, nothing is
//! promoted, the operator's failover is refused, the verdict says why,
//! the state is persisted, and a master that died meanwhile fails over at
//! the first step after the resume.

use super::*;

fn promoted(h: &H) -> bool {
    h.sends()
        .iter()
        .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
}

#[test]
fn a_paused_group_reports_odown_but_promotes_nothing_until_resumed() {
    let mut h = H::new();
    h.healthy();
    let (changed, out) = h.core.pause("mymaster", true).unwrap();
    assert!(changed);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Persist { state, .. } if state.paused)),
        "persisted: {out:?}"
    );
    h.log.extend(out);
    h.down(M, LinkFailure::Refused);
    h.master_silent_for(
        D * 5,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    assert!(h.channels().contains(&"+sdown") && h.channels().contains(&"+odown"));
    assert!(!promoted(&h), "promoted while paused");
    // Said once, as every hold: held, paused.
    let said: Vec<&Output> = h
        .log
        .iter()
        .filter(|o| matches!(o, Output::Refused { reason, .. } if reason.label() == "paused"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    let r = h.core.readiness("mymaster", h.now).unwrap();
    assert_eq!(r.label(), "paused");
    assert_eq!(r.manual, Err(AdminError::Paused));
    assert_eq!(
        h.core.failover(h.now, "mymaster").unwrap_err(),
        AdminError::Paused
    );

    let (changed, out) = h.core.pause("mymaster", false).unwrap();
    assert!(changed);
    h.log.extend(out);
    // The first step after the resume.
    h.master_silent_for(
        100,
        replica_info("r1", M, false, 100, 100),
        replica_info("r2", M, false, 90, 100),
    );
    h.token_of(R1, &Command::ReplicaOfNoOne);
}

#[test]
fn pausing_twice_changes_nothing_and_an_unknown_group_is_refused() {
    let mut h = H::new();
    assert!(h.core.pause("mymaster", true).unwrap().0);
    let (changed, out) = h.core.pause("mymaster", true).unwrap();
    assert!(!changed && out.is_empty());
    assert_eq!(
        h.core.pause("nope", true).unwrap_err(),
        AdminError::NoSuchMaster
    );
}

#[test]
fn the_pause_survives_a_restart_from_the_state_file() {
    let mut h = H::new();
    let (_, out) = h.core.pause("mymaster", true).unwrap();
    let state = out
        .iter()
        .find_map(|o| match o {
            Output::Persist { state, .. } => Some(state.clone()),
            _ => None,
        })
        .unwrap();
    let g = Group::new(spec("mymaster", M), Some(&state), 0);
    assert!(g.paused());
}

#[test]
fn a_paused_group_votes_for_no_one() {
    let mut h = super::peering::peered();
    h.core.pause("mymaster", true).unwrap();
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 5, Some(super::peering::P1))
        .expect("in range");
    assert_eq!(ans.leader, None);
    assert_eq!(h.group().leader_epoch, 0);
    // Resumed, it votes again.
    h.core.pause("mymaster", false).unwrap();
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 6, Some(super::peering::P1))
        .expect("in range");
    assert_eq!(ans.leader.as_deref(), Some(super::peering::P1));
}

#[test]
fn the_empty_restart_guard_waits_for_the_resume_too() {
    // Found by the model checker: the guard starts its failover from the
    // master's report, not from the step.
    let mut h = H::new();
    h.healthy();
    h.core.pause("mymaster", true).unwrap();
    h.now += 50;
    let mut empty = master_info("m2", 0, &[]);
    empty.keys = Some(0);
    h.info(M, empty);
    assert!(h.group().failover.is_none(), "failed over while paused");
    assert!(!promoted(&h));
    let r = h.core.readiness("mymaster", h.now).unwrap();
    assert_eq!(r.label(), "paused");
    h.core.pause("mymaster", false).unwrap();
    h.now += 100;
    h.feed(Input::Tick);
    assert_eq!(
        h.group().failover.as_ref().map(|f| f.promoted.clone()),
        Some(a(R1))
    );
}
