//! A CR becomes its children and its status; a named Secret; TLS without TLS replication refused.

use k8s_openapi::api::apps::v1::StatefulSetStatus;
use k8s_openapi::api::core::v1::Secret;

use super::super::status;
use super::*;
use crate::kube::crd::master_name;
use crate::kube::render::{Names, Observed, render};

/// The status patch the reconciler sends for `status`.
fn status_patch(status: &crate::kube::crd::ValkeyClusterStatus) -> Value {
    json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "status": status,
    })
}

#[tokio::test(start_paused = true)]
async fn a_new_cr_gets_the_finalizer_then_every_child_by_apply_then_its_status() {
    let mut h = Harness::start("new").await;
    let vc = cr(json!({}));

    // First reconcile: the finalizer, and nothing else.
    let task = h.reconcile(&vc);
    let call = h.server.expect(Method::PATCH, CR).await;
    call.assert_query(&[]);
    call.assert_content_type(server::JSON_PATCH);
    assert_eq!(
        call.body,
        json!([
            { "op": "test", "path": "/metadata/finalizers", "value": null },
            { "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] },
        ])
    );
    let vc = finalized(vc);
    call.reply(200, &serde_json::to_value(&vc).unwrap());
    assert_eq!(h.outcome(task).await.unwrap(), Action::await_change());

    // Second reconcile, with the finalizer: no `<name>-auth` yet, so a
    // password is generated and the Secret created.
    let task = h.reconcile(&vc);
    h.server.expect(Method::GET, AUTH_SECRET).await.not_found();
    let call = h.server.expect(Method::POST, SECRETS).await;
    call.assert_query(&[("fieldManager", "valkyrie")]);
    let created: Secret = serde_json::from_value(call.body.clone()).unwrap();
    let password = created.data.as_ref().unwrap()["password"].0.clone();
    let password = String::from_utf8(password).unwrap();
    assert!(
        password.len() == 64 && password.bytes().all(|b| b.is_ascii_hexdigit()),
        "256 random bits in hex"
    );
    let desired = render(
        &vc,
        &Observed {
            cluster_domain: "cluster.local",
            generated_password: Some(&password),
        },
    )
    .unwrap();
    assert_eq!(
        call.body,
        serde_json::to_value(desired.secret.as_ref().unwrap()).unwrap()
    );
    call.echo();

    // Every other child by server-side apply, as render() gives it; the
    // StatefulSet's status as the server answers it goes to the CR's.
    let call = h
        .server
        .expect_apply(STATEFUL_SET, &desired.stateful_set)
        .await;
    let mut applied = call.body.clone();
    applied["status"] = json!({ "replicas": 3, "readyReplicas": 1 });
    call.reply(200, &applied);
    let names = Names::new("shop", "cache");
    for service in [
        Some(&desired.headless_service),
        Some(&desired.master_service),
        desired.replicas_service.as_ref(),
    ] {
        let service = service.expect("the replicas Service is on by default");
        let path = format!("{SERVICES}/{}", service.metadata.name.as_ref().unwrap());
        h.server.expect_apply(&path, service).await.echo();
    }
    assert_eq!(
        desired.replicas_service.as_ref().unwrap().metadata.name,
        Some(names.replicas_service())
    );
    h.server
        .expect_apply(CONFIG_MAP, &desired.config_map)
        .await
        .echo();
    let pdb = desired.pod_disruption_budget.as_ref().unwrap();
    h.server.expect_apply(PDB, pdb).await.echo();

    // The status, on its subresource, by apply too.
    let call = h.server.expect(Method::PATCH, CR_STATUS).await;
    call.assert_query(&[("fieldManager", "valkyrie"), ("force", "true")]);
    call.assert_content_type(server::APPLY);
    let sts_status = StatefulSetStatus {
        replicas: 3,
        ready_replicas: Some(1),
        ..StatefulSetStatus::default()
    };
    let want = status::status(&status::Observed {
        vc: &vc,
        names: &names,
        valid: Ok(()),
        group: None,
        stateful_set: Some(&sts_status),
        now: now(),
        roll: None,
    });
    assert_eq!(call.body, status_patch(&want));
    let written = call.body["status"].clone();
    assert_eq!(written["observedGeneration"], 1);
    assert_eq!(written["phase"], "Bootstrapping");
    assert_eq!(
        (&written["replicas"], &written["readyReplicas"]),
        (&json!(3), &json!(1))
    );
    let at = serde_json::to_value(now()).unwrap();
    for (type_, ok, reason) in [
        ("Valid", "True", "Valid"),
        ("Ready", "False", "Bootstrapping"),
    ] {
        let c = condition(&written, type_);
        assert_eq!(
            (
                &c["status"],
                &c["reason"],
                &c["observedGeneration"],
                &c["lastTransitionTime"]
            ),
            (&json!(ok), &json!(reason), &json!(1), &at),
            "{c}"
        );
    }
    call.reply(200, &with_status(&vc, &written));

    // A new generation applied: said once, in an event.
    let event = expect_event(&mut h.server, "Normal", "Reconciled").await;
    assert_eq!(event["note"], "generation 1 applied");
    assert_eq!(
        h.outcome(task).await.unwrap(),
        Action::requeue(Duration::from_secs(10)),
        "a CR on its way is looked at again soon"
    );
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_named_secret_is_read_by_the_group_source_and_never_created() {
    let mut h = Harness::start("named").await;
    let vc = finalized(cr(json!({
        "auth": { "passwordSecretRef": { "name": "cache-password", "key": "pw" } },
    })));

    // Every Valkyrie's group source reads the named Secret (never
    // `<name>-auth`) to log in to the group.
    let named = format!("{SECRETS}/cache-password");
    h.monitor(&vc, &named, secret("cache-password", "pw")).await;

    // The reconcile neither reads nor creates a Secret: it lists the pods
    // (none yet) and reads the StatefulSet (the roll's plan; none yet),
    // then applies it, with the password from the named Secret.
    let task = h.reconcile(&vc);
    h.server.expect(Method::GET, PODS).await.reply(
        200,
        &json!({ "apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [] }),
    );
    h.server.expect(Method::GET, STATEFUL_SET).await.not_found();
    let first = h.server.next().await;
    let view = h.handle.topology.borrow().groups[&master_name(&vc).unwrap()].clone();
    let names = Names::new("shop", "cache");
    let mut observed = vc.clone();
    let s = observed.status.get_or_insert_with(Default::default);
    s.current_master = Some(status::current_master(&names, &view));
    s.config_epoch = Some(0);
    let desired = render(
        &observed,
        &Observed {
            cluster_domain: "cluster.local",
            generated_password: None,
        },
    )
    .unwrap();
    assert!(desired.secret.is_none());
    assert_eq!(
        (&first.method, first.path.as_str()),
        (&Method::PATCH, STATEFUL_SET),
        "no Secret request: {first:?}"
    );
    assert_eq!(
        first.body,
        serde_json::to_value(&desired.stateful_set).unwrap()
    );
    let text = first.body.to_string();
    assert!(text.contains("cache-password") && !text.contains("cache-auth"));
    first.echo();
    for service in [
        &desired.headless_service,
        &desired.master_service,
        desired.replicas_service.as_ref().unwrap(),
    ] {
        let path = format!("{SERVICES}/{}", service.metadata.name.as_ref().unwrap());
        h.server.expect_apply(&path, service).await.echo();
    }
    // The ConfigMap names the master the group converged on.
    h.server
        .expect_apply(CONFIG_MAP, &desired.config_map)
        .await
        .echo();
    let pdb = desired.pod_disruption_budget.as_ref().unwrap();
    h.server.expect_apply(PDB, pdb).await.echo();

    let call = h.server.expect(Method::PATCH, CR_STATUS).await;
    let want = status::status(&status::Observed {
        vc: &vc,
        names: &names,
        valid: Ok(()),
        group: Some(&view),
        stateful_set: None,
        now: now(),
        roll: None,
    });
    assert_eq!(call.body, status_patch(&want));
    assert_eq!(
        call.body["status"]["currentMaster"],
        json!({ "pod": "cache-0", "address": "cache-0.cache-headless.shop.svc.cluster.local:6379" })
    );
    let written = call.body["status"].clone();
    call.reply(200, &with_status(&vc, &written));
    expect_event(&mut h.server, "Normal", "Reconciled").await;
    assert!(h.outcome(task).await.is_ok());
    h.finish().await;
}

#[tokio::test(start_paused = true)]
async fn tls_without_tls_replication_is_refused_in_the_status_and_nothing_is_applied() {
    let mut h = Harness::start("tls").await;
    let vc = finalized(cr(json!({
        "tls": { "enabled": true, "secretName": "cache-tls", "replication": false },
    })));
    let task = h.reconcile(&vc);
    // Only read: what the StatefulSet says goes to the status.
    h.server.expect(Method::GET, STATEFUL_SET).await.not_found();
    let call = h.server.expect(Method::PATCH, CR_STATUS).await;
    call.assert_query(&[("fieldManager", "valkyrie"), ("force", "true")]);
    call.assert_content_type(server::APPLY);
    let written = call.body["status"].clone();
    assert_eq!(written["observedGeneration"], 1);
    assert_eq!(written["phase"], "Failed");
    let valid = condition(&written, "Valid");
    assert_eq!(
        (
            &valid["status"],
            &valid["reason"],
            &valid["observedGeneration"]
        ),
        (&json!("False"), &json!("TLSReplicationRequired"), &json!(1)),
        "{valid}"
    );
    assert_eq!(condition(&written, "Ready")["status"], "False");
    call.reply(200, &with_status(&vc, &written));
    let event = expect_event(&mut h.server, "Warning", "TLSReplicationRequired").await;
    assert_eq!(event["note"], valid["message"]);
    // Nothing to retry until the spec changes.
    assert_eq!(h.outcome(task).await.unwrap(), Action::await_change());
    assert!(!h.monitors(true).await, "the group is not monitored");
    h.finish().await;
}
