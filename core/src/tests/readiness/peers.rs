//! The verdict in peer mode: the quorum, an election that cannot be won,
//! a running election, a peer's newer configuration.

use super::super::peering::{P1, answer, hello, master_dies, peered};
use super::*;
use crate::QuorumView;

#[test]
fn a_peer_quorum_out_of_reach_holds_the_failover() {
    let mut h = peered();
    let r = verdict(&h);
    assert!(r.ready, "{:?}", r.holds);
    let q = |usable| QuorumView {
        usable,
        quorum: 2,
        needed: 2,
        known: 3,
    };
    assert_eq!(r.quorum, Some(q(3)));
    // Both peers stop answering PINGs: SDOWN.
    while h.now < 2 * D {
        h.now += 100;
        h.ping(M);
        h.ping(R1);
        h.ping(R2);
    }
    let r = verdict(&h);
    assert_eq!(r.quorum, Some(q(1)));
    assert_eq!(
        r.holds,
        vec![
            Reason::QuorumUnreachable {
                usable: 1,
                quorum: 2
            },
            Reason::ElectionUnwinnable {
                usable: 1,
                needed: 2,
                known: 3
            },
        ]
    );
    assert_eq!(
        r.describe(h.now),
        "only 1 sentinel(s) reachable, ourselves included: the quorum of 2 cannot agree \
         that the master is down"
    );
    assert_eq!(
        r.holds[1].describe(h.now),
        "no election can be won: it needs 2 votes, and 1 of the 3 known sentinels are reachable"
    );
}

#[test]
fn an_election_nobody_can_win_is_named() {
    // Quorum 3 with one known peer (as in the peering tests).
    let h = H::quorum_three_with_one_peer();
    assert_eq!(
        holds(&h),
        vec![
            Reason::QuorumUnreachable {
                usable: 2,
                quorum: 3
            },
            Reason::ElectionUnwinnable {
                usable: 2,
                needed: 3,
                known: 2
            },
        ]
    );
}

#[test]
fn a_running_election_is_named() {
    let mut h = peered();
    master_dies(&mut h);
    answer(&mut h, P1, true, None, 0);
    assert!(h.group().election.is_some());
    let r = verdict(&h);
    assert_eq!(r.holds[0], Reason::ElectionRunning { epoch: 1 });
    assert_eq!(
        r.holds[1],
        Reason::Window {
            until: h.group().retry_at
        }
    );
    assert_eq!(r.describe(h.now), "an election is running (epoch 1)");
    assert_eq!(r.manual, Err(AdminError::InProgress));
}

#[test]
fn a_newer_configuration_heard_holds_the_candidacy() {
    let mut h = peered();
    master_dies(&mut h);
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.now += 100;
    h.feed(hello(P1, 26380, 3, R1, 3));
    let until = h.now + crate::peering::STALE_WINDOW;
    let r = verdict(&h);
    assert_eq!(
        r.holds,
        vec![Reason::PendingConfig {
            master: a(R1),
            config_epoch: 3,
            until
        }]
    );
    assert_eq!(
        r.describe(h.now),
        "a peer's newer configuration (epoch 3, master 127.0.0.1:6380) holds our candidacy \
         for up to 8.0 s"
    );
}
