//! The reconciler's Lease elector against a real kube-apiserver and etcd
//! (`tests/support/kube.rs`; needs `VALKYRIE_KUBE_BIN`, fails without it).
//!
//! Two electors, as two Valkyrie processes would be, each with its own
//! client and identity, running as the Valkyrie service account with only
//! get/create/update on Leases: one leads; a release (SIGTERM) hands over
//! at the next attempt; a silent stop (SIGKILL) after about the lease
//! duration, not before it; and sampling both leadership channels never
//! shows two leaders. The handover times are bounded only as far as the
//! election's timings guarantee them on a loaded machine (see the
//! derivations below); the figures are printed (`--nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use valkyrie::kube::elector::{Elector, LEASE_NAME, Leadership, Released, Settings, Timings};

use support::kube::{Identity, admin_client, config, namespace, service_account_client};

/// The longest the elector's client waits for one answer (its read
/// timeout): an answer later than that fails the attempt.
const ANSWER: Duration = Duration::from_secs(2);

/// Added to the bounds below for the scheduling of this test's tasks and
/// the electors' timers on a loaded machine; the answer times in those
/// bounds are worst cases already (real answers take milliseconds).
const SLACK: Duration = Duration::from_secs(2);

/// The elector's client: as the service account, no automatic retries,
/// [`ANSWER`] per answer (kubernetes-design.md §B.10).
async fn elector_client() -> kube::Client {
    let mut config = config(Identity::ServiceAccount).await;
    config.default_retry = false;
    config.read_timeout = Some(ANSWER);
    config.reset_reader_on_write = true;
    kube::Client::try_from(config).unwrap()
}

async fn spawn(ns: &str, name: &str) -> Elector {
    let identity = valkyrie::kube::elector::identity(name).unwrap();
    let api = Api::namespaced(elector_client().await, ns);
    Elector::spawn(api, Settings::new(LEASE_NAME, identity)).unwrap()
}

/// Grants the service account get/create/update on Leases in `ns` (what
/// the elector needs), and waits until RBAC applies it.
async fn grant_leases(ns: &str) {
    let pp = PostParams::default();
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "valkyrie-lease" },
        "rules": [{ "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "verbs": ["get", "create", "update"] }],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "valkyrie-lease" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "valkyrie-lease" },
        "subjects": [{ "kind": "ServiceAccount", "name": "valkyrie", "namespace": "valkyrie" }],
    }))
    .unwrap();
    let admin = admin_client().await;
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&pp, &role)
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin, ns)
        .create(&pp, &binding)
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(service_account_client().await, ns);
    timeout(Duration::from_secs(10), async {
        while leases.get_opt("probe").await.is_err() {
            sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the RoleBinding took effect within 10 s");
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API answer: {other}"),
    }
}

/// Samples two leadership channels on every change and every 5 ms; returns
/// (samples, instants at which both led).
fn sample_both(
    mut a: watch::Receiver<Leadership>,
    mut b: watch::Receiver<Leadership>,
) -> (watch::Sender<bool>, JoinHandle<(u64, u64)>) {
    let (stop_tx, mut stop) = watch::channel(false);
    let task = tokio::spawn(async move {
        let (mut samples, mut both) = (0, 0);
        let (mut a_open, mut b_open) = (true, true);
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        loop {
            samples += 1;
            if a.borrow_and_update().is_leading() && b.borrow_and_update().is_leading() {
                both += 1;
            }
            // A dropped elector's channel closes (showing Following).
            tokio::select! {
                _ = stop.changed() => return (samples, both),
                r = a.changed(), if a_open => a_open = r.is_ok(),
                r = b.changed(), if b_open => b_open = r.is_ok(),
                _ = tick.tick() => {}
            }
        }
    });
    (stop_tx, task)
}

async fn wait_leading(e: &Elector, within: Duration, what: &str) -> u64 {
    let mut rx = e.leadership();
    let l = timeout(within, rx.wait_for(Leadership::is_leading)).await;
    l.unwrap_or_else(|_| panic!("{what}: no leader within {within:?}"))
        .unwrap()
        .term()
        .unwrap()
}

fn holder_of(lease: &Lease) -> Option<String> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_electors_hand_over_on_release_and_on_kill_never_both_leading() {
    let t = Timings::default();
    let ns = namespace("lease").await;
    grant_leases(&ns).await;
    let leases: Api<Lease> = Api::namespaced(admin_client().await, &ns);

    let one = spawn(&ns, "one").await;
    let term = wait_leading(&one, Duration::from_secs(5), "first elector").await;
    let two = spawn(&ns, "two").await;
    let (stop, sampler) = sample_both(one.leadership(), two.leadership());
    let mut two_rx = two.leadership();
    let following_one = Leadership::Following {
        holder: Some(one.identity().to_string()),
    };
    timeout(
        Duration::from_secs(5),
        two_rx.wait_for(|l| *l == following_one),
    )
    .await
    .expect("the second follows the first")
    .unwrap();
    sleep(t.retry_period * 2).await;
    assert!(one.leadership().borrow().is_leading() && !two.leadership().borrow().is_leading());
    let lease = leases.get(LEASE_NAME).await.unwrap();
    assert_eq!(holder_of(&lease).as_deref(), Some(one.identity()));
    assert_eq!(term, 0);

    // SIGTERM path: release. The bound: two's next attempt starts within
    // a retry period, finds the Lease without a holder and takes it with
    // a GET and a PUT, each answered within ANSWER.
    let released = Instant::now();
    assert_eq!(one.release().await.unwrap(), Released::Released);
    let bound = t.retry_period + ANSWER * 2 + SLACK;
    let term = wait_leading(&two, bound, "after release").await;
    let on_release = released.elapsed();
    println!(
        "handover on release: {on_release:.3?} (retry period {:?})",
        t.retry_period
    );
    assert_eq!(term, 1);
    let _ = stop.send(true);
    let (samples, both) = sampler.await.unwrap();
    assert_eq!(both, 0, "both led at {both} of {samples} samples");

    // SIGKILL path: the leader's task dropped without a release.
    let three = spawn(&ns, "three").await;
    let (stop, sampler) = sample_both(two.leadership(), three.leadership());
    let mut three_rx = three.leadership();
    let following_two = Leadership::Following {
        holder: Some(two.identity().to_string()),
    };
    timeout(
        Duration::from_secs(5),
        three_rx.wait_for(|l| *l == following_two),
    )
    .await
    .expect("the third follows the second")
    .unwrap();
    // The bounds of a takeover after a kill, from the election's rules
    // (decide.rs), with answers taking up to ANSWER:
    // - the dead leader's last renew is stored at most one answer after
    //   the kill (a PUT already sent), and no earlier than one retry
    //   period and one attempt (a GET and a PUT) before it: it renewed
    //   every retry period;
    // - three sees that renew with the GET of its next attempt, sent
    //   within a retry period (a follower's attempt is one GET, no
    //   longer than a retry period) and answered within ANSWER; its
    //   clock for the expiry starts then, not on the leader's renewTime;
    // - three attempts again at that moment plus the lease duration
    //   (decide.rs schedules an attempt at the expiry itself) and takes
    //   over with a GET and a PUT.
    // So lease - retry - 2 ANSWER <= on_kill <= lease + retry + 4 ANSWER
    // (+ SLACK): 6 s and 24 s with the default timings. The usual
    // figure, the lease duration give or take a retry period plus the
    // API server's answer times, is printed, not asserted; the
    // exact schedule is tested under paused time in the elector's unit
    // tests (src/kube/elector/tests).
    let earliest = t.lease_duration - t.retry_period - ANSWER * 2;
    let latest = t.lease_duration + t.retry_period + ANSWER * 4 + SLACK;
    let killed = Instant::now();
    drop(two);
    let term = wait_leading(&three, latest, "after kill").await;
    let on_kill = killed.elapsed();
    println!(
        "handover on kill: {on_kill:.3?} (lease duration {:?} + retry period {:?}; \
         allowed {earliest:?} to {latest:?})",
        t.lease_duration, t.retry_period
    );
    assert!(on_kill >= earliest, "took over early: {on_kill:?}");
    assert_eq!(term, 2);
    let _ = stop.send(true);
    let (samples, both) = sampler.await.unwrap();
    println!("sampled both leadership channels {samples} times: both led {both} times");
    assert_eq!(both, 0, "both led at {both} of {samples} samples");
    let spec = leases.get(LEASE_NAME).await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(2));
    assert_eq!(spec.holder_identity.as_deref(), Some(three.identity()));
    assert_eq!(three.release().await.unwrap(), Released::Released);
}

#[tokio::test]
async fn a_stale_resource_version_is_refused() {
    let ns = namespace("stale").await;
    let api: Api<Lease> = Api::namespaced(admin_client().await, &ns);
    let pp = PostParams::default();
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("l".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            ..LeaseSpec::default()
        }),
    };
    let holder = |mut l: Lease, h: &str| {
        l.spec.as_mut().unwrap().holder_identity = Some(h.into());
        l
    };
    let first = api.create(&pp, &lease).await.unwrap();
    let second = api
        .replace("l", &pp, &holder(first.clone(), "b"))
        .await
        .unwrap();
    assert_ne!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
    // A challenger that read `first` loses: its PUT carries a stale version.
    let stale = api
        .replace("l", &pp, &holder(first, "c"))
        .await
        .unwrap_err();
    assert_eq!(code(stale), 409);
    assert_eq!(code(api.create(&pp, &lease).await.unwrap_err()), 409);
    let third = api.replace("l", &pp, &holder(second, "c")).await.unwrap();
    assert_eq!(holder_of(&third).as_deref(), Some("c"));
}

/// The service account has no rights until a Role grants them, and then
/// exactly those: RBAC is enforced on these clients.
#[tokio::test]
async fn the_service_account_needs_a_role_for_leases() {
    let ns = namespace("rbac").await;
    let api: Api<Lease> = Api::namespaced(service_account_client().await, &ns);
    let pp = PostParams::default();
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(LEASE_NAME.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec::default()),
    };
    assert_eq!(code(api.get(LEASE_NAME).await.unwrap_err()), 403);
    assert_eq!(code(api.create(&pp, &lease).await.unwrap_err()), 403);

    grant_leases(&ns).await;
    let created = api.create(&pp, &lease).await.unwrap();
    api.replace(LEASE_NAME, &pp, &created).await.unwrap();
    assert!(api.get_opt(LEASE_NAME).await.unwrap().is_some());
    let delete = api.delete(LEASE_NAME, &Default::default()).await;
    assert_eq!(
        code(delete.map(|_| ()).unwrap_err()),
        403,
        "delete was not granted"
    );
    let other: Api<Lease> = Api::namespaced(service_account_client().await, "default");
    assert_eq!(
        code(other.get_opt("x").await.unwrap_err()),
        403,
        "only in its namespace"
    );

    // The elector needs nothing more.
    let e = spawn(&ns, "rbac").await;
    wait_leading(&e, Duration::from_secs(5), "elector as the service account").await;
    assert_eq!(e.release().await.unwrap(), Released::Released);
}
