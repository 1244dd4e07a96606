//! `Output::ClientReconfig`: when the group's client-reconfig script is
//! called, with which role and which addresses (Sentinel's
//! `sentinelCallClientReconfScript`): the leader right after
//! `+failover-state-reconf-slaves`, an observer after the `+switch-master`
//! of a configuration it adopted.

use super::peering::{P1, hello, peered};
use super::*;

/// The client-reconfig outputs logged so far.
fn reconfigs(h: &H) -> Vec<(ReconfRole, Addr, Addr)> {
    h.log
        .iter()
        .filter_map(|o| match o {
            Output::ClientReconfig {
                group,
                role,
                from,
                to,
            } if group == "mymaster" => Some((*role, from.clone(), to.clone())),
            _ => None,
        })
        .collect()
}

/// Where `ClientReconfig` sits among the events: the index of the event
/// just before it.
fn after_event(h: &H) -> Option<Channel> {
    let at = h
        .log
        .iter()
        .position(|o| matches!(o, Output::ClientReconfig { .. }))?;
    h.log[..at].iter().rev().find_map(|o| match o {
        Output::Event(e) => Some(e.channel),
        _ => None,
    })
}

#[test]
fn the_leader_calls_it_once_after_reconf_slaves_from_the_old_master_to_the_new() {
    let mut h = H::new();
    h.fail_over_dead_master();
    assert_eq!(reconfigs(&h), vec![(ReconfRole::Leader, a(M), a(R1))]);
    assert_eq!(after_event(&h), Some(Channel::FailoverStateReconfSlaves));
    assert_eq!(ReconfRole::Leader.as_str(), "leader");
}

#[test]
fn an_observer_calls_it_after_switch_master_when_it_adopts_a_peers_configuration() {
    let mut h = peered();
    h.feed(hello(P1, 26380, 3, R1, 3));
    h.now += 100;
    h.info(R1, master_info("r1", 100, &[]));
    assert_eq!(h.group().master, a(R1));
    assert_eq!(reconfigs(&h), vec![(ReconfRole::Observer, a(M), a(R1))]);
    assert_eq!(after_event(&h), Some(Channel::SwitchMaster));
    assert_eq!(ReconfRole::Observer.as_str(), "observer");
}

#[test]
fn nothing_is_called_while_nothing_moves() {
    let mut h = H::new();
    h.healthy();
    h.now += 10_000;
    h.healthy();
    assert_eq!(reconfigs(&h), vec![]);
}
