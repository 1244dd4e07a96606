//! Deletion, API errors and their retry, leadership lost mid-reconcile.

use super::super::error_policy;
use super::*;

/// The delay `action` requeues after, read from its `Debug` form
/// (kube-runtime's `Action` has no getter).
fn requeue_after(action: &Action) -> Option<Duration> {
    let text = format!("{action:?}");
    let inner = text.split("Some(").nth(1)?.split(')').next()?;
    let unit_at = inner.find(|c: char| c.is_alphabetic() || c == 'µ')?;
    let (number, unit) = inner.split_at(unit_at);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(value * scale))
}

#[tokio::test(start_paused = true)]
async fn a_deleted_cr_leaves_monitoring_then_its_finalizer_goes() {
    let mut h = Harness::start("delete").await;
    let vc = finalized(cr(json!({})));
    h.monitor(&vc, AUTH_SECRET, secret("cache-auth", "password"))
        .await;

    let mut deleting = vc.clone();
    deleting.metadata.deletion_timestamp = Some(now());
    let task = h.reconcile(&deleting);
    let event = expect_event(&mut h.server, "Normal", "Deleting").await;
    assert_eq!(
        event["note"],
        "monitoring of shop.cache stopped; the children go with the ValkeyCluster"
    );
    // The finalizer goes last, once the group is no longer monitored; no
    // child is applied or deleted (their owner references do it).
    let call = h.server.expect(Method::PATCH, CR).await;
    assert!(
        !h.monitors(true).await,
        "the group left before the finalizer"
    );
    call.assert_query(&[]);
    call.assert_content_type(server::JSON_PATCH);
    assert_eq!(
        call.body,
        json!([
            { "op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER },
            { "op": "remove", "path": "/metadata/finalizers/0" },
        ])
    );
    let mut gone = deleting.clone();
    gone.metadata.finalizers = None;
    call.reply(200, &serde_json::to_value(&gone).unwrap());
    assert_eq!(h.outcome(task).await.unwrap(), Action::await_change());
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_conflict_on_apply_is_retried_after_a_second() {
    let mut h = Harness::start("conflict").await;
    let vc = finalized(cr(json!({})));
    let task = h.reconcile(&vc);
    h.server
        .expect(Method::GET, AUTH_SECRET)
        .await
        .reply(200, &secret("cache-auth", "password"));
    // The Secret exists: never rewritten, the StatefulSet comes next.
    let call = h.server.expect(Method::PATCH, STATEFUL_SET).await;
    call.assert_query(&[("fieldManager", "valkyrie"), ("force", "true")]);
    call.fail(409, "Conflict");
    expect_event(&mut h.server, "Warning", "ApplyFailed").await;
    let err = h.outcome(task).await.unwrap_err();
    assert_eq!(err.status(), Some(409), "{err}");
    assert_eq!(
        error_policy(Arc::new(vc), &err, h.ctx.clone()),
        Action::requeue(Duration::from_secs(1))
    );
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_refusal_by_rbac_is_retried_after_five_minutes() {
    let mut h = Harness::start("rbac").await;
    let five_minutes = Action::requeue(Duration::from_secs(300));

    // The finalizer cannot be added.
    let vc = cr(json!({}));
    let task = h.reconcile(&vc);
    h.server
        .expect(Method::PATCH, CR)
        .await
        .fail(403, "Forbidden");
    expect_event(&mut h.server, "Warning", "FinalizerFailed").await;
    let err = h.outcome(task).await.unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    assert_eq!(
        error_policy(Arc::new(vc), &err, h.ctx.clone()),
        five_minutes
    );

    // The Secret cannot be read.
    let vc = finalized(cr(json!({})));
    let task = h.reconcile(&vc);
    h.server
        .expect(Method::GET, AUTH_SECRET)
        .await
        .fail(403, "Forbidden");
    expect_event(&mut h.server, "Warning", "Forbidden").await;
    let err = h.outcome(task).await.unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    assert_eq!(
        error_policy(Arc::new(vc), &err, h.ctx.clone()),
        five_minutes
    );
    h.finish().await;
}

/// One reconcile of `vc` whose first request fails with a 500.
async fn fail_with_500(h: &mut Harness, vc: &ValkeyCluster) -> Error {
    let task = h.reconcile(vc);
    h.server
        .expect(Method::GET, AUTH_SECRET)
        .await
        .fail(500, "InternalError");
    expect_event(&mut h.server, "Warning", "ApplyFailed").await;
    h.outcome(task).await.unwrap_err()
}

#[tokio::test(start_paused = true)]
async fn other_errors_back_off_per_cr_until_a_reconcile_succeeds() {
    let mut h = Harness::start("backoff").await;
    let vc = Arc::new(finalized(cr(json!({}))));
    let err = fail_with_500(&mut h, &vc).await;
    let first = requeue_after(&error_policy(vc.clone(), &err, h.ctx.clone())).unwrap();
    let second = requeue_after(&error_policy(vc.clone(), &err, h.ctx.clone())).unwrap();
    // 1 s, then 2 s, each ±20 %.
    assert!((800..=1200).contains(&first.as_millis()), "{first:?}");
    assert!((1600..=2400).contains(&second.as_millis()), "{second:?}");

    // A reconcile that succeeds (the spec asks for TLS without TLS
    // replication: refused in the status) starts the backoff again.
    let tls = Arc::new(finalized(cr(json!({
        "tls": { "enabled": true, "secretName": "cache-tls", "replication": false },
    }))));
    let task = tokio::spawn(reconcile::reconcile(tls.clone(), h.ctx.clone()));
    h.server.expect(Method::GET, STATEFUL_SET).await.not_found();
    let call = h.server.expect(Method::PATCH, CR_STATUS).await;
    let written = call.body["status"].clone();
    call.reply(200, &with_status(&tls, &written));
    expect_event(&mut h.server, "Warning", "TLSReplicationRequired").await;
    assert!(h.outcome(task).await.is_ok());
    let again = requeue_after(&error_policy(vc.clone(), &err, h.ctx.clone())).unwrap();
    assert!((800..=1200).contains(&again.as_millis()), "{again:?}");
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_new_term_during_an_apply_stops_every_later_write() {
    let mut h = Harness::start("term").await;
    let vc = finalized(cr(json!({})));
    let task = h.reconcile(&vc);
    h.server
        .expect(Method::GET, AUTH_SECRET)
        .await
        .reply(200, &secret("cache-auth", "password"));
    let call = h.server.expect(Method::PATCH, STATEFUL_SET).await;
    // The Lease changed hands and came back: another term, not this one.
    h.leadership
        .send(Leadership::Leading { term: TERM + 1 })
        .unwrap();
    call.echo();
    // No other child, no status, no event.
    let err = h.outcome(task).await.unwrap_err();
    assert!(matches!(err, Error::NotLeader), "{err}");
    assert_eq!(
        error_policy(Arc::new(vc), &err, h.ctx.clone()),
        Action::await_change()
    );
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn leadership_lost_during_a_read_stops_the_writes_that_follow() {
    let mut h = Harness::start("lost").await;
    let vc = finalized(cr(json!({})));
    let task = h.reconcile(&vc);
    let call = h.server.expect(Method::GET, AUTH_SECRET).await;
    h.leadership
        .send(Leadership::Following { holder: None })
        .unwrap();
    // No Secret is created, though none exists.
    call.not_found();
    let err = h.outcome(task).await.unwrap_err();
    assert!(matches!(err, Error::NotLeader), "{err}");
    // A reconcile started now makes no request at all.
    let err = h.outcome(h.reconcile(&vc)).await.unwrap_err();
    assert!(matches!(err, Error::NotLeader), "{err}");
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn leadership_lost_during_the_status_write_publishes_no_event() {
    let mut h = Harness::start("status").await;
    let vc = finalized(cr(json!({
        "tls": { "enabled": true, "secretName": "cache-tls", "replication": false },
    })));
    let task = h.reconcile(&vc);
    h.server.expect(Method::GET, STATEFUL_SET).await.not_found();
    let call = h.server.expect(Method::PATCH, CR_STATUS).await;
    h.leadership
        .send(Leadership::Following { holder: None })
        .unwrap();
    let written = call.body["status"].clone();
    call.reply(200, &with_status(&vc, &written));
    // The status was written before: the reconcile is done, silently.
    assert_eq!(h.outcome(task).await.unwrap(), Action::await_change());
    h.finish().await;
}
