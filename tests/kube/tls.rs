//! A `ValkeyCluster` with `spec.tls` against a real kube-apiserver: the
//! Kubernetes input reads the CR's TLS Secret and monitors and fails over
//! its pods over TLS only, and a rotated Secret is put in use for new
//! connections (the Secret watched: well before the 30 s resync) while a
//! broken one is refused.
//!
//! No kubelet runs, so the test plays it, as `failover.rs` does: one
//! real valkey-server per pod on a loopback address of its own
//! (127.0.79.N:6379), each TLS only (`port 0`, `tls-port 6379`,
//! `tls-replication yes`, clients' certificates required) with the
//! Secret's certificate, announcing the pod's stable DNS name, which
//! `/etc/hosts` maps to that address (the test runs as root, as CI does).
//! The certificate names `*.cache-headless.<ns>.svc.cluster.local`, so
//! Valkyrie's links check the name they dial. Certificates are made at
//! test time. The daemon and its input run in the test's process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use crate::helpers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use helpers::{eventually, install_crd, master_named, sentinel};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::kube::{admin_client, namespace};
use support::pods::{Hosts, PodServer, PodTls};
use support::tls::{Ca, Leaf};
use support::{TempDir, daemon_config, wait_until};
use valkyrie::daemon::Daemon;
use valkyrie::kube::crd::ValkeyCluster;
use valkyrie::kube::input::{Input, KubeSettings};
use valkyrie_protocol::Frame;

const S: Duration = Duration::from_secs(1);
/// A loopback network of its own, far from the other tests'.
const NET: &str = "127.0.79";
const PASSWORD: &str = "tls-test-password";

/// Writes a pod's certificate files, as its Secret volume would hold
/// them.
fn write_pod_tls(dir: &Path, ca: &Ca, leaf: &Leaf) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("ca.crt"), &ca.cert_pem).unwrap();
    std::fs::write(dir.join("tls.crt"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &leaf.key_pem).unwrap();
    dir.to_path_buf()
}

/// One pod's TLS-only valkey-server.
fn tls_pod(tmp: &Path, ip: &str, fqdn: &str, master: Option<&str>, tls: &Path) -> PodServer {
    let tls = PodTls {
        dir: tls,
        password: PASSWORD,
    };
    PodServer::start_tls(tmp, ip, fqdn, master, &tls)
}

fn pem_secret(name: &str, ca: &Ca, leaf: &Leaf) -> Secret {
    let data = BTreeMap::from([
        ("ca.crt".to_owned(), ByteString(ca.cert_pem.clone().into())),
        (
            "tls.crt".to_owned(),
            ByteString(leaf.cert_pem.clone().into()),
        ),
        (
            "tls.key".to_owned(),
            ByteString(leaf.key_pem.clone().into()),
        ),
    ]);
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "type": "kubernetes.io/tls",
        "data": data,
    }))
    .unwrap()
}

async fn replace_secret(client: &Client, ns: &str, secret: Secret) {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = secret.metadata.name.clone().unwrap();
    let params = PatchParams::apply("kube-tls-test").force();
    api.patch(&name, &params, &Patch::Apply(&secret))
        .await
        .unwrap();
}

/// The TLS reloads the daemon counted, by result, from its admin port.
fn reloads(admin: u16, result: &str) -> f64 {
    let (_, body) = support::http::http_get(admin, "/metrics").unwrap();
    support::tls::metric_sum(&body, "valkyrie_tls_reloads_total", &[("result", result)])
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_valkey_cluster_is_monitored_and_failed_over_over_tls_and_its_secret_rotates() {
    let client = admin_client().await;
    install_crd(&client).await;
    let ns = namespace("kube-tls").await;
    let fqdn = |i: usize| format!("cache-{i}.cache-headless.{ns}.svc.cluster.local");
    let ip = |i: usize| format!("{NET}.{}", i + 1);
    let _hosts = Hosts::add(&ns, &(0..3).map(|i| (ip(i), fqdn(i))).collect::<Vec<_>>());
    let tmp = TempDir::new("kube-tls");

    // The pods' certificate, from the CA the Secret carries.
    let wildcard = format!("*.cache-headless.{ns}.svc.cluster.local");
    let ca = Ca::new("ValkeyCluster CA");
    let leaf = ca.server_for(&[&wildcard]);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .create(&PostParams::default(), &pem_secret("cache-tls", &ca, &leaf))
        .await
        .unwrap();
    let auth: Secret = serde_json::from_value(json!({
        "metadata": { "name": "cache-auth" },
        "stringData": { "password": PASSWORD },
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &auth).await.unwrap();

    let pod_tls = |i: usize, dir: &str, ca: &Ca, leaf: &Leaf| {
        write_pod_tls(&tmp.0.join(format!("{dir}-{i}")), ca, leaf)
    };
    let first = pod_tls(0, "tls", &ca, &leaf);
    let mut pods = vec![tls_pod(&tmp.0, &ip(0), &fqdn(0), None, &first)];
    for i in 1..3 {
        let tls = pod_tls(i, "tls", &ca, &leaf);
        pods.push(tls_pod(&tmp.0, &ip(i), &fqdn(i), Some(&fqdn(0)), &tls));
    }
    wait_until(20 * S, || {
        pods[0]
            .ask(&["INFO", "replication"])
            .contains("connected_slaves:2")
    });

    // One Valkyrie with its Kubernetes input; no TLS of its own: the
    // group's links take the Secret's material.
    valkyrie::telemetry::init_logging("warning", false);
    let mut config = daemon_config(&tmp.0.join("valkyrie"), Vec::new());
    std::fs::create_dir_all(&config.dir).unwrap();
    config.admin_port = support::free_port();
    let d = Daemon::start(config).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    let admin = d.admin_addrs[0].port();
    let mut settings = KubeSettings::new(&ns, "valkyrie-0");
    settings.namespace = Some(ns.clone());
    settings.groups.quorum = 1;
    // The default resync (30 s) is longer than the waits below: a rotated
    // Secret must arrive through the watch of Secrets.
    settings.retry = Duration::from_millis(200);
    let input: Input = Input::start(d.handle.clone(), client.clone(), settings)
        .await
        .unwrap();

    let vc: ValkeyCluster = serde_json::from_value(json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": { "name": "cache" },
        "spec": {
            "image": "valkey/valkey:8.1",
            "replicas": 3,
            "tls": { "enabled": true, "secretName": "cache-tls" },
            "monitoring": {
                "downAfterMilliseconds": 1000,
                "failoverTimeoutMilliseconds": 6000,
            },
        },
    }))
    .unwrap();
    let crs: Api<ValkeyCluster> = Api::namespaced(client.clone(), &ns);
    crs.create(&PostParams::default(), &vc).await.unwrap();

    // Monitored over TLS: the pods speak nothing else.
    let group = format!("{ns}.cache");
    let started = Instant::now();
    eventually("the master and both replicas over TLS", 30 * S, || {
        let group = group.clone();
        async move {
            let m = master_named(sp, &group).await?;
            (m["flags"] == "master" && m["num-slaves"] == "2").then_some(())
        }
    })
    .await;
    println!("monitored over TLS in {:?}", started.elapsed());
    // A replica counts in the master's INFO before Valkyrie's own link to
    // it is up: wait for every link, bounded.
    wait_until(20 * S, || pods.iter().all(PodServer::has_valkyrie_link));

    // A SIGKILL failover, every command over TLS.
    let killed = Instant::now();
    pods[0].kill();
    let new_master = eventually("a replica promoted", 30 * S, || {
        let group = group.clone();
        async move {
            let reply = sentinel(sp, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &group]).await;
            let Frame::Array(a) = reply else { return None };
            let host = String::from_utf8_lossy(a.first()?.as_bytes()?).into_owned();
            (host != fqdn(0)).then_some(host)
        }
    })
    .await;
    println!("failover over TLS in {:?}", killed.elapsed());
    let promoted = (1..3).find(|&i| fqdn(i) == new_master).unwrap();
    let other = 3 - promoted;
    let (p, o) = (promoted, other);
    let promoted_pod = &pods[p];
    wait_until(20 * S, || {
        promoted_pod.ask(&["ROLE"]).starts_with("master")
            && pods[o]
                .ask(&["INFO", "replication"])
                .contains(&format!("master_host:{}", fqdn(p)))
    });

    // Rotation to a new CA: the Secret changes, the links already up
    // stay up, and a pod restarted with the new material is reached —
    // only the new CA and certificate can.
    let ok_before = blocking(move || reloads(admin, "ok")).await;
    let ca2 = Ca::new("ValkeyCluster CA, rotated");
    let leaf2 = ca2.server_for(&[&wildcard]);
    let rotated = Instant::now();
    replace_secret(&client, &ns, pem_secret("cache-tls", &ca2, &leaf2)).await;
    eventually("the rotated Secret in use", 20 * S, || async move {
        (blocking(move || reloads(admin, "ok")).await > ok_before).then_some(())
    })
    .await;
    println!(
        "rotated Secret in use {:?} after its update",
        rotated.elapsed()
    );
    assert!(pods[p].has_valkyrie_link(), "a link already up stays up");
    pods[o].kill();
    let tls2 = pod_tls(o, "tls2", &ca2, &leaf2);
    pods[o] = tls_pod(&tmp.0, &ip(o), &fqdn(o), None, &tls2);
    let restarted = &pods[o];
    wait_until(20 * S, || restarted.has_valkyrie_link());

    // A broken Secret is refused: the material in use stays, and the
    // refusal is counted; a pod restarted again is still reached.
    let errors_before = blocking(move || reloads(admin, "error")).await;
    let mut broken = pem_secret("cache-tls", &ca2, &leaf2);
    broken.data.as_mut().unwrap().insert(
        "tls.crt".into(),
        ByteString(b"-----BEGIN CERTIFICATE-----\nbroken\n".to_vec()),
    );
    replace_secret(&client, &ns, broken).await;
    eventually("the broken Secret refused", 20 * S, || async move {
        (blocking(move || reloads(admin, "error")).await > errors_before).then_some(())
    })
    .await;
    pods[o].kill();
    let tls3 = pod_tls(o, "tls3", &ca2, &leaf2);
    pods[o] = tls_pod(&tmp.0, &ip(o), &fqdn(o), None, &tls3);
    let again = &pods[o];
    wait_until(20 * S, || again.has_valkyrie_link());
    let m = master_named(sp, &group).await.unwrap();
    assert_eq!(m["ip"], fqdn(p), "{m:?}");

    drop(input);
    drop(d);
}
