//! Benchmark: how soon after a SIGKILL of the master does the `-master`
//! Service's EndpointSlice name the promoted pod, next to the switch on
//! the Sentinel port, and the same switch by three real valkey-sentinels.
//!
//! ```sh
//! source scripts/deps.sh && valkyrie_deps   # VALKEY_*, VALKYRIE_KUBE_BIN
//! VALKYRIE_BENCH_TRIALS=5 cargo test --test kube endpoints:: -- --ignored --nocapture
//! ```
//!
//! (`VALKYRIE_BENCH_TRIALS` defaults to 3; the kube-controller-manager
//! comes from `scripts/kube-testbin`, which `valkyrie_deps` runs.)
//!
//! The topology of `tests/kube/failover.rs`: a `ValkeyCluster` named `cache` of
//! three Pod objects, each played by a real valkey-server on its own
//! loopback address announcing its stable DNS name (mapped in `/etc/hosts`
//! for the test's duration: the test runs as root), three peered
//! Valkyries with the role labels as their failover hook. Added here: the
//! `cache-master` Service (as the reconciler creates it: no selector of
//! its own; the role hook names the master's pod in it), a Node the pods are bound to, and each pod's status
//! (Running, Ready, a pod IP) written through the status subresource, so
//! that the EndpointSlice controller of a real kube-controller-manager
//! (started by the harness with that controller alone) includes them.
//!
//! The pod IPs are not the servers' loopback addresses: the API server
//! refuses loopback addresses in an EndpointSlice ("may not be in the
//! loopback range"). Nothing routes through the Service here (no
//! kube-proxy), so each pod gets a stand-in address from 10.244.0.0/24;
//! what is measured is the control plane: label write, watch,
//! EndpointSlice update.
//!
//! Times are taken from the SIGKILL to the moment the test's watches (of
//! the pods, of the EndpointSlices, of each Sentinel port's events) see
//! the change, each stamped on arrival.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ::kube::api::{Api, Patch, PatchParams, PostParams};
use ::kube::runtime::watcher;
use ::kube::{Client, Resource, ResourceExt};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use support::kube::{admin_client, controller_manager, namespace};
use support::pods::{Hosts, topology};
use support::sentinel::RealSentinel;
use support::{TempDir, daemon_config, free_port, wait_discovered};
use valkyrie::config::{GroupConfig, GroupOwner};
use valkyrie::daemon::Daemon;
use valkyrie::kube::labels::RoleLabels;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

const S: Duration = Duration::from_secs(1);
/// The Valkyrie trials' pods: a loopback network of their own.
const NET: &str = "127.0.79";
/// The valkey-sentinel trials' servers.
const SENTINEL_NET: &str = "127.0.81";
const NODE: &str = "valkyrie-bench-node";
const DOWN_AFTER_MS: u64 = 1000;
const FAILOVER_TIMEOUT_MS: u64 = 6000;

fn read_frame(
    c: &mut TcpStream,
    dec: &mut FrameDecoder,
    buf: &mut bytes::BytesMut,
) -> Option<Frame> {
    loop {
        if let Some(f) = dec.decode(buf).ok()? {
            return Some(f);
        }
        let mut chunk = [0u8; 4096];
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The `+switch-master` payloads published on one Sentinel port, each
/// stamped when it arrived.
struct Switches {
    seen: Arc<Mutex<Vec<(Instant, String)>>>,
    running: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Switches {
    fn watch(port: u16) -> Switches {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut out = bytes::BytesMut::new();
        encode_command(&["SUBSCRIBE", "+switch-master"], &mut out);
        c.write_all(&out).unwrap();
        let (mut dec, mut buf) = (FrameDecoder::new(), bytes::BytesMut::new());
        let deadline = Instant::now() + 5 * S;
        while !matches!(
            read_frame(&mut c, &mut dec, &mut buf),
            Some(Frame::Array(_))
        ) {
            assert!(
                Instant::now() < deadline,
                "SUBSCRIBE not confirmed on {port}"
            );
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (seen, running) = (seen.clone(), running.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    // message <channel> <payload>
                    if let Some(Frame::Array(parts)) = read_frame(&mut c, &mut dec, &mut buf)
                        && parts.len() == 3
                    {
                        let at = Instant::now();
                        let payload = parts[2]
                            .as_bytes()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_default();
                        seen.lock().unwrap().push((at, payload));
                    }
                }
            })
        };
        Switches {
            seen,
            running,
            thread: Some(thread),
        }
    }

    fn first(&self) -> Option<(Instant, String)> {
        self.seen.lock().unwrap().first().cloned()
    }
}

impl Drop for Switches {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The earliest `+switch-master` over `watches`: when, and the new
/// master's host.
fn first_switch(watches: &[Switches]) -> Option<(Instant, String)> {
    watches
        .iter()
        .filter_map(Switches::first)
        .min_by_key(|(at, _)| *at)
        .map(|(at, payload)| (at, payload.split(' ').nth(3).unwrap_or("").to_string()))
}

/// A watch of `api` (objects matching `selector`) that records `view` of
/// the whole set after every change, stamped on arrival.
struct Recorder {
    history: Arc<Mutex<Vec<(Instant, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    fn start<K>(
        api: Api<K>,
        selector: &str,
        view: impl Fn(&BTreeMap<String, K>) -> String + Send + 'static,
    ) -> Recorder
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        let history = Arc::new(Mutex::new(Vec::new()));
        let config = watcher::Config::default().labels(selector);
        let task = {
            let history = history.clone();
            tokio::spawn(async move {
                let mut objects = BTreeMap::new();
                let mut listing = BTreeMap::new();
                let mut stream = watcher(api, config).boxed();
                while let Some(event) = stream.next().await {
                    let at = Instant::now();
                    match event {
                        Ok(watcher::Event::Init) => {
                            listing.clear();
                            continue;
                        }
                        Ok(watcher::Event::InitApply(o)) => {
                            listing.insert(o.name_any(), o);
                            continue;
                        }
                        Ok(watcher::Event::InitDone) => objects = std::mem::take(&mut listing),
                        Ok(watcher::Event::Apply(o)) => {
                            objects.insert(o.name_any(), o);
                        }
                        Ok(watcher::Event::Delete(o)) => {
                            objects.remove(&o.name_any());
                        }
                        Err(e) => {
                            eprintln!("watch: {e}");
                            continue;
                        }
                    }
                    let v = view(&objects);
                    let mut h = history.lock().unwrap();
                    if h.last().map(|(_, last)| last != &v).unwrap_or(true) {
                        h.push((at, v));
                    }
                }
            })
        };
        Recorder { history, task }
    }

    fn now(&self) -> Option<String> {
        self.history.lock().unwrap().last().map(|(_, v)| v.clone())
    }

    /// When the view first became `want` at or after `since`.
    fn reached(&self, want: &str, since: Instant) -> Option<Instant> {
        self.history
            .lock()
            .unwrap()
            .iter()
            .find(|(at, v)| *at >= since && v == want)
            .map(|(at, _)| *at)
    }

    /// Polls until the view is `want`; panics after `limit`.
    async fn wait_for(&self, want: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.now().as_deref() != Some(want) {
            assert!(
                Instant::now() < deadline,
                "still {:?} after {limit:?}, wanted {want:?}",
                self.now()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The pods labelled master, by name.
fn master_pods(pods: &BTreeMap<String, Pod>) -> String {
    let masters: Vec<&str> = pods
        .values()
        .filter(|p| p.labels().get("valkyrie.io/role").map(String::as_str) == Some("master"))
        .map(|p| p.metadata.name.as_deref().unwrap_or(""))
        .collect();
    masters.join(",")
}

/// Every address the EndpointSlices name, sorted.
fn slice_addresses(slices: &BTreeMap<String, EndpointSlice>) -> String {
    let mut addresses: Vec<&str> = slices
        .values()
        .flat_map(|s| s.endpoints.iter())
        .flat_map(|e| e.addresses.iter().map(String::as_str))
        .collect();
    addresses.sort_unstable();
    addresses.join(",")
}

fn object<T: DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The Node every pod is bound to: the EndpointSlice controller leaves
/// out a pod whose node it does not know.
async fn ensure_node(client: &Client) {
    let api: Api<Node> = Api::all(client.clone());
    let node: Node = object(serde_json::json!({ "metadata": { "name": NODE } }));
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(::kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("node: {e}"),
    }
}

/// One Valkyrie trial's times from the SIGKILL.
struct Measured {
    label: Duration,
    endpoints: Duration,
    switch: Duration,
}

async fn valkyrie_trial(client: &Client, trial: usize) -> Measured {
    let ns = namespace("endpoints").await;
    let fqdn = |i: usize| format!("cache-{i}.cache-headless.{ns}.svc.cluster.local");
    let ip = |i: usize| format!("{NET}.{}", i + 1);
    // A stand-in pod IP: EndpointSlices refuse loopback addresses.
    let pod_ip = |i: usize| format!("10.244.0.{}", i + 1);

    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service: Service = object(serde_json::json!({
        "metadata": { "name": "cache-master" },
        "spec": {
            "type": "ClusterIP",
            "ports": [{ "name": "valkey", "port": 6379, "targetPort": 6379, "protocol": "TCP" }],
        },
    }));
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for i in 0..3 {
        let name = format!("cache-{i}");
        let pod: Pod = object(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": {
                    "app.kubernetes.io/name": "valkey",
                    "app.kubernetes.io/instance": "cache",
                    "app.kubernetes.io/managed-by": "valkyrie",
                    "statefulset.kubernetes.io/pod-name": name,
                },
            },
            "spec": {
                "nodeName": NODE,
                "containers": [{ "name": "valkey", "image": "valkey/valkey:8.1" }],
            },
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
        // What the kubelet would report: running, ready, an address.
        let status = serde_json::json!({
            "status": {
                "phase": "Running",
                "podIP": pod_ip(i),
                "podIPs": [{ "ip": pod_ip(i) }],
                "conditions": [
                    { "type": "PodScheduled", "status": "True" },
                    { "type": "ContainersReady", "status": "True" },
                    { "type": "Ready", "status": "True" },
                ],
            }
        });
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    let _hosts = Hosts::add(&ns, &(0..3).map(|i| (ip(i), fqdn(i))).collect::<Vec<_>>());
    let tmp = TempDir::new("kube-endpoints");
    let mut servers = {
        let (dir, fqdns) = (tmp.0.clone(), (0..3).map(fqdn).collect::<Vec<_>>());
        tokio::task::spawn_blocking(move || topology(&dir, NET, &|i| fqdns[i].clone()))
            .await
            .unwrap()
    };

    let label_watch = Recorder::start(
        pods.clone(),
        "app.kubernetes.io/instance=cache",
        master_pods,
    );
    let slice_watch = Recorder::start(
        Api::<EndpointSlice>::namespaced(client.clone(), &ns),
        "kubernetes.io/service-name=cache-master",
        slice_addresses,
    );
    let labels = RoleLabels::new(client.clone());
    labels.converge(&ns, "cache", "cache-0", 0).await.unwrap();
    label_watch.wait_for("cache-0", 10 * S).await;
    slice_watch.wait_for(&pod_ip(0), 60 * S).await;

    let group_name = format!("{ns}.cache");
    let mut daemons = Vec::new();
    for i in 0..3 {
        let dir = tmp.0.join(format!("valkyrie-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut config = daemon_config(&dir, Vec::new());
        config.port = free_port();
        let d = Daemon::start(config).await.unwrap();
        let mut g = GroupConfig::new(group_name.clone(), fqdn(0), 6379, 2);
        g.down_after = Duration::from_millis(DOWN_AFTER_MS);
        g.failover_timeout = Duration::from_millis(FAILOVER_TIMEOUT_MS);
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
    let switches = {
        let (name, ports) = (group_name.clone(), ports.clone());
        tokio::task::spawn_blocking(move || {
            discovered(&ports, &name);
            ports
                .iter()
                .map(|&p| Switches::watch(p))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap()
    };

    let killed = Instant::now();
    let mut first = servers.remove(0);
    first.kill();

    let (switched, new_host) = loop {
        if let Some(s) = first_switch(&switches) {
            break s;
        }
        assert!(killed.elapsed() < 30 * S, "no +switch-master within 30 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let new_pod = new_host.split('.').next().unwrap().to_string();
    assert_ne!(new_pod, "cache-0", "{new_host}");
    let new_ip = pod_ip(new_pod.trim_start_matches("cache-").parse().unwrap());
    let (mut label, mut endpoints) = (None, None);
    while label.is_none() || endpoints.is_none() {
        assert!(
            killed.elapsed() < 60 * S,
            "after 60 s: labels {:?}, endpoints {:?}",
            label_watch.now(),
            slice_watch.now()
        );
        label = label.or_else(|| label_watch.reached(&new_pod, killed));
        endpoints = endpoints.or_else(|| slice_watch.reached(&new_ip, killed));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for d in daemons {
        d.stop().await.unwrap();
    }
    drop(switches);
    let m = Measured {
        label: label.unwrap() - killed,
        endpoints: endpoints.unwrap() - killed,
        switch: switched - killed,
    };
    eprintln!(
        "Valkyrie trial {trial}: {new_pod} promoted; label {:?}, EndpointSlice {:?}, +switch-master {:?}",
        m.label, m.endpoints, m.switch
    );
    m
}

/// Waits until each Sentinel port knows the other two and both replicas
/// of `name`.
fn discovered(ports: &[u16], name: &str) {
    let deadline = Instant::now() + 30 * S;
    let field = |p: u16, f: &str| -> Option<String> {
        let reply = support::try_call(p, &["SENTINEL", "MASTER", name]).ok()?;
        let Frame::Array(kv) = reply else { return None };
        kv.chunks(2)
            .find(|kv| kv[0].as_bytes().map(|b| &b[..]) == Some(f.as_bytes()))
            .and_then(|kv| kv[1].as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    while !ports.iter().all(|&p| {
        field(p, "num-other-sentinels").as_deref() == Some("2")
            && field(p, "num-slaves").as_deref() == Some("2")
    }) {
        assert!(Instant::now() < deadline, "not discovered within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Three real valkey-sentinels over the same kind of topology: the time
/// from the SIGKILL to the first `+switch-master`.
fn sentinel_trial(trial: usize) -> Duration {
    let domain = format!("cache-headless.sentinel-{trial}.svc.cluster.local");
    let fqdn = |i: usize| format!("cache-{i}.{domain}");
    let _hosts = Hosts::add(
        &format!("sentinel-{trial}"),
        &(0..3)
            .map(|i| (format!("{SENTINEL_NET}.{}", i + 1), fqdn(i)))
            .collect::<Vec<_>>(),
    );
    let tmp = TempDir::new("kube-endpoints-sentinel");
    let mut servers = topology(&tmp.0, SENTINEL_NET, &fqdn);
    let sentinels: Vec<RealSentinel> = (0..3)
        .map(|i| {
            let dir = tmp.0.join(format!("sentinel-{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            RealSentinel::start(
                &dir,
                &format!(
                    "sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n\
                     sentinel monitor mymaster {} 6379 2\n\
                     sentinel down-after-milliseconds mymaster {DOWN_AFTER_MS}\n\
                     sentinel failover-timeout mymaster {FAILOVER_TIMEOUT_MS}\n",
                    fqdn(0)
                ),
            )
        })
        .collect();
    let ports: Vec<u16> = sentinels.iter().map(|s| s.port).collect();
    wait_discovered(&ports, 30 * S);
    let switches: Vec<Switches> = ports.iter().map(|&p| Switches::watch(p)).collect();

    let killed = Instant::now();
    let mut first = servers.remove(0);
    first.kill();
    let (switched, new_host) = loop {
        if let Some(s) = first_switch(&switches) {
            break s;
        }
        assert!(killed.elapsed() < 60 * S, "no +switch-master within 60 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        new_host.ends_with(&domain) && !new_host.starts_with("cache-0."),
        "{new_host}"
    );
    let t = switched - killed;
    eprintln!("valkey-sentinel trial {trial}: {new_host} promoted; +switch-master {t:?}");
    t
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

/// `median (min–max)` in milliseconds.
fn summary(mut v: Vec<Duration>) -> String {
    v.sort_unstable();
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2
    };
    format!("{} ms ({}–{} ms)", ms(median), ms(v[0]), ms(v[v.len() - 1]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: needs kube-controller-manager and takes about a minute; run with --ignored"]
async fn sigkill_to_the_master_service_naming_the_new_pod() {
    let trials: usize = std::env::var("VALKYRIE_BENCH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(3);
    assert!(trials >= 1);
    let client = admin_client().await;
    controller_manager().await;
    ensure_node(&client).await;

    let mut valkyrie = Vec::new();
    for t in 0..trials {
        valkyrie.push(valkyrie_trial(&client, t).await);
    }
    let sentinel: Vec<Duration> =
        tokio::task::spawn_blocking(move || (0..trials).map(sentinel_trial).collect())
            .await
            .unwrap();

    println!(
        "\nSIGKILL of the master to ..., {trials} trials each, down-after {DOWN_AFTER_MS} ms, \
         failover-timeout {FAILOVER_TIMEOUT_MS} ms:\n"
    );
    println!(
        "| system | role label on the new pod | `cache-master` EndpointSlice names only the new pod | first `+switch-master` |"
    );
    println!("|---|---:|---:|---:|");
    println!(
        "| 3 × Valkyrie, quorum 2 | {} | {} | {} |",
        summary(valkyrie.iter().map(|m| m.label).collect()),
        summary(valkyrie.iter().map(|m| m.endpoints).collect()),
        summary(valkyrie.iter().map(|m| m.switch).collect()),
    );
    println!(
        "| 3 × valkey-sentinel, quorum 2 | — | — | {} |",
        summary(sentinel.clone())
    );
    println!(
        "\nEndpointSlice after the label (per trial): {}",
        summary(
            valkyrie
                .iter()
                .map(|m| m.endpoints.saturating_sub(m.label))
                .collect()
        )
    );
    println!(
        "\nper trial (ms): Valkyrie label / EndpointSlice / +switch-master; valkey-sentinel +switch-master"
    );
    for (t, m) in valkyrie.iter().enumerate() {
        println!(
            "  {t}: {} / {} / {}; {}",
            ms(m.label),
            ms(m.endpoints),
            ms(m.switch),
            ms(sentinel[t])
        );
    }
}
