//! A switchover of a group with a route (a `ValkeyCluster`'s `-master`
//! Service): the route is moved to the chosen replica first, writes going
//! on, and writes are paused only once it reaches it or its wait ended;
//! a switchover given up moves it back to the master.

use super::*;
use crate::group::FailoverPhase;

const WAIT: Millis = 2_000;

/// Lets `ms` pass in steps, every instance answering its PINGs (the
/// wait is longer than `down-after`).
fn pass(h: &mut H, ms: Millis) {
    let mut left = ms;
    while left > 0 {
        let step = left.min(100);
        h.now += step;
        left -= step;
        for port in [M, R1, R2] {
            h.ping(port);
        }
    }
    h.feed(Input::Tick);
}

fn routed_group() -> H {
    let mut s = spec("mymaster", M);
    s.route_wait = WAIT;
    let mut h = H::with(vec![s], None);
    h.healthy();
    h
}

fn routes(h: &H) -> Vec<Addr> {
    h.log
        .iter()
        .filter_map(|o| match o {
            Output::Route { to, .. } => Some(to.clone()),
            _ => None,
        })
        .collect()
}

fn phase(h: &H) -> Option<FailoverPhase> {
    h.group().failover.as_ref().map(|f| f.phase)
}

fn paused(h: &H) -> bool {
    h.sends()
        .iter()
        .any(|(_, c, _)| matches!(c, Command::PauseWrites { .. }))
}

fn routed(h: &mut H, port: u16) {
    h.feed(Input::Routed {
        group: "mymaster".into(),
        to: a(port),
    });
}

#[test]
fn the_route_moves_to_the_chosen_replica_before_anything_is_asked_of_the_master() {
    let mut h = routed_group();
    let before = h.sends().len();
    h.failover_asked();
    assert_eq!(routes(&h), vec![a(R1)]);
    assert_eq!(phase(&h), Some(FailoverPhase::Routing));
    assert_eq!(h.sends().len(), before, "nothing sent while routing");
    // Ticks short of the wait change nothing.
    pass(&mut h, WAIT - 1);
    assert_eq!(phase(&h), Some(FailoverPhase::Routing));
    // An answer for another instance (an older route) is not this one.
    routed(&mut h, R2);
    assert_eq!(phase(&h), Some(FailoverPhase::Routing));
    routed(&mut h, R1);
    assert_eq!(phase(&h), Some(FailoverPhase::Aligning));
    assert!(!paused(&h));
    h.aligned();
    assert!(paused(&h), "paused once the replica is level");
}

#[test]
fn a_route_never_confirmed_costs_its_wait_and_the_switchover_goes_on() {
    let mut h = routed_group();
    h.failover_asked();
    pass(&mut h, WAIT);
    assert_eq!(phase(&h), Some(FailoverPhase::Aligning));
    assert!(h.log.iter().any(|o| matches!(
        o,
        Output::Log { message, .. } if message.contains("the route did not reach")
    )));
    // Its alignment has its own budget, counted from now.
    h.aligned();
    assert!(paused(&h));
    // A late answer changes nothing.
    routed(&mut h, R1);
    assert_eq!(phase(&h), Some(FailoverPhase::Pausing));
}

#[test]
fn the_wait_is_at_most_a_quarter_of_the_pause() {
    let mut s = spec("mymaster", M);
    s.route_wait = 60_000;
    s.failover_timeout = 4_000;
    let mut h = H::with(vec![s], None);
    h.healthy();
    h.failover_asked();
    pass(&mut h, 999);
    assert_eq!(phase(&h), Some(FailoverPhase::Routing));
    pass(&mut h, 1);
    assert_eq!(phase(&h), Some(FailoverPhase::Aligning));
}

#[test]
fn a_switchover_given_up_while_routing_moves_the_route_back_to_the_master() {
    let mut h = routed_group();
    h.failover_asked();
    // The chosen replica dies while the route moves.
    h.down(R1, LinkFailure::Refused);
    h.now += D + 1;
    h.feed(Input::Tick);
    assert_eq!(phase(&h), None, "given up");
    assert!(!paused(&h), "nothing was paused");
    assert_eq!(routes(&h), vec![a(R1), a(M)]);
    assert_eq!(h.group().master, a(M));
}

#[test]
fn a_completed_switchover_moves_no_route_back() {
    let mut h = routed_group();
    h.failover_asked();
    routed(&mut h, R1);
    h.aligned();
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 100, &[R1, R2])));
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(replica_info("r1", M, true, 100, 100)));
    h.demoted_first();
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    assert_eq!(h.group().master, a(R1));
    assert_eq!(routes(&h), vec![a(R1)]);
}

#[test]
fn a_group_without_a_route_aligns_at_once() {
    let mut h = H::new();
    h.healthy();
    h.failover_asked();
    assert_eq!(phase(&h), Some(FailoverPhase::Aligning));
    assert!(routes(&h).is_empty());
}
