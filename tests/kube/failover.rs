//! A real SIGKILL failover of a Kubernetes-managed group moves the role
//! label, fenced by the configuration epoch, before `+switch-master`.
//!
//! No kubelet runs next to the test API server, so the test plays it: it
//! creates the three Pod objects of a `ValkeyCluster` named `cache` and
//! runs one real valkey-server per pod on its own loopback address
//! (127.0.1.N:6379), each announcing its stable DNS name
//! (`cache-N.cache-headless.<ns>.svc.cluster.local`), which `/etc/hosts`
//! maps to that address for the test's duration (the test runs as root,
//! as CI does). Three Valkyries peer over those pods, the group given to
//! them through the managed-group seam the Kubernetes input uses, with the
//! role labels as their failover hook.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::kube::api::{Api, PostParams};
use ::kube::{Client, ResourceExt};
use k8s_openapi::api::core::v1::Pod;
use support::kube::{admin_client, namespace};
use support::observe::Events;
use support::pods::{Hosts, topology};
use support::{TempDir, daemon_config, free_port};
use valkyrie::config::{GroupConfig, GroupOwner};
use valkyrie::daemon::Daemon;
use valkyrie::kube::labels::{ANNOTATION_CONFIG_EPOCH, RoleLabels};

const S: Duration = Duration::from_secs(1);
/// A loopback network of its own, far from the 127.0.0.1 the other tests use.
const NET: &str = "127.0.77";

async fn create_pods(client: &Client, ns: &str) -> Api<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    for i in 0..3 {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": format!("cache-{i}"),
                "labels": {
                    "app.kubernetes.io/instance": "cache",
                    "app.kubernetes.io/managed-by": "valkyrie",
                },
            },
            "spec": { "containers": [{ "name": "valkey", "image": "valkey/valkey:8.1" }] },
        }))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
    }
    api
}

/// Each pod's role label and epoch annotation.
async fn roles(api: &Api<Pod>) -> BTreeMap<String, (String, u64)> {
    let mut out = BTreeMap::new();
    for p in api.list(&Default::default()).await.unwrap() {
        let role = p
            .labels()
            .get("valkyrie.io/role")
            .cloned()
            .unwrap_or_default();
        let epoch = p
            .annotations()
            .get(ANNOTATION_CONFIG_EPOCH)
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        out.insert(p.name_any(), (role, epoch));
    }
    out
}

fn master_of(roles: &BTreeMap<String, (String, u64)>) -> Option<String> {
    let masters: Vec<&String> = roles
        .iter()
        .filter(|(_, (r, _))| r == "master")
        .map(|(p, _)| p)
        .collect();
    match masters[..] {
        [one] => Some(one.clone()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_failover_moves_the_role_label_before_switch_master() {
    let client = admin_client().await;
    let ns = namespace("failover").await;
    let pods = create_pods(&client, &ns).await;
    let fqdn = |i: usize| format!("cache-{i}.cache-headless.{ns}.svc.cluster.local");
    let ip = |i: usize| format!("{NET}.{}", i + 1);
    let _hosts = Hosts::add(&ns, &(0..3).map(|i| (ip(i), fqdn(i))).collect::<Vec<_>>());

    let tmp = TempDir::new("kube-failover");
    let mut servers = topology(&tmp.0, NET, &fqdn);

    // Three Valkyries; the group reaches them as the Kubernetes input
    // hands it over, the role labels as their failover hook.
    let labels = RoleLabels::new(client.clone());
    labels.converge(&ns, "cache", "cache-0", 0).await.unwrap();
    let group_name = format!("{ns}.cache");
    let mut daemons = Vec::new();
    for i in 0..3 {
        let dir = tmp.0.join(format!("valkyrie-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        // A fixed port: hellos announce the configured one.
        let mut config = daemon_config(&dir, Vec::new());
        config.port = free_port();
        let d = Daemon::start(config).await.unwrap();
        let mut g = GroupConfig::new(group_name.clone(), fqdn(0), 6379, 2);
        g.down_after = Duration::from_millis(1000);
        g.failover_timeout = Duration::from_millis(6000);
        g.owner = GroupOwner::Kubernetes {
            namespace: ns.clone(),
            name: "cache".into(),
            labels: Default::default(),
        };
        d.handle.apply_managed(g).await.unwrap();
        d.handle
            .set_role_hook(Arc::new(labels.clone()))
            .await
            .unwrap();
        daemons.push(d);
    }
    let ports: Vec<u16> = daemons.iter().map(|d| d.sentinel_addrs[0].port()).collect();
    let (name, watched) = (group_name.clone(), ports.clone());
    tokio::task::spawn_blocking(move || {
        let seen = |p: u16| support::try_call(p, &["SENTINEL", "MASTER", &name]);
        let deadline = Instant::now() + 30 * S;
        while !watched.iter().all(|&p| {
            let reply = seen(p).ok();
            let field = |f: &str| reply.as_ref().and_then(|r| field_of(r, f));
            field("num-other-sentinels").as_deref() == Some("2")
                && field("num-slaves").as_deref() == Some("2")
        }) {
            assert!(
                Instant::now() < deadline,
                "not discovered within 30 s: {:?}",
                watched.iter().map(|&p| seen(p)).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    let events: Vec<Events> = ports.iter().map(|&p| Events::watch(p)).collect();

    // SIGKILL the master; sample the labels while the failover runs.
    let killed = Instant::now();
    servers[0].kill();
    let mut label_moved = None;
    let switch = loop {
        assert!(killed.elapsed() < 30 * S, "no +switch-master within 30 s");
        if let Some(payload) = events
            .iter()
            .flat_map(Events::all)
            .find(|(c, _)| c == "+switch-master")
            .map(|(_, p)| p)
        {
            break payload;
        }
        if label_moved.is_none() && master_of(&roles(&pods).await).as_deref() != Some("cache-0") {
            label_moved = Some(killed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let switched = killed.elapsed();
    // Read after the event: the hook ran before it was published.
    let after = roles(&pods).await;
    let new_pod = switch
        .split(' ')
        .nth(3)
        .and_then(|host| host.split('.').next())
        .unwrap()
        .to_string();
    assert_ne!(new_pod, "cache-0", "{switch}");
    assert_eq!(
        master_of(&after).as_deref(),
        Some(new_pod.as_str()),
        "{after:?}"
    );
    // The new configuration's epoch, as the Valkyrie that led it says.
    let epoch: u64 = {
        let (ports, g) = (ports.clone(), group_name.clone());
        tokio::task::spawn_blocking(move || {
            ports
                .iter()
                .filter_map(|&p| {
                    support::try_call(p, &["SENTINEL", "MASTER", &g])
                        .ok()
                        .and_then(|r| field_of(&r, "config-epoch"))
                        .and_then(|e| e.parse().ok())
                })
                .max()
                .unwrap_or(0)
        })
        .await
        .unwrap()
    };
    assert!(epoch >= 1);
    assert_eq!(after[&new_pod], ("master".to_string(), epoch), "{after:?}");
    assert_eq!(
        after["cache-0"],
        ("replica".to_string(), epoch),
        "{after:?}"
    );
    println!(
        "SIGKILL to role label on the new pod: {:?} (sampled every ~5 ms); to +switch-master: {switched:?}",
        label_moved.unwrap_or(switched)
    );
    for d in daemons {
        d.stop().await.unwrap();
    }
}

/// Field `name` of a `SENTINEL MASTER` reply.
fn field_of(reply: &valkyrie_protocol::Frame, name: &str) -> Option<String> {
    match reply {
        valkyrie_protocol::Frame::Array(kv) => kv
            .chunks(2)
            .find(|p| p[0].as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
            .and_then(|p| p[1].as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}
