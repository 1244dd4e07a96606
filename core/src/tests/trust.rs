//! The peer protocol trusts no one (`docs/security.md`, "Peers"): a
//! forged hello, vote or configuration moves nothing.

use super::peering::{P1, P2, answer, hello, master_dies, peered};
use super::*;
use crate::peering::MAX_PEERS;

const ATTACKER: u16 = 7777;

fn via_port(payload: String) -> Input {
    Input::Hello {
        payload,
        via: HelloVia::SentinelPort,
    }
}

fn watched(out: &[Output], port: u16) -> bool {
    out.iter()
        .any(|o| matches!(o, Output::Watch { addr, .. } if *addr == a(port)))
}

#[test]
fn a_configuration_naming_a_node_without_history_is_never_dialled() {
    let mut h = peered();
    // A verified peer (or a forgery in its name) names a foreign server.
    let out = h.feed(hello(P1, 26380, 1, ATTACKER, 1));
    assert!(!watched(&out, ATTACKER));
    assert!(h.group().pending_config.is_none());
    assert!(!h.group().instances.contains_key(&a(ATTACKER)));
    for _ in 0..50 {
        h.now += 100;
        let out = h.feed(Input::Tick);
        assert!(!watched(&out, ATTACKER));
    }
    assert_eq!(h.group().master, a(M));
    assert_eq!(h.group().config_epoch, 0);
}

#[test]
fn a_hello_on_our_port_from_a_stranger_changes_nothing() {
    let mut h = H::new();
    h.healthy();
    let out = h.feed(via_port(format!(
        "10.9.9.9,26379,{P1},1,mymaster,127.0.0.1,{ATTACKER},1"
    )));
    assert!(out.is_empty(), "{out:?}");
    assert!(h.group().peers.is_empty());
    assert_eq!(h.core.current_epoch(), 0);
    // Nor a known peer's run id at another address.
    let mut h = peered();
    let out = h.feed(via_port(format!(
        "127.0.0.1,9999,{P1},7,mymaster,127.0.0.1,{M},0"
    )));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(h.group().peers[P1].addr, a(26380));
    assert_eq!(h.core.current_epoch(), 0);
}

#[test]
fn an_unverified_peer_moves_no_epoch_and_no_configuration() {
    let mut h = H::new();
    h.healthy();
    h.feed(hello(P1, 26380, 9, R1, 9));
    assert!(h.group().peers.contains_key(P1));
    assert_eq!(h.core.current_epoch(), 0);
    assert!(h.group().pending_config.is_none());
    assert!(!h.group().peer_mode());
    assert!(h.core.state().groups["mymaster"].known_peers.is_empty());
}

#[test]
fn a_config_epoch_above_the_senders_current_epoch_is_refused() {
    let mut h = peered();
    let big = 1u64 << 32;
    h.feed(hello(P1, 26380, 0, R1, big));
    assert_eq!(h.core.current_epoch(), 0);
    assert!(h.group().pending_config.is_none());
    assert_eq!(h.group().config_epoch, 0);
}

#[test]
fn an_adopted_configuration_raises_the_current_epoch() {
    let mut h = peered();
    h.feed(hello(P1, 26380, 4, R1, 4));
    h.now += 100;
    h.info(R1, master_info("r1", 100, &[]));
    assert_eq!(h.group().master, a(R1));
    assert_eq!(h.group().config_epoch, 4);
    assert!(h.core.current_epoch() >= h.group().config_epoch);
    // Our next failover's epoch is above it.
    assert!(h.core.current_epoch() >= 4);
}

#[test]
fn votes_go_only_to_verified_peers_and_never_in_single_mode() {
    // Single mode: nobody gets a vote, the epoch does not move, and our
    // own failover is not held back.
    let mut h = H::new();
    h.healthy();
    let (ans, out) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 5, Some(P1))
        .expect("in range");
    assert_eq!(ans.leader, None);
    assert!(out.is_empty());
    assert_eq!(h.core.current_epoch(), 0);
    assert_eq!(h.group().retry_at, 0);
    // Peer mode: an unknown run id, an unverified peer, a malformed id.
    let mut h = peered();
    h.feed(hello(&"3".repeat(40), 26390, 0, M, 0));
    for candidate in ["4".repeat(40), "3".repeat(40), "x".repeat(10_000)] {
        let (ans, _) = h
            .core
            .is_master_down_by_addr(h.now, &a(M), 5, Some(&candidate))
            .expect("in range");
        assert_eq!(ans.leader, None, "{}", &candidate[..10]);
    }
    assert_eq!(h.core.current_epoch(), 0);
    assert_eq!(h.group().leader_epoch, 0);
    // A verified peer gets it.
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 5, Some(P1))
        .expect("in range");
    assert_eq!(ans.leader.as_deref(), Some(P1));
}

#[test]
fn a_lone_daemons_failover_is_not_delayed_by_vote_requests() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::Refused);
    let end = h.now + D + 500;
    let mut epoch = 1;
    while h.now < end {
        h.now += 100;
        // A vote request every 100 ms, for anyone.
        if let Ok((_, out)) = h.core.is_master_down_by_addr(h.now, &a(M), epoch, Some(P1)) {
            h.log.extend(out);
        }
        epoch += 1;
        h.ping(R1);
        h.ping(R2);
        h.info(R1, replica_info("r1", M, false, 100, 100));
        h.info(R2, replica_info("r2", M, false, 90, 100));
    }
    assert!(
        h.sends()
            .iter()
            .any(|(to, c, _)| *to == a(R1) && *c == Command::ReplicaOfNoOne),
        "{:?}",
        h.channels()
    );
}

#[test]
fn the_peer_table_is_bounded_and_unverified_peers_go_first() {
    let mut h = peered();
    let id = |i: usize| format!("{i:040x}");
    let mut refused = Vec::new();
    for i in 100..100 + 2 * MAX_PEERS {
        let out = h.feed(hello(&id(i), 30_000 + i as u16, 0, M, 0));
        refused.extend(out.into_iter().filter_map(|o| match o {
            Output::PeerRefused { reason, .. } => Some(reason),
            _ => None,
        }));
    }
    assert_eq!(h.group().peers.len(), MAX_PEERS);
    assert_eq!(refused.len(), MAX_PEERS + 2);
    assert!(refused.iter().all(|r| *r == "evicted"));
    // The verified ones stayed.
    assert!(h.group().peers[P1].verified && h.group().peers[P2].verified);
    // None of them was saved.
    assert_eq!(h.core.state().groups["mymaster"].known_peers.len(), 2);
}

#[test]
fn hellos_with_unprintable_or_named_hosts_are_refused() {
    let mut h = H::new();
    for host in [
        "a b",
        "1.2.3.4\n+switch-master x",
        "\x1b[31m",
        "<b>",
        "valkey-0.svc",
        "",
    ] {
        h.feed(hello_from(host));
    }
    let long = "1".repeat(10_000);
    h.feed(hello_from(&long));
    assert!(h.group().peers.is_empty());
    let events = h.events_since_start();
    assert!(events.is_empty(), "{events:?}");
}

fn hello_from(host: &str) -> Input {
    Input::Hello {
        payload: format!("{host},26380,{P1},0,mymaster,127.0.0.1,{M},0"),
        via: HelloVia::Channel,
    }
}

#[test]
fn replicas_keep_their_history_across_a_restart() {
    let mut h = H::new();
    h.healthy();
    let state = h.core.state();
    assert_eq!(
        state.groups["mymaster"].replicas,
        vec![a(R1), a(R2)],
        "saved when the master listed them"
    );
    // Restarted with the master gone: a verified peer's configuration
    // naming R1 is still taken.
    let mut h = H::with(vec![spec("mymaster", M)], Some(&state));
    assert!(h.group().instances.contains_key(&a(R1)));
    h.feed(hello(P1, 26380, 0, M, 0));
    h.feed(Input::PeerPing {
        runid: P1.into(),
        valid: true,
    });
    h.feed(hello(P1, 26380, 3, R1, 3));
    assert!(h.group().pending_config.is_some());
}

#[test]
fn a_question_with_a_peers_name_is_no_quorum() {
    // Case 8: one real observer plus a forged "down" report.
    let mut h = peered();
    master_dies(&mut h);
    for _ in 0..5 {
        if let Ok((_, out)) = h.core.is_master_down_by_addr(h.now, &a(M), 0, None) {
            h.log.extend(out);
        }
    }
    h.now += 100;
    h.feed(Input::Tick);
    assert!(!h.channels().contains(&"+odown"));
    // A real answer does make it.
    answer(&mut h, P2, true, None, 0);
    assert!(h.channels().contains(&"+odown"));
}

#[test]
fn a_group_monitored_by_name_hears_hellos_with_names() {
    let mut g = spec("mymaster", M);
    g.master = Addr::new("cache-0.cache.svc", M);
    let mut h = H::with(vec![g], None);
    h.feed(Input::Hello {
        payload: format!("valkyrie-1.svc,26379,{P1},0,mymaster,cache-0.cache.svc,{M},0"),
        via: HelloVia::Channel,
    });
    assert!(h.group().peers.contains_key(P1));
    // Still printable only.
    h.feed(Input::Hello {
        payload: format!("a b,26379,{P2},0,mymaster,cache-0.cache.svc,{M},0"),
        via: HelloVia::Channel,
    });
    assert!(!h.group().peers.contains_key(P2));
}

#[test]
fn a_refuted_configuration_keeps_no_real_one_out() {
    let mut h = peered();
    // A forger writes, in P1's name, that R1 is master in epoch 5.
    h.feed(hello(P1, 26380, 5, R1, 5));
    assert_eq!(
        h.group().pending_config.as_ref().map(|c| c.config_epoch),
        Some(5)
    );
    // R1 says it is a replica, more than a second later: refuted.
    h.now += 1_500;
    h.info(R1, replica_info("r1", M, true, 100, 100));
    // P2 really failed over to R2 in epoch 3, and R2 says so.
    h.feed(hello(P2, 26381, 3, R2, 3));
    h.now += 100;
    h.info(R2, master_info("r2", 100, &[]));
    assert_eq!(h.group().master, a(R2));
    assert_eq!(h.group().config_epoch, 3);
    // The forger goes on: nothing moves.
    h.feed(hello(P1, 26380, 6, R1, 6));
    h.now += 1_500;
    h.info(R1, replica_info("r1", R2, true, 100, 100));
    h.feed(Input::Tick);
    assert_eq!(h.group().master, a(R2));
}
