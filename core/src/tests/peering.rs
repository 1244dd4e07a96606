//! Peering rules: hellos, votes, ODOWN by quorum, elections, adoption.

use super::*;
use crate::peering::{MAX_EPOCH_JUMP, parse_epoch};

pub(super) const P1: &str = "1111111111111111111111111111111111111111";
pub(super) const P2: &str = "2222222222222222222222222222222222222222";

pub(super) fn hello(id: &str, port: u16, current: u64, master: u16, config: u64) -> Input {
    Input::Hello {
        payload: format!("127.0.0.1,{port},{id},{current},mymaster,127.0.0.1,{master},{config}"),
        via: HelloVia::Channel,
    }
}

/// A healthy group that knows two peers (three sentinels, quorum 2).
pub(super) fn peered() -> H {
    let mut h = H::new();
    h.healthy();
    h.feed(hello(P1, 26380, 0, M, 0));
    h.feed(hello(P2, 26381, 0, M, 0));
    for id in [P1, P2] {
        h.feed(Input::PeerPing {
            runid: id.into(),
            valid: true,
        });
    }
    h
}

fn asks(out: &[Output]) -> Vec<(String, u64, Option<String>)> {
    out.iter()
        .filter_map(|o| match o {
            Output::AskPeer {
                runid,
                epoch,
                candidate,
                ..
            } => Some((runid.clone(), *epoch, candidate.clone())),
            _ => None,
        })
        .collect()
}

pub(super) fn answer(
    h: &mut H,
    id: &str,
    down: bool,
    leader: Option<&str>,
    epoch: u64,
) -> Vec<Output> {
    h.feed(Input::DownReply {
        group: "mymaster".into(),
        runid: id.into(),
        answer: DownAnswer {
            down,
            leader: leader.map(str::to_string),
            leader_epoch: epoch,
        },
    })
}

/// The master dies; replicas keep reporting. Returns every output.
pub(super) fn master_dies(h: &mut H) -> Vec<Output> {
    h.down(M, LinkFailure::Refused);
    let mut all = Vec::new();
    let end = h.now + D + 200;
    while h.now < end {
        h.now += 100;
        all.extend(h.ping(R1));
        all.extend(h.ping(R2));
        all.extend(h.info(R1, replica_info("r1", M, false, 100, 100)));
        all.extend(h.info(R2, replica_info("r2", M, false, 90, 100)));
        for id in [P1, P2] {
            all.extend(h.feed(Input::PeerPing {
                runid: id.into(),
                valid: true,
            }));
        }
    }
    all
}

#[test]
fn epochs_from_peers_must_be_plain_decimal_and_in_range() {
    assert_eq!(parse_epoch(b"0"), Ok(0));
    assert_eq!(parse_epoch(b"9223372036854775807"), Ok(i64::MAX as u64));
    for bad in [
        &b"-1"[..],
        b"+1",
        b" 1",
        b"1e3",
        b"",
        b"18446744073709551615",
        b"18446744073709551616",
        b"9223372036854775808",
    ] {
        assert!(
            parse_epoch(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn hellos_discover_move_and_replace_peers() {
    let mut h = H::new();
    h.feed(hello(P1, 26380, 0, M, 0));
    assert_eq!(
        h.events().last().cloned(),
        Some((
            "+sentinel",
            format!("sentinel {P1} 127.0.0.1 26380 @ mymaster 127.0.0.1 6379")
        ))
    );
    assert!(h.log.contains(&Output::Peers));
    // Unverified until it answers on its address: no peer mode, nothing
    // saved.
    assert!(!h.group().peer_mode());
    assert!(h.core.state().groups["mymaster"].known_peers.is_empty());
    h.feed(Input::PeerPing {
        runid: P1.into(),
        valid: true,
    });
    assert!(h.group().peer_mode());
    // Duplicates (a replica's channel carries each hello twice) change
    // nothing.
    let out = h.feed(hello(P1, 26380, 0, M, 0));
    assert!(
        !out.iter()
            .any(|o| matches!(o, Output::Event(_) | Output::Peers))
    );
    // Same id, new port: it moves.
    h.feed(hello(P1, 26390, 0, M, 0));
    assert_eq!(h.group().peers[P1].addr, a(26390));
    assert!(
        h.events()
            .iter()
            .any(|(c, p)| *c == "+sentinel-address-switch"
                && p == &format!(
                    "master mymaster 127.0.0.1 6379 ip 127.0.0.1 port 26390 for {P1}"
                ))
    );
    // A new id at that address replaces it once it answers there.
    h.feed(hello(P2, 26390, 0, M, 0));
    assert_eq!(h.group().peers.len(), 2);
    h.feed(Input::PeerPing {
        runid: P2.into(),
        valid: true,
    });
    assert!(
        h.events()
            .iter()
            .any(|(c, p)| *c == "+sentinel-invalid-addr"
                && p == &format!("sentinel {P1} 127.0.0.1 26390 @ mymaster 127.0.0.1 6379"))
    );
    assert_eq!(h.group().peers.keys().collect::<Vec<_>>(), vec![P2]);
    // Persisted.
    let persisted = h.core.state().groups["mymaster"].known_peers.clone();
    assert_eq!(persisted.len(), 1);
    assert_eq!(persisted[0].runid, P2);
}

#[test]
fn bad_hellos_change_nothing() {
    let mut h = H::new();
    for payload in [
        format!("127.0.0.1,26380,{P1},-1,mymaster,127.0.0.1,6379,0"),
        format!("127.0.0.1,26380,{P1},18446744073709551615,mymaster,127.0.0.1,6379,0"),
        format!("127.0.0.1,26380,{P1},1e3,mymaster,127.0.0.1,6379,0"),
        format!(
            "127.0.0.1,26380,{P1},{},mymaster,127.0.0.1,6379,0",
            MAX_EPOCH_JUMP + 1
        ),
        format!("127.0.0.1,26380,{P1},0,mymaster,127.0.0.1,6379"),
        format!("127.0.0.1,26380,{P1},0,mymaster,127.0.0.1,6379,0,9"),
        format!("127.0.0.1,0,{P1},0,mymaster,127.0.0.1,6379,0"),
        "127.0.0.1,26380,nothex,0,mymaster,127.0.0.1,6379,0".to_string(),
        // Our own id.
        format!(
            "127.0.0.1,26380,{},0,mymaster,127.0.0.1,6379,0",
            "0".repeat(40)
        ),
        // Unknown master: not even the epoch moves.
        format!("127.0.0.1,26380,{P1},7,other,127.0.0.1,6379,7"),
    ] {
        h.feed(Input::Hello {
            payload,
            via: HelloVia::Channel,
        });
    }
    assert!(h.group().peers.is_empty());
    assert_eq!(h.core.current_epoch(), 0);
    assert!(!h.group().peer_mode());
    let events = h.events_since_start();
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn a_higher_current_epoch_is_adopted_and_persisted_first() {
    let mut h = peered();
    let out = h.feed(hello(P1, 26380, 5, M, 0));
    assert_eq!(h.core.current_epoch(), 5);
    let persist = out
        .iter()
        .position(|o| matches!(o, Output::Persist { .. }))
        .expect("persisted");
    let event = out
        .iter()
        .position(|o| matches!(o, Output::Event(e) if e.channel == Channel::NewEpoch))
        .expect("+new-epoch");
    assert!(persist < event);
    assert_eq!(h.core.state().current_epoch, 5);
}

#[test]
fn votes_are_first_come_once_per_epoch_and_persisted_before_the_answer() {
    let mut h = peered();
    let (ans, out) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 5, Some(P1))
        .expect("in range");
    assert_eq!(ans.leader.as_deref(), Some(P1));
    assert_eq!((ans.leader_epoch, ans.down), (5, false));
    assert!(matches!(out.first(), Some(Output::Persist { state, .. }) if state.leader_epoch == 5));
    // Same epoch, another candidate: the earlier vote.
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 5, Some(P2))
        .expect("in range");
    assert_eq!((ans.leader.as_deref(), ans.leader_epoch), (Some(P1), 5));
    // Older epoch: the earlier vote too.
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 4, Some(P2))
        .expect("in range");
    assert_eq!((ans.leader.as_deref(), ans.leader_epoch), (Some(P1), 5));
    // `*` asks only for the down state.
    let (ans, out) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 9, None)
        .expect("in range");
    assert_eq!(ans, DownAnswer::unknown());
    assert!(out.is_empty());
    // Unknown address.
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(R1), 9, Some(P2))
        .expect("in range");
    assert_eq!(ans, DownAnswer::unknown());
    // Too far ahead: refused, nothing changes.
    assert!(
        h.core
            .is_master_down_by_addr(h.now, &a(M), MAX_EPOCH_JUMP + 6, Some(P2))
            .is_err()
    );
    assert_eq!(h.core.current_epoch(), 5);
    // The vote survives a restart.
    let state = h.core.state();
    let mut h2 = H::with(vec![spec("mymaster", M)], Some(&state));
    let (ans, _) = h2
        .core
        .is_master_down_by_addr(0, &a(M), 5, Some(P2))
        .expect("in range");
    assert_eq!((ans.leader.as_deref(), ans.leader_epoch), (Some(P1), 5));
}

#[test]
fn a_request_naming_ourselves_gets_our_own_vote_as_on_sentinel() {
    let mut h = peered();
    let me = "0".repeat(40);
    let (ans, out) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 50, Some(&me))
        .expect("in range");
    assert_eq!((ans.leader.as_deref(), ans.leader_epoch), (Some(&*me), 50));
    assert!(matches!(out.first(), Some(Output::Persist { .. })));
    // An unknown run id still gets nothing.
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 51, Some(&"9".repeat(40)))
        .expect("in range");
    assert_eq!((ans.leader.as_deref(), ans.leader_epoch), (Some(&*me), 50));
}

#[test]
fn no_vote_while_tilted() {
    let mut h = H::with(
        vec![spec("a", 7001), spec("b", 7002), spec("c", 7003)],
        None,
    );
    for (g, port) in [("a", 7001), ("b", 7002)] {
        h.feed(Input::LinkDown {
            group: g.into(),
            addr: a(port),
            failure: LinkFailure::ConnectTimeout,
        });
    }
    h.now += 5 * D;
    h.feed(Input::Tick);
    assert!(h.core.tilted());
    let (ans, _) = h
        .core
        .is_master_down_by_addr(h.now, &a(7003), 3, Some(P1))
        .expect("in range");
    assert_eq!(ans.leader, None);
    assert_eq!(h.core.groups()["c"].leader_epoch, 0);
}

#[test]
fn odown_needs_quorum_and_a_won_election_promotes() {
    let mut h = peered();
    let out = master_dies(&mut h);
    // Asked with `*` while not a candidate; no ODOWN alone (quorum 2).
    let asked = asks(&out);
    assert!(
        asked
            .iter()
            .any(|(id, e, c)| id == P1 && *e == 0 && c.is_none())
    );
    assert!(!h.channels().contains(&"+odown"));
    assert!(
        h.sends()
            .iter()
            .all(|(_, c, _)| *c != Command::ReplicaOfNoOne)
    );
    // A peer agrees: ODOWN 2/2, candidacy, vote requests with our id.
    let out = answer(&mut h, P1, true, None, 0);
    assert!(
        h.events()
            .iter()
            .any(|(c, p)| *c == "+odown" && p == "master mymaster 127.0.0.1 6379 #quorum 2/2")
    );
    let asked = asks(&out);
    assert_eq!(h.core.current_epoch(), 1);
    assert!(
        asked
            .iter()
            .any(|(id, e, c)| id == P1 && *e == 1 && c.as_deref() == Some(&*"0".repeat(40)))
    );
    assert!(h.channels().contains(&"+try-failover"));
    assert!(!h.channels().contains(&"+elected-leader"));
    // One vote (ours) of three voters: not yet.
    answer(&mut h, P1, true, Some(&"0".repeat(40)), 1);
    assert!(h.channels().contains(&"+elected-leader"));
    assert!(
        h.sends()
            .iter()
            .any(|(to, c, _)| *to == a(R1) && *c == Command::ReplicaOfNoOne)
    );
    assert_eq!(h.group().failover.as_ref().map(|f| f.epoch), Some(1));
}

#[test]
fn votes_for_another_epoch_do_not_count() {
    let mut h = peered();
    master_dies(&mut h);
    answer(&mut h, P1, true, None, 0);
    assert_eq!(h.core.current_epoch(), 1);
    // P1 reports a vote for us, but in epoch 2 (someone moved the epoch):
    // the attempt of epoch 1 cannot use it.
    answer(&mut h, P1, true, Some(&"0".repeat(40)), 2);
    assert!(!h.channels().contains(&"+elected-leader"));
}

#[test]
fn a_split_vote_is_abandoned_at_once_and_retried_in_a_new_epoch() {
    let mut h = peered();
    master_dies(&mut h);
    answer(&mut h, P1, true, None, 0);
    // P1 and P2 each voted for themselves in epoch 1: nobody can win.
    answer(&mut h, P1, true, Some(P1), 1);
    answer(&mut h, P2, true, Some(P2), 1);
    assert!(h.channels().contains(&"-failover-abort-not-elected"));
    assert!(h.group().election.is_none());
    // A new candidacy, in epoch 2, right after.
    h.now += 100;
    h.ping(R1);
    h.feed(Input::Tick);
    assert_eq!(h.core.current_epoch(), 2);
    assert!(h.group().election.is_some());
}

#[test]
fn an_unwon_election_times_out_and_backs_off() {
    let mut h = peered();
    master_dies(&mut h);
    answer(&mut h, P1, true, None, 0);
    // P1 voted for P2; P2 never answers.
    answer(&mut h, P1, true, Some(P2), 1);
    let started = h.now;
    while h.now < started + 10_500 {
        h.now += 500;
        answer(&mut h, P1, true, Some(P2), 1);
    }
    assert!(h.channels().contains(&"-failover-abort-not-elected"));
    let epoch = h.core.current_epoch();
    // No new attempt before two failover timeouts.
    while h.now < started + 19_000 {
        h.now += 500;
        answer(&mut h, P1, true, None, 0);
    }
    assert_eq!(h.core.current_epoch(), epoch);
}

#[test]
fn voting_for_another_holds_our_candidacy_back() {
    let mut h = peered();
    h.core
        .is_master_down_by_addr(h.now, &a(M), 1, Some(P1))
        .expect("in range");
    master_dies(&mut h);
    answer(&mut h, P2, true, None, 0);
    assert!(h.channels().contains(&"+odown"));
    assert!(!h.channels().contains(&"+try-failover"));
}

#[test]
fn alone_in_peer_mode_nothing_is_promoted() {
    // Cut off: peers never answer. Quorum 2 is never reached.
    let mut h = peered();
    for id in [P1, P2] {
        h.feed(Input::PeerLinkDown { runid: id.into() });
    }
    master_dies(&mut h);
    h.now += 10_000;
    h.feed(Input::Tick);
    assert!(!h.channels().contains(&"+try-failover"));
    assert!(
        h.sends()
            .iter()
            .all(|(_, c, _)| *c != Command::ReplicaOfNoOne)
    );
}

#[test]
fn a_higher_configuration_is_adopted_only_once_its_master_says_so() {
    let mut h = peered();
    // P1 says R1 is master in epoch 3, but R1 reports the replica role.
    h.feed(hello(P1, 26380, 3, R1, 3));
    h.now += 100;
    h.info(R1, replica_info("r1", M, true, 100, 100));
    assert_eq!(h.group().master, a(M));
    assert_eq!(h.group().config_epoch, 0);
    // Now R1 reports the master role: adopted, persisted, announced.
    h.now += 100;
    let out = h.info(R1, master_info("r1", 100, &[]));
    assert_eq!(h.group().master, a(R1));
    assert_eq!(h.group().config_epoch, 3);
    let persist = out
        .iter()
        .position(|o| matches!(o, Output::Persist { state, .. } if state.master == a(R1)))
        .expect("persisted");
    let switch = out
        .iter()
        .position(|o| matches!(o, Output::Event(e) if e.channel == Channel::SwitchMaster))
        .expect("+switch-master");
    assert!(persist < switch);
    assert!(h.events().iter().any(|(c, p)| *c == "+config-update-from"
        && p == &format!("sentinel {P1} 127.0.0.1 26380 @ mymaster 127.0.0.1 6379")));
    // The old master is fenced.
    assert!(h.group().instances[&a(M)].demoted);
}

#[test]
fn a_higher_configuration_has_its_master_asked_at_once_and_once() {
    let mut h = peered();
    let asked = |h: &H| {
        h.sends()
            .iter()
            .filter(|(to, c, _)| *to == a(R1) && *c == Command::AskInfo)
            .count()
    };
    let before = asked(&h);
    // Without the question, R1's role would be learnt at the next INFO
    // period, and the Sentinel port would name the old master until then.
    h.feed(hello(P1, 26380, 3, R1, 3));
    assert_eq!(asked(&h), before + 1);
    // The peer repeats its hello: not asked again.
    h.now += 100;
    h.feed(hello(P1, 26380, 3, R1, 3));
    assert_eq!(asked(&h), before + 1);
    // The answer adopts it.
    let token = h.token_of(R1, &Command::AskInfo);
    h.now += 1;
    h.reply(token, R1, Reply::Report(master_info("r1", 100, &[])));
    assert_eq!(h.group().master, a(R1));
}

#[test]
fn in_peer_mode_no_correction_in_the_first_seconds_after_start() {
    let mut h = peered();
    // A stray master, seen just now.
    h.now += 100;
    h.info(R2, master_info("r2", 90, &[]));
    assert!(h.sends().iter().all(|(to, _, _)| *to != a(R2)));
    // After the wait, it is converted.
    while h.now < 9_000 {
        h.now += 500;
        h.ping(M);
        h.info(M, master_info("m1", 100, &[R1]));
        h.info(R2, master_info("r2", 90, &[]));
    }
    assert!(
        h.sends()
            .iter()
            .any(|(to, c, _)| *to == a(R2) && *c == Command::ReplicaOf(a(M)))
    );
}

#[test]
fn a_manual_failover_needs_an_election_with_peers() {
    let mut h = peered();
    let out = h.core.failover(h.now, "mymaster").expect("started");
    h.log.extend(out.iter().cloned());
    // The master is up, and yet the votes are asked for.
    assert_eq!(asks(&out).len(), 2);
    assert!(h.channels().contains(&"+try-failover"));
    assert!(
        h.sends()
            .iter()
            .all(|(_, c, _)| !matches!(c, Command::PauseWrites { .. }))
    );
    assert!(h.group().election.is_some());
    // Won: the coordinated switchover, in the election's epoch.
    answer(&mut h, P1, false, Some(&"0".repeat(40)), 1);
    h.aligned();
    assert!(
        h.sends()
            .iter()
            .any(|(_, c, _)| matches!(c, Command::PauseWrites { .. }))
    );
    assert_eq!(h.group().failover.as_ref().map(|f| f.epoch), Some(1));
}

#[test]
fn reset_forgets_peers_but_stays_in_peer_mode() {
    let mut h = peered();
    let (n, out) = h.core.reset(&["mymaster".to_string()]);
    assert_eq!(n, 1);
    assert!(out.contains(&Output::Peers));
    assert!(h.group().peers.is_empty());
    assert!(h.group().peer_mode());
    assert!(h.core.state().groups["mymaster"].peered);
}

#[test]
fn an_election_nobody_can_win_is_not_started() {
    // Quorum 3 with one known peer: two sentinels can never make 3 votes.
    let mut h = H::quorum_three_with_one_peer();
    let out = h.core.failover(h.now, "mymaster").expect("accepted");
    h.log.extend(out);
    for _ in 0..50 {
        h.now += 100;
        h.feed(Input::Tick);
    }
    assert_eq!(h.core.current_epoch(), 0, "no epoch burnt");
    assert!(!h.channels().contains(&"+try-failover"));
}

#[test]
fn repeated_splits_fall_back_to_the_back_off() {
    let mut h = peered();
    master_dies(&mut h);
    answer(&mut h, P1, true, None, 0);
    for round in 0..6 {
        let epoch = h.core.current_epoch();
        answer(&mut h, P1, true, Some(P1), epoch);
        answer(&mut h, P2, true, Some(P2), epoch);
        for _ in 0..3 {
            h.now += 100;
            answer(&mut h, P1, true, None, 0);
        }
        let _ = round;
    }
    // Three quick retries, then Sentinel's pace: at most 4 epochs.
    assert!(h.core.current_epoch() <= 4, "{}", h.core.current_epoch());
}

#[test]
fn a_split_with_an_unreachable_voter_is_seen_at_once() {
    // Three sentinels, one of them gone: we and P1 each voted for
    // ourselves; P2 cannot vote, so nobody can reach 2.
    let mut h = peered();
    h.feed(Input::PeerLinkDown { runid: P2.into() });
    master_dies(&mut h);
    h.feed(Input::PeerLinkDown { runid: P2.into() });
    answer(&mut h, P1, true, None, 0);
    let epoch = h.core.current_epoch();
    answer(&mut h, P1, true, Some(P1), epoch);
    assert!(h.channels().contains(&"-failover-abort-not-elected"));
    assert!(h.group().election.is_none());
}

#[test]
fn a_question_is_never_taken_as_a_down_report() {
    // Anyone can name a connection after a peer (`sentinel-11111111-cmd`):
    // a question counts for nothing; only answers to our own questions do.
    let mut h = peered();
    master_dies(&mut h);
    assert!(!h.channels().contains(&"+odown"));
    let (ans, out) = h
        .core
        .is_master_down_by_addr(h.now, &a(M), 0, None)
        .expect("in range");
    h.log.extend(out);
    assert!(ans.down);
    assert!(!h.channels().contains(&"+odown"));
    assert!(h.group().peers.values().all(|p| !p.master_down));
}

#[test]
fn a_new_configuration_lifts_the_back_off() {
    let mut h = peered();
    // We voted for P1: held back for two failover timeouts...
    h.core
        .is_master_down_by_addr(h.now, &a(M), 1, Some(P1))
        .expect("in range");
    assert!(h.group().retry_at > h.now);
    // ... until P1's configuration is adopted.
    h.feed(hello(P1, 26380, 1, R1, 1));
    h.now += 100;
    h.info(R1, master_info("r1", 100, &[]));
    assert_eq!(h.group().master, a(R1));
    assert_eq!(h.group().retry_at, 0);
}

/// A peer already failed over in a newer epoch; we heard it, but its
/// master has not reported the master role to us yet.
fn heard_newer_config(h: &mut H) {
    // Its last report, from before the promotion.
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.now += 100;
    h.feed(hello(P1, 26380, 3, R1, 3));
    assert!(h.group().pending_config.is_some());
}

/// The master stays dead; P2 agrees; peers keep (or stop) repeating
/// their hellos; R1 answers PINGs (its INFO is not asked again). Runs
/// until `until`.
fn odown_while_pending(h: &mut H, until: Millis, p1_repeats: bool) {
    let mut next_hello = h.now;
    while h.now < until {
        h.now += 100;
        h.ping(R1);
        h.ping(R2);
        if p1_repeats && h.now >= next_hello {
            h.feed(hello(P1, 26380, 3, R1, 3));
            next_hello = h.now + 2_000;
        }
        answer(h, P2, true, None, 0);
    }
}

#[test]
fn a_newer_configuration_heard_holds_our_candidacy_back() {
    let mut h = peered();
    master_dies(&mut h);
    heard_newer_config(&mut h);
    let start = h.now;
    // Repeated by P1: no election of our own while the newer
    // configuration is fresh, though the old master is ODOWN.
    odown_while_pending(&mut h, start + 5_000, true);
    assert!(h.channels().contains(&"+odown"));
    assert!(!h.channels().contains(&"+try-failover"));
    assert_eq!(h.core.current_epoch(), 3);
    // Not forever: one failover timeout after it was first heard, an
    // address that never confirms no longer holds us back.
    odown_while_pending(&mut h, start + 12_000, true);
    assert!(h.channels().contains(&"+try-failover"));
    assert!(h.core.current_epoch() > 3);
}

#[test]
fn a_newer_configuration_no_longer_repeated_stops_holding() {
    let mut h = peered();
    master_dies(&mut h);
    heard_newer_config(&mut h);
    let start = h.now;
    // P1 falls silent: after the stale window, our candidacy goes on.
    odown_while_pending(&mut h, start + 5_000, false);
    assert!(!h.channels().contains(&"+try-failover"));
    odown_while_pending(&mut h, start + 9_000, false);
    assert!(h.channels().contains(&"+try-failover"));
}

#[test]
fn a_configuration_its_node_refutes_holds_nothing_back() {
    // One hello a second names the replica R1 as master, each with a
    // higher epoch: once R1 reports itself a replica after the first,
    // nothing is held back any more, however often it is repeated.
    let mut h = peered();
    master_dies(&mut h);
    heard_newer_config(&mut h);
    let start = h.now;
    let mut epoch = 3;
    while h.now < start + 5_000 {
        h.now += 100;
        h.ping(R2);
        if h.now.is_multiple_of(1_000) {
            epoch += 1;
            h.feed(hello(P1, 26380, epoch, R1, epoch));
            h.info(R1, replica_info("r1", M, false, 100, 100));
        }
        answer(&mut h, P2, true, None, 0);
    }
    assert!(h.channels().contains(&"+try-failover"));
}

#[test]
fn a_newer_configuration_naming_a_dead_node_stops_holding() {
    let mut h = peered();
    master_dies(&mut h);
    heard_newer_config(&mut h);
    // The node it names is down in our view: no hold.
    h.down(R1, LinkFailure::Refused);
    let start = h.now;
    let mut next_hello = h.now;
    while h.now < start + D + 1_000 {
        h.now += 100;
        h.ping(R2);
        if h.now >= next_hello {
            h.feed(hello(P1, 26380, 3, R1, 3));
            next_hello = h.now + 2_000;
        }
        answer(&mut h, P2, true, None, 0);
    }
    assert!(h.group().instances[&a(R1)].sdown);
    assert!(h.channels().contains(&"+try-failover"));
}
