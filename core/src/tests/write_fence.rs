//! The write fence: the governor's `CONFIG SET`s, the shorter witness
//! window it allows, and the fence handed on by a failover.

use super::*;
use crate::group::WITNESS_IO_SECS;
use crate::group::write_fence::FENCE_PING_SECS;
use crate::{FenceMode, FenceSetting, WriteFence};

fn fenced(mode: FenceMode) -> H {
    let mut s = spec("mymaster", M);
    s.fence = WriteFence { mode, lag_secs: 1 };
    H::with(vec![s], None)
}

fn setting(replicas: u64) -> FenceSetting {
    FenceSetting {
        replicas,
        lag_secs: 1,
        ping_secs: FENCE_PING_SECS,
    }
}

fn fence_sends(h: &H) -> Vec<(Addr, FenceSetting)> {
    h.sends()
        .into_iter()
        .filter_map(|(to, c, _)| match c {
            Command::SetWriteFence(f) => Some((to, f)),
            _ => None,
        })
        .collect()
}

/// Healthy group, the master's fence acknowledged.
fn fenced_and_healthy(mode: FenceMode) -> H {
    let mut h = fenced(mode);
    h.healthy();
    let t = h.token_of(M, &Command::SetWriteFence(setting(2)));
    h.reply(t, M, Reply::Ok);
    assert!(h.group().fence_in_force());
    h
}

#[test]
fn off_sets_nothing() {
    let mut h = H::new();
    h.healthy();
    h.now += 5 * D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert!(fence_sends(&h).is_empty());
    assert_eq!(h.group().witness_io_secs(), WITNESS_IO_SECS);
}

#[test]
fn auto_asks_a_majority_of_the_replicas_online_and_follows_them() {
    let mut h = fenced(FenceMode::Auto);
    h.healthy();
    assert_eq!(fence_sends(&h), vec![(a(M), setting(2))]);
    let t = h.token_of(M, &Command::SetWriteFence(setting(2)));
    h.reply(t, M, Reply::Ok);
    assert!(h.group().fence_in_force());
    // In force: the next report sends nothing.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(fence_sends(&h).len(), 1);
    // A replica restarts: the master no longer lists it; relaxed.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1]));
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(1))));
    // A lagging replica does not count.
    let mut info = master_info("m1", 100, &[R1, R2]);
    info.replicas[1].lag = Some(5);
    h.now += 2 * D;
    h.info(M, info);
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(1))));
    // Both back: tightened again.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(2))));
}

#[test]
fn strict_never_relaxes() {
    let mut h = fenced_and_healthy(FenceMode::Strict);
    h.now += D;
    h.info(M, master_info("m1", 100, &[]));
    assert_eq!(fence_sends(&h), vec![(a(M), setting(2))]);
}

#[test]
fn a_master_that_restarted_is_fenced_again() {
    let mut h = fenced_and_healthy(FenceMode::Auto);
    h.now += D;
    h.info(M, master_info("m2", 100, &[R1, R2]));
    assert!(
        !h.group().fence_in_force(),
        "CONFIG SET does not survive a restart"
    );
    assert_eq!(fence_sends(&h).len(), 2);
}

#[test]
fn a_refused_fence_is_not_in_force_and_is_logged() {
    let mut h = fenced(FenceMode::Auto);
    h.healthy();
    let t = h.token_of(M, &Command::SetWriteFence(setting(2)));
    let out = h.reply(t, M, Reply::Failed("NOPERM".into()));
    assert!(!h.group().fence_in_force());
    assert!(out.iter().any(
        |o| matches!(o, Output::Log { message, .. } if message.contains("refused the write fence"))
    ));
    assert_eq!(h.group().witness_io_secs(), WITNESS_IO_SECS);
    // Not asked again every second: once a minute.
    for _ in 0..30 {
        h.now += D;
        h.info(M, master_info("m1", 100, &[R1, R2]));
    }
    assert_eq!(fence_sends(&h).len(), 1);
    h.now += 31 * D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(fence_sends(&h).len(), 2);
}

#[test]
fn turning_it_off_lifts_the_fence_once() {
    let mut h = fenced_and_healthy(FenceMode::Auto);
    let mut s = spec("mymaster", M);
    s.fence.mode = FenceMode::Off;
    h.core.set("mymaster", &s, &[]).unwrap();
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    let sends = fence_sends(&h);
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert_eq!(sends[1].1.replicas, 0);
    assert_eq!(sends[1].1.ping_secs, 10);
}

#[test]
fn with_the_fence_in_force_an_isolated_master_fails_over_after_lag_plus_3_seconds() {
    let mut h = fenced_and_healthy(FenceMode::Auto);
    assert_eq!(h.group().witness_io_secs(), 4);
    h.down(M, LinkFailure::ConnectTimeout);
    let silent = |io| {
        let mut r = replica_info("r1", M, true, 100, 100);
        if let Role::Replica { last_io_secs, .. } = &mut r.role {
            *last_io_secs = Some(io);
        }
        r
    };
    let mut r2 = silent(4);
    r2.run_id = "r2".into();
    // Heard 4 s ago: still vouching.
    h.master_silent_for(3 * D, silent(4), r2.clone());
    assert!(!h.channels().contains(&"+odown"));
    // 5 s: the master is below its fence; fail over.
    let mut r2 = silent(5);
    r2.run_id = "r2".into();
    h.master_silent_for(500, silent(5), r2);
    assert!(h.channels().contains(&"+odown"));
    assert_eq!(h.group().epoch, 1);
    // The promoted replica is told its fence (auto: none yet) before
    // REPLICAOF NO ONE.
    let sends = h.sends();
    let fence = sends.iter().position(|(to, c, _)| {
        *to == a(R1) && matches!(c, Command::SetWriteFence(f) if f.replicas == 0)
    });
    let promote = sends
        .iter()
        .position(|(to, c, _)| *to == a(R1) && *c == Command::ReplicaOfNoOne);
    assert!(fence.is_some() && fence < promote, "{sends:?}");
    // The replica that will follow it gets the new master's setting (two
    // of its two replicas, the old master included) before anything is
    // advertised, so it is fenced should it be promoted next.
    assert!(
        sends
            .iter()
            .any(|(to, c, _)| *to == a(R2) && *c == Command::SetWriteFence(setting(2))),
        "{sends:?}"
    );
    assert!(!h.channels().contains(&"+switch-master"));
    // Confirmed: the record says how the old master was fenced.
    let t = h.token_of(R1, &Command::ReplicaOfNoOne);
    h.reply(t, R1, Reply::Ok);
    let t = h.token_of(R1, &Command::AskInfo);
    h.reply(t, R1, Reply::Report(master_info("r1", 100, &[])));
    let r = h.group().at_risk.back().cloned().expect("recorded");
    assert_eq!(
        r.fenced,
        crate::Fenced::WriteFence {
            replicas: 2,
            lag_secs: 1
        }
    );
    assert_eq!((r.old_offset, r.promoted_offset), (100, 100));
}

#[test]
fn without_the_fence_the_same_silence_is_vetoed() {
    let mut h = H::new();
    h.healthy();
    h.down(M, LinkFailure::ConnectTimeout);
    let mut r = replica_info("r1", M, true, 100, 100);
    if let Role::Replica { last_io_secs, .. } = &mut r.role {
        *last_io_secs = Some(5);
    }
    let mut r2 = r.clone();
    r2.run_id = "r2".into();
    h.master_silent_for(5 * D, r, r2);
    assert!(!h.channels().contains(&"+odown"));
}

#[test]
fn fewer_silent_replicas_than_the_fence_prove_nothing() {
    // Three replicas, the fence at two; only one is reachable from here
    // and it lost the master: the other two may still be with it.
    const R3: u16 = 6382;
    let mut h = fenced(FenceMode::Auto);
    h.info(M, master_info("m1", 100, &[R1, R2, R3]));
    h.info(R1, replica_info("r1", M, true, 100, 100));
    h.info(R2, replica_info("r2", M, true, 100, 100));
    h.info(R3, replica_info("r3", M, true, 100, 100));
    let t = h.token_of(M, &Command::SetWriteFence(setting(2)));
    h.reply(t, M, Reply::Ok);
    h.down(M, LinkFailure::ConnectTimeout);
    h.down(R2, LinkFailure::ConnectTimeout);
    h.down(R3, LinkFailure::ConnectTimeout);
    let end = h.now + 5 * D;
    while h.now < end {
        h.now += 100;
        h.ping(R1);
        h.info(R1, replica_info("r1", M, false, 100, 100));
    }
    assert!(!h.channels().contains(&"+odown"));
    assert_eq!(h.group().epoch, 0);
}

#[test]
fn an_old_master_that_still_answers_is_paused_before_the_promotion() {
    // The master answers but reports the replica role (of a node that is
    // itself a replica): it is failed over while it answers, so its
    // writes are paused first, then the replica promoted.
    let mut h = fenced_and_healthy(FenceMode::Auto);
    super::reconcile::master_follows_a_replica(&mut h, true);
    assert_eq!(h.group().epoch, 1, "a failover started");
    let sends = h.sends();
    let pause = sends
        .iter()
        .position(|(to, c, _)| *to == a(M) && matches!(c, Command::PauseWrites { .. }));
    let promote = sends
        .iter()
        .position(|(_, c, _)| *c == Command::ReplicaOfNoOne);
    assert!(pause.is_some() && pause < promote, "{sends:?}");
}

#[test]
fn a_replica_lost_asks_the_master_at_once_and_the_auto_fence_relaxes() {
    let asks = |h: &H| {
        h.sends()
            .into_iter()
            .filter(|(to, c, _)| *to == a(M) && *c == Command::AskInfo)
            .count()
    };
    let mut h = fenced_and_healthy(FenceMode::Auto);
    let before = asks(&h);
    // The replica's process stops (its pod retired after a switchover):
    // the master is asked now, not at its next periodic report.
    h.down(R2, LinkFailure::Reset);
    assert_eq!(asks(&h), before + 1);
    let t = h.token_of(M, &Command::AskInfo);
    h.reply(t, M, Reply::Report(master_info("m1", 100, &[R1])));
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(1))));
    // The link keeps failing while the replica is away: asked once.
    h.down(R2, LinkFailure::Refused);
    assert_eq!(asks(&h), before + 1);
    // Strict never relaxes: nothing to ask.
    let mut h = fenced_and_healthy(FenceMode::Strict);
    let before = asks(&h);
    h.down(R2, LinkFailure::Reset);
    assert_eq!(asks(&h), before);
}

#[test]
fn a_replica_lost_before_the_fence_is_acknowledged_asks_too() {
    let mut h = fenced(FenceMode::Auto);
    h.healthy();
    // The fence of two is sent, not yet answered, when a replica goes.
    assert_eq!(fence_sends(&h), vec![(a(M), setting(2))]);
    let asked = |h: &H| {
        h.sends()
            .into_iter()
            .filter(|(to, c, _)| *to == a(M) && *c == Command::AskInfo)
            .count()
    };
    let before = asked(&h);
    h.down(R1, LinkFailure::Reset);
    assert_eq!(asked(&h), before + 1);
}

#[test]
fn a_retiring_replica_relaxes_auto_at_once_and_strict_not_at_all() {
    use std::collections::BTreeSet;
    let mut h = fenced_and_healthy(FenceMode::Auto);
    // Marked retiring (its pod about to be deleted): relaxed before it
    // goes, without waiting for the master's next report.
    let out = h
        .core
        .retire(h.now, "mymaster", &BTreeSet::from([a(R1)]))
        .unwrap();
    h.log.extend(out);
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(1))));
    // Still listed by the master: it does not count.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(1))));
    // No longer retiring (its pod gone, and back): not counted at once,
    // nor from a report within the grace (asked, maybe, before its old
    // process went), then counted again.
    let sent = fence_sends(&h).len();
    let out = h.core.retire(h.now, "mymaster", &BTreeSet::new()).unwrap();
    h.log.extend(out);
    assert_eq!(fence_sends(&h).len(), sent);
    h.now += 1_000;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(1))));
    h.now += 1_000;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    assert_eq!(fence_sends(&h).last(), Some(&(a(M), setting(2))));

    let mut h = fenced_and_healthy(FenceMode::Strict);
    let sent = fence_sends(&h).len();
    let out = h
        .core
        .retire(h.now, "mymaster", &BTreeSet::from([a(R1)]))
        .unwrap();
    h.log.extend(out);
    assert_eq!(fence_sends(&h).len(), sent, "strict never relaxes");
}

#[test]
fn the_setting_sent_is_shown_with_its_acknowledgement() {
    let mut h = H::new();
    h.healthy();
    assert_eq!(h.group().fence_sent(), None, "off: nothing sent");
    let mut h = fenced(FenceMode::Auto);
    h.healthy();
    // On its way: not in force, and shown as such.
    assert_eq!(h.group().fence_sent(), Some((setting(2), false)));
    assert_eq!(h.group().fence_setting(), None);
    let t = h.token_of(M, &Command::SetWriteFence(setting(2)));
    h.reply(t, M, Reply::Ok);
    assert_eq!(h.group().fence_sent(), Some((setting(2), true)));
    // A relaxed setting sent: the tighter one stays in force until the
    // master answers, and the one sent is not acknowledged yet.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1]));
    assert_eq!(h.group().fence_sent(), Some((setting(1), false)));
    let t = h.token_of(M, &Command::SetWriteFence(setting(1)));
    h.reply(t, M, Reply::Failed("NOPERM".into()));
    assert_eq!(
        h.group().fence_sent(),
        None,
        "refused: none sent that holds"
    );
}

#[test]
fn only_the_answer_to_the_last_setting_sent_acknowledges_it() {
    let mut h = fenced(FenceMode::Auto);
    h.healthy();
    let t = h.token_of(M, &Command::SetWriteFence(setting(2)));
    h.reply(t, M, Reply::Ok);
    // 1, 2, then 1 again, all on their way.
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1]));
    let first_relax = h.token_of(M, &Command::SetWriteFence(setting(1)));
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1, R2]));
    h.now += D;
    h.info(M, master_info("m1", 100, &[R1]));
    let last_relax = h.token_of(M, &Command::SetWriteFence(setting(1)));
    assert_ne!(first_relax, last_relax);
    // The first 1 answered: the 2 sent after it may still land, so the
    // last 1 is not acknowledged by that answer.
    h.reply(first_relax, M, Reply::Ok);
    assert_eq!(h.group().fence_sent(), Some((setting(1), false)));
    h.reply(last_relax, M, Reply::Ok);
    assert_eq!(h.group().fence_sent(), Some((setting(1), true)));
}
