//! The `SENTINEL DEBUG` timers the core runs on: each one set to a value
//! other than its default changes the rule it names.

use super::peering::{P1, P2, answer, hello};
use super::*;

fn with_timers(h: &mut H, change: impl FnOnce(&mut Timers)) {
    let mut timers = *h.core.timers();
    change(&mut timers);
    h.core.set_timers(timers);
}

/// The shell's loop turns at `h.now`.
fn pulse(h: &mut H) -> Vec<Output> {
    let out = h.core.pulse(h.now);
    h.log.extend(out.iter().cloned());
    out
}

fn tilt_events(h: &H) -> Vec<&'static str> {
    h.channels()
        .into_iter()
        .filter(|c| c.ends_with("tilt"))
        .collect()
}

/// Time passes by `ms` in steps of 100 ms, the shell's loop turning at
/// each, with replicas answering; the master answers too unless `dead`.
fn run_for(h: &mut H, ms: Millis, dead: bool) {
    let end = h.now + ms;
    while h.now < end {
        h.now += 100;
        pulse(h);
        if !dead {
            h.ping(M);
        }
        h.ping(R1);
        h.ping(R2);
        h.info(R1, replica_info("r1", M, !dead, 100, 100));
        h.info(R2, replica_info("r2", M, !dead, 90, 100));
    }
}

#[test]
fn a_gap_longer_than_tilt_trigger_enters_tilt_for_tilt_period() {
    let mut h = H::new();
    h.healthy();
    with_timers(&mut h, |t| t.tilt_period = 5_000);
    assert!(pulse(&mut h).is_empty());
    // Gaps up to the trigger (2 s) are fine.
    h.now += 2_000;
    assert!(pulse(&mut h).is_empty());
    assert!(!h.core.tilted());
    // The daemon did not run for 2.5 s.
    h.now += 2_500;
    let stalled_at = h.now;
    let out = pulse(&mut h);
    assert!(h.core.tilted());
    assert_eq!(h.core.tilt_since(), Some(stalled_at));
    assert!(matches!(&out[..], [Output::Event(e)] if e.channel.as_str() == "+tilt"));
    let r = h.core.readiness("mymaster", h.now).unwrap();
    assert_eq!(
        r.holds,
        vec![Reason::Tilt {
            since: stalled_at,
            until: Some(stalled_at + 5_000)
        }]
    );
    assert!(r.holds[0].describe(h.now).contains("tilt-trigger"));
    // Five seconds later (not Sentinel's default thirty), it is over.
    run_for(&mut h, 4_900, false);
    assert!(h.core.tilted());
    run_for(&mut h, 100, false);
    assert!(!h.core.tilted());
    assert_eq!(tilt_events(&h), ["+tilt", "-tilt"]);
}

#[test]
fn a_wait_the_shell_chose_is_no_stall() {
    let mut h = H::new();
    pulse(&mut h);
    h.now += 1_500;
    pulse(&mut h);
    // A role hook waited 2 s (its bound) within the loop's turn.
    h.now += 2_000;
    h.core.waited(h.now);
    h.now += 100;
    assert!(pulse(&mut h).is_empty());
    assert!(!h.core.tilted());
}

#[test]
fn tilt_trigger_is_a_setting() {
    let mut h = H::new();
    with_timers(&mut h, |t| t.tilt_trigger = 10_000);
    pulse(&mut h);
    h.now += 9_000;
    assert!(pulse(&mut h).is_empty());
    assert!(!h.core.tilted());
    h.now += 10_001;
    pulse(&mut h);
    assert!(h.core.tilted());
}

#[test]
fn a_master_that_dies_during_a_stall_tilt_is_failed_over_after_it() {
    let mut h = H::new();
    h.healthy();
    with_timers(&mut h, |t| t.tilt_period = 3_000);
    pulse(&mut h);
    h.now += 3_000;
    pulse(&mut h);
    assert!(h.core.tilted());
    h.down(M, LinkFailure::Refused);
    run_for(&mut h, 2_900, true);
    assert!(h.core.tilted());
    assert!(
        !h.sends()
            .iter()
            .any(|(_, c, _)| *c == Command::ReplicaOfNoOne)
    );
    run_for(&mut h, 200, true);
    assert!(!h.core.tilted());
    let promoted =
        |(to, c, _): &(Addr, Command, u64)| *to == a(R1) && *c == Command::ReplicaOfNoOne;
    assert!(h.sends().iter().any(promoted));
}

#[test]
fn a_replica_that_never_acknowledges_is_given_up_after_slave_reconf_timeout() {
    for (reconf_timeout, given_up_by) in [(2_000, 2_300), (10_000, 10_300)] {
        let mut h = H::new();
        with_timers(&mut h, |t| t.replica_reconf_timeout = reconf_timeout);
        h.fail_over_dead_master();
        let told = h.token_of(R2, &Command::ReplicaOf(a(R1)));
        assert!(told > 0);
        let sent_at = h.now;
        // R2 answers PINGs but never the REPLICAOF.
        while h.now < sent_at + given_up_by {
            h.now += 100;
            h.ping(R1);
            h.ping(R2);
            h.feed(Input::Tick);
            let gone = h.channels().contains(&"-slave-reconf-sent-timeout");
            assert_eq!(
                gone,
                h.now > sent_at + reconf_timeout,
                "{reconf_timeout} at +{}",
                h.now - sent_at
            );
        }
    }
}

/// A group of quorum 3 with two verified peers: P1 says the master is
/// down, P2 never answers, so there is no ODOWN and the asking goes on.
fn asked_for(h: &mut H, ms: Millis) -> Vec<Millis> {
    let mut asked = Vec::new();
    let end = h.now + ms;
    while h.now < end {
        h.now += 50;
        let mut out = h.ping(R1);
        out.extend(h.ping(R2));
        out.extend(answer(h, P1, true, None, 0));
        for id in [P1, P2] {
            out.extend(h.feed(Input::PeerPing {
                runid: id.into(),
                valid: true,
            }));
        }
        let to_p1 = |o: &Output| matches!(o, Output::AskPeer { runid, .. } if runid == P1);
        if out.iter().any(to_p1) {
            asked.push(h.now);
        }
    }
    asked
}

#[test]
fn ask_period_paces_the_questions_and_ages_the_answers() {
    let mut s = spec("mymaster", M);
    s.quorum = 3;
    let mut h = H::with(vec![s], None);
    h.healthy();
    h.feed(hello(P1, 26380, 0, M, 0));
    h.feed(hello(P2, 26381, 0, M, 0));
    with_timers(&mut h, |t| t.ask_period = 400);
    h.down(M, LinkFailure::Refused);
    asked_for(&mut h, D + 200);
    // Once P1 says "down", it is asked every 400 ms, not every second.
    let asked = asked_for(&mut h, 2_000);
    let gaps: Vec<Millis> = asked.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        !gaps.is_empty() && gaps.iter().all(|g| *g == 400),
        "{gaps:?}"
    );
    assert!(h.group().peers[P1].master_down);
    // Its answer is forgotten after five ask periods (2 s, not 5 s).
    let answered = h.group().peers[P1].answered_at;
    while h.now < answered + 2_000 {
        h.now += 100;
        h.feed(Input::Tick);
    }
    assert!(h.group().peers[P1].master_down);
    h.now += 100;
    h.feed(Input::Tick);
    assert!(!h.group().peers[P1].master_down);
}

#[test]
fn election_timeout_is_a_setting() {
    let mut h = peering::peered();
    with_timers(&mut h, |t| t.election_timeout = 3_000);
    peering::master_dies(&mut h);
    answer(&mut h, P1, true, None, 0);
    // P1 voted for P2; P2 never answers.
    answer(&mut h, P1, true, Some(P2), 1);
    let started = h.now;
    while h.now < started + 3_500 {
        h.now += 500;
        answer(&mut h, P1, true, Some(P2), 1);
    }
    assert!(h.channels().contains(&"-failover-abort-not-elected"));
}

#[test]
fn publish_period_sets_the_stale_window() {
    let mut t = Timers::default();
    assert_eq!(t.stale_window(), crate::peering::STALE_WINDOW);
    assert_eq!(t.answer_ttl(), crate::peering::ANSWER_TTL);
    t.publish_period = 500;
    t.ask_period = 50;
    t.ping_period = 200;
    t.info_period = 30;
    assert_eq!((t.stale_window(), t.pubsub_idle()), (2_000, 1_500));
    assert_eq!((t.ask_period(false), t.ask_period(true)), (50, 50));
    // A tenth of down-after, at most ping-period, at least 10 ms.
    assert_eq!(t.link_ping_period(30_000), 200);
    assert_eq!(t.link_ping_period(1_000), 100);
    assert_eq!(t.link_ping_period(50), 10);
    assert_eq!(
        (t.link_info_period(false), t.link_info_period(true)),
        (30, 30)
    );
    let d = Timers::default();
    assert_eq!(d.link_ping_period(30_000), 1_000);
    assert_eq!(
        (d.link_info_period(false), d.link_info_period(true)),
        (1_000, 100)
    );
    assert_eq!((d.ask_period(false), d.ask_period(true)), (100, 1_000));
}
