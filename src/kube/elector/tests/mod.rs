//! The elector against the fake API server, under paused time: every
//! figure below is exact, in tokio's virtual seconds.

mod fake_api;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ::kube::api::{Api, PostParams};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, timeout};

use super::{
    Elector, Error, LEASE_NAME, LeadDeadline, Leadership, Released, Settings, Timings, WallClock,
};
use fake_api::{FakeApi, Fault, Faults};

const NS: &str = "default";
/// client-go's timings: the tests' figures are written for these (the
/// defaults are shorter, `Timings::default`).
const T: Timings = Timings {
    lease_duration: Duration::from_secs(15),
    renew_deadline: Duration::from_secs(10),
    retry_period: Duration::from_secs(2),
};

/// A wall clock that follows tokio's (paused) clock, `ahead` of it.
fn wall(ahead: Duration) -> WallClock {
    let base = Instant::now();
    let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    Arc::new(move || epoch + (Instant::now() - base) + ahead)
}

fn spawn_with(fake: &FakeApi, id: &str, ahead: Duration) -> (Elector, Faults) {
    let (client, faults) = fake.client();
    let mut settings = Settings::new(LEASE_NAME, id);
    settings.timings = T;
    settings.wall_clock = wall(ahead);
    let elector = Elector::spawn(Api::namespaced(client, NS), settings).unwrap();
    (elector, faults)
}

fn spawn(fake: &FakeApi, id: &str) -> (Elector, Faults) {
    spawn_with(fake, id, Duration::ZERO)
}

/// Every change of every elector's leadership, with its (virtual) time.
#[derive(Clone, Default)]
struct Timeline(Arc<Mutex<Vec<(Instant, String, Leadership)>>>);

impl Timeline {
    fn watch(&self, elector: &Elector) {
        let mut rx = elector.leadership();
        let who = elector.identity().to_string();
        let log = self.0.clone();
        tokio::spawn(async move {
            loop {
                let value = rx.borrow_and_update().clone();
                log.lock()
                    .unwrap()
                    .push((Instant::now(), who.clone(), value));
                if rx.changed().await.is_err() {
                    break;
                }
            }
        });
    }

    fn events(&self) -> Vec<(Instant, String, Leadership)> {
        self.0.lock().unwrap().clone()
    }

    /// When `who` started (`true`) or stopped leading.
    fn changes(&self, who: &str, leading: bool) -> Vec<Instant> {
        let mut was = false;
        let mut out = Vec::new();
        for (at, w, l) in self.events().into_iter().filter(|(_, w, _)| w == who) {
            let _ = w;
            if l.is_leading() != was {
                was = l.is_leading();
                if was == leading {
                    out.push(at);
                }
            }
        }
        out
    }

    /// Never two leaders at once: at every instant (after all of that
    /// instant's demotions), at most one elector leads, and terms only grow
    /// from one leader to the next.
    fn assert_one_leader(&self) {
        let mut events = self.events();
        events.sort_by_key(|(at, _, l)| (*at, l.is_leading()));
        let mut leading: Vec<(String, u64)> = Vec::new();
        let mut last_term: Option<(String, u64)> = None;
        for (at, who, l) in events {
            leading.retain(|(w, _)| *w != who);
            if let Leadership::Leading { term } = l {
                if let Some((prev, t)) = &last_term {
                    assert!(
                        term > *t || (*prev == who && term == *t),
                        "term {term} of {who} after term {t} of {prev}"
                    );
                }
                last_term = Some((who.clone(), term));
                leading.push((who, term));
            }
            assert!(leading.len() <= 1, "two leaders at {at:?}: {leading:?}");
        }
    }
}

async fn wait_leading(rx: &mut watch::Receiver<Leadership>, within: Duration) -> (Instant, u64) {
    let term = timeout(within, rx.wait_for(Leadership::is_leading))
        .await
        .expect("did not lead in time")
        .unwrap()
        .term()
        .unwrap();
    (Instant::now(), term)
}

/// Which elector leads, once one does (polled every 50 ms of virtual time).
async fn leader_among(electors: &[Elector]) -> usize {
    loop {
        if let Some(i) = electors
            .iter()
            .position(|e| e.leadership().borrow().is_leading())
        {
            return i;
        }
        sleep(Duration::from_millis(50)).await;
    }
}

fn last_write_by(fake: &FakeApi, who: &str) -> Instant {
    let writes = fake.writes();
    let w = writes
        .iter()
        .rev()
        .find(|w| w.holder.as_deref() == Some(who));
    w.expect("a write by the holder").at
}

#[tokio::test(start_paused = true)]
async fn acquires_a_free_lease_and_keeps_renewing_it() {
    let fake = FakeApi::new();
    let (a, _) = spawn(&fake, "a");
    let (at, term) = wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
    assert_eq!(term, 0);
    assert!(at.elapsed() < Duration::from_millis(1));
    let spec = fake.lease(NS, LEASE_NAME).unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));

    sleep(Duration::from_secs(60)).await;
    assert_eq!(*a.leadership().borrow(), Leadership::Leading { term: 0 });
    let writes = fake.writes();
    // The create, then a renew every retry period, all at term 0.
    assert!((30..=32).contains(&writes.len()), "{} writes", writes.len());
    assert!(
        writes
            .iter()
            .all(|w| w.holder.as_deref() == Some("a") && w.transitions == 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_follower_waits_for_expiry_then_takes_over() {
    let fake = FakeApi::new();
    let timeline = Timeline::default();
    let (a, _) = spawn(&fake, "a");
    timeline.watch(&a);
    wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
    let (b, _) = spawn(&fake, "b");
    timeline.watch(&b);

    // While a renews, b follows it, whatever the time.
    sleep(Duration::from_secs(120)).await;
    let following_a = Leadership::Following {
        holder: Some("a".into()),
    };
    assert_eq!(*b.leadership().borrow(), following_a);

    // a stops without a word (SIGKILL).
    let killed = Instant::now();
    drop(a);
    let (led, term) = wait_leading(&mut b.leadership(), Duration::from_secs(30)).await;
    let since_renew = led - last_write_by(&fake, "a");
    assert!(
        since_renew >= T.lease_duration,
        "took over {since_renew:?} after a's renew"
    );
    assert!(
        led - killed <= T.lease_duration + T.retry_period,
        "{:?}",
        led - killed
    );
    assert_eq!(term, 1);
    timeline.assert_one_leader();
}

/// A partition of the leader: it stops believing it leads within
/// renew_deadline of its last renew, strictly before the follower may take
/// over (lease_duration after it saw that renew). One fault per run.
#[tokio::test(start_paused = true)]
async fn a_cut_off_leader_demotes_itself_before_anyone_takes_over() {
    let faults = [
        Fault::BlackHole,
        Fault::Refuse,
        Fault::ServerError(503),
        Fault::Delay(Duration::from_secs(30)),
    ];
    for fault in faults {
        let fake = FakeApi::new();
        let timeline = Timeline::default();
        let (a, a_faults) = spawn(&fake, "a");
        timeline.watch(&a);
        wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
        // b starts 1 s off a's rhythm, as two pods would.
        sleep(Duration::from_secs(1)).await;
        let (b, _) = spawn(&fake, "b");
        timeline.watch(&b);
        sleep(Duration::from_secs(20)).await;

        let cut = Instant::now();
        a_faults.set(fault);
        let (led, _) = wait_leading(&mut b.leadership(), Duration::from_secs(30)).await;
        let renewed = last_write_by(&fake, "a");
        let demoted = *timeline.changes("a", false).last().expect("a demoted");
        assert!(demoted <= renewed + T.renew_deadline, "{fault:?}");
        assert!(
            demoted < led,
            "{fault:?}: a demoted at {demoted:?}, b led at {led:?}"
        );
        assert!(led - renewed >= T.lease_duration, "{fault:?}");
        assert!(led - cut <= T.lease_duration + T.retry_period, "{fault:?}");
        assert!(!a.leadership().borrow().is_leading(), "{fault:?}");
        timeline.assert_one_leader();
    }
}

/// Leadership counts from when a renew was sent, not from when its answer
/// came: a write the API server applied at once but answered 7 s later
/// gives the leader no extra time over a challenger, which started counting
/// when it saw the write.
#[tokio::test(start_paused = true)]
async fn a_late_answer_does_not_extend_leadership() {
    let fake = FakeApi::new();
    let timeline = Timeline::default();
    let (a, a_faults) = spawn(&fake, "a");
    timeline.watch(&a);
    wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
    sleep(Duration::from_millis(300)).await;
    let (b, _) = spawn(&fake, "b");
    timeline.watch(&b);
    sleep(Duration::from_secs(10)).await;
    a_faults.set(Fault::LateWriteAnswer(Duration::from_secs(7)));
    sleep(Duration::from_secs(30)).await;
    assert!(
        a.leadership().borrow().is_leading(),
        "slow renews still renew"
    );
    assert!(timeline.changes("b", true).is_empty());
    a_faults.set(Fault::BlackHole);
    let (led, _) = wait_leading(&mut b.leadership(), Duration::from_secs(30)).await;
    let demoted = *timeline.changes("a", false).last().expect("a demoted");
    assert!(demoted < led, "a demoted at {demoted:?}, b led at {led:?}");
    timeline.assert_one_leader();
}

#[tokio::test(start_paused = true)]
async fn a_short_outage_keeps_the_leader() {
    let fake = FakeApi::new();
    let timeline = Timeline::default();
    let (a, a_faults) = spawn(&fake, "a");
    let (b, _) = spawn(&fake, "b");
    timeline.watch(&a);
    timeline.watch(&b);
    sleep(Duration::from_secs(10)).await;
    let leader = if a.leadership().borrow().is_leading() {
        "a"
    } else {
        "b"
    };
    assert_eq!(leader, "a", "the first to create leads");
    a_faults.set(Fault::ServerError(500));
    // Up to renew_deadline - 2 × retry_period: a renew then succeeds in time
    // whatever the outage's phase against the leader's rhythm.
    sleep(T.renew_deadline - 2 * T.retry_period - Duration::from_millis(100)).await;
    a_faults.set(Fault::None);
    sleep(Duration::from_secs(60)).await;
    assert_eq!(timeline.changes("a", false), Vec::<Instant>::new());
    assert!(timeline.changes("b", true).is_empty());
}

#[tokio::test(start_paused = true)]
async fn release_hands_over_within_a_retry_period() {
    let fake = FakeApi::new();
    let timeline = Timeline::default();
    let (a, _) = spawn(&fake, "a");
    timeline.watch(&a);
    wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
    sleep(Duration::from_millis(700)).await;
    let (b, _) = spawn(&fake, "b");
    timeline.watch(&b);
    sleep(Duration::from_secs(30)).await;

    let mut a_rx = a.leadership();
    let released = Instant::now();
    assert_eq!(a.release().await.unwrap(), Released::Released);
    assert!(!a_rx.borrow_and_update().is_leading());
    let cleared = fake.writes().into_iter().find(|w| w.holder.is_none());
    assert_eq!(cleared.expect("a release write").transitions, 0);
    let (led, term) = wait_leading(&mut b.leadership(), Duration::from_secs(10)).await;
    assert!(led - released <= T.retry_period, "{:?}", led - released);
    assert_eq!(term, 1);
    timeline.assert_one_leader();
}

#[tokio::test(start_paused = true)]
async fn a_follower_releases_nothing() {
    let fake = FakeApi::new();
    let (a, _) = spawn(&fake, "a");
    wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
    let (b, _) = spawn(&fake, "b");
    sleep(Duration::from_secs(5)).await;
    assert_eq!(b.release().await.unwrap(), Released::NotHolder);
    let spec = fake.lease(NS, LEASE_NAME).unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
}

/// Three electors started at the same instant, then a long run of
/// releases and kills: the compare-and-swap refuses the losers (409s do
/// happen), one leader at a time, and the term grows with each new holder.
#[tokio::test(start_paused = true)]
async fn contending_electors_never_both_lead_and_terms_grow() {
    let fake = FakeApi::new();
    let timeline = Timeline::default();
    let mut electors: Vec<Elector> = ["e0", "e1", "e2"]
        .iter()
        .map(|id| spawn(&fake, id).0)
        .collect();
    for e in &electors {
        timeline.watch(e);
    }
    let mut terms = Vec::new();
    for round in 0..8 {
        let leader = timeout(T.lease_duration + T.retry_period, leader_among(&electors))
            .await
            .unwrap_or_else(|_| panic!("round {round}: no leader: {:?}", timeline.events()));
        terms.push(electors[leader].leadership().borrow().term().unwrap());
        sleep(Duration::from_secs(7)).await;
        let gone = electors.remove(leader);
        if round % 2 == 0 {
            assert_eq!(gone.release().await.unwrap(), Released::Released);
        } else {
            drop(gone);
        }
        let fresh = spawn(&fake, &format!("n{round}")).0;
        timeline.watch(&fresh);
        electors.push(fresh);
    }
    assert_eq!(terms, (0..8).collect::<Vec<u64>>());
    assert!(
        fake.conflicts() > 0,
        "no race was lost: the test proves nothing"
    );
    timeline.assert_one_leader();
}

/// Expiry is judged on our own clock: a follower whose wall clock runs an
/// hour ahead (so the holder's renewTime looks long past) still waits.
#[tokio::test(start_paused = true)]
async fn a_skewed_wall_clock_does_not_expire_a_live_lease() {
    let fake = FakeApi::new();
    let (a, _) = spawn_with(&fake, "a", Duration::ZERO);
    wait_leading(&mut a.leadership(), Duration::from_secs(1)).await;
    let (b, _) = spawn_with(&fake, "b", Duration::from_secs(3600));
    sleep(Duration::from_secs(120)).await;
    assert!(!b.leadership().borrow().is_leading());
    assert!(a.leadership().borrow().is_leading());
}

/// After its own partition heals, a lone leader finds its record untouched
/// and leads again, at the same term.
#[tokio::test(start_paused = true)]
async fn a_demoted_leader_resumes_when_nobody_took_over() {
    let fake = FakeApi::new();
    let (a, a_faults) = spawn(&fake, "a");
    let mut rx = a.leadership();
    wait_leading(&mut rx, Duration::from_secs(1)).await;
    a_faults.set(Fault::BlackHole);
    timeout(Duration::from_secs(11), rx.wait_for(|l| !l.is_leading()))
        .await
        .unwrap()
        .unwrap();
    a_faults.set(Fault::None);
    let (_, term) = wait_leading(&mut rx, Duration::from_secs(15)).await;
    assert_eq!(term, 0);
}

/// The term never goes back, even when the Lease is deleted and made
/// again (leaseTransitions would restart at 0).
#[tokio::test(start_paused = true)]
async fn a_recreated_lease_keeps_the_term_growing() {
    let fake = FakeApi::new();
    let (a, _) = spawn(&fake, "a");
    let mut rx = a.leadership();
    assert_eq!(wait_leading(&mut rx, Duration::from_secs(1)).await.1, 0);
    fake.delete(NS, LEASE_NAME);
    let term = timeout(T.retry_period * 2, rx.wait_for(|l| l.term() == Some(1)))
        .await
        .expect("a new term once the Lease is made again");
    drop(term);
    assert_eq!(
        fake.lease(NS, LEASE_NAME)
            .unwrap()
            .spec
            .unwrap()
            .lease_transitions,
        Some(1)
    );
}

#[tokio::test(start_paused = true)]
async fn the_fake_refuses_stale_versions() {
    let fake = FakeApi::new();
    let api: Api<Lease> = Api::namespaced(fake.client().0, NS);
    let pp = PostParams::default();
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("l".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec::default()),
    };
    let status = |e: ::kube::Error| match e {
        ::kube::Error::Api(s) => s.code,
        other => panic!("{other}"),
    };
    assert_eq!(
        status(api.replace("l", &pp, &lease).await.unwrap_err()),
        404
    );
    let first = api.create(&pp, &lease).await.unwrap();
    assert_eq!(status(api.create(&pp, &lease).await.unwrap_err()), 409);
    let second = api.replace("l", &pp, &first).await.unwrap();
    assert_ne!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
    assert_eq!(
        status(api.replace("l", &pp, &first).await.unwrap_err()),
        409
    );
    assert!(api.replace("l", &pp, &second).await.is_ok());
    assert_eq!(fake.conflicts(), 2);
    assert!(api.get_opt("absent").await.unwrap().is_none());
}

#[tokio::test]
async fn unsafe_timings_are_refused() {
    let fake = FakeApi::new();
    let bad = [(15, 15, 2), (15, 10, 10), (15, 10, 0), (0, 0, 0)];
    for (lease, renew, retry) in bad {
        let mut settings = Settings::new(LEASE_NAME, "a");
        settings.timings = Timings {
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        };
        let api = Api::namespaced(fake.client().0, NS);
        let e = Elector::spawn(api, settings).unwrap_err();
        assert!(matches!(e, Error::Settings(_)), "{e}");
    }
    let api = Api::namespaced(fake.client().0, NS);
    let e = Elector::spawn(api, Settings::new(LEASE_NAME, "")).unwrap_err();
    assert!(matches!(e, Error::Settings(_)));
    let d = Timings::default();
    assert_eq!(
        (d.lease_duration, d.renew_deadline, d.retry_period),
        (
            Duration::from_secs(12),
            Duration::from_secs(8),
            Duration::from_secs(2)
        )
    );
    assert!(d.lease_duration + d.retry_period <= Duration::from_secs(15));
}

/// A writer asks the deadline, not the channel: past it, a paused leader
/// no longer leads even before its demotion timer has run.
#[tokio::test(start_paused = true)]
async fn the_deadline_ends_leadership_even_before_the_channel_says_so() {
    let stalled = LeadDeadline::default();
    assert!(!stalled.leads_now());
    stalled.set(Some(Instant::now() + Duration::from_secs(1)));
    assert!(stalled.leads_now());
    // Nothing runs in between, as in a paused process: time alone ends it.
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(!stalled.leads_now());

    // A live leader's deadline follows its renewals; a dropped one has none.
    let fake = FakeApi::new();
    let (a, _) = spawn(&fake, "a");
    wait_leading(&mut a.leadership(), Duration::from_secs(5)).await;
    let deadline = a.deadline();
    assert!(deadline.leads_now());
    sleep(T.renew_deadline * 3).await;
    assert!(deadline.leads_now(), "renewals push it on");
    drop(a);
    assert!(!deadline.leads_now());
}
