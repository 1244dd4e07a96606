//! The one-node cluster is real: the scheduler places a pod, which runs a
//! real image with an address from the CNI bridge; a StatefulSet's pods
//! get DNS names from CoreDNS that another pod resolves and connects to;
//! a ClusterIP Service carries TCP from a pod and from the node itself
//! through kube-proxy's iptables rules, and so does the `kubernetes`
//! Service to the API server; and after the teardown nothing of it is
//! left on the machine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use ::kube::Client;
use ::kube::api::{Api, LogParams, PostParams};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::time::Instant;

use crate::support::cluster::config::{CLUSTER_DOMAIN, NODE_IP, NODE_NAME, POD_CIDR};
use crate::support::cluster::{Cluster, pod_ready};

/// Polls `f` every 250 ms until it gives `Some`; fails after `limit`.
async fn eventually<T, F, Fut>(what: &str, limit: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    crate::support::eventually(what, limit, Duration::from_millis(250), f).await
}

/// valkey-server as the image's user, reachable from other pods.
fn valkey_container(image: &str) -> serde_json::Value {
    serde_json::json!({
        "name": "valkey", "image": image,
        "args": ["valkey-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"],
        "ports": [{"containerPort": 6379, "name": "valkey"}],
        "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1},
    })
}

async fn create<K>(client: &Client, ns: &str, doc: serde_json::Value) -> K
where
    K: ::kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    <K as ::kube::Resource>::DynamicType: Default,
{
    let object: K = serde_json::from_value(doc).unwrap();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// The pod, once Running and Ready.
async fn ready_pod(pods: &Api<Pod>, name: &str) -> Pod {
    eventually(
        &format!("pod {name} Ready"),
        Duration::from_secs(90),
        || async {
            let pod = pods.get_opt(name).await.ok().flatten()?;
            let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
            (running && pod_ready(&pod)).then_some(pod)
        },
    )
    .await
}

fn pod_ip(pod: &Pod) -> String {
    pod.status.as_ref().unwrap().pod_ip.clone().unwrap()
}

/// What the host has of the kinds a node leaves behind.
#[derive(Debug, PartialEq)]
struct HostState {
    netns: BTreeSet<String>,
    kube_chains: usize,
    cgroups: BTreeSet<String>,
    sysctls: Vec<String>,
    global_paths: Vec<bool>,
}

fn host_state() -> HostState {
    let netns = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let rules = std::process::Command::new("iptables-save")
        .output()
        .unwrap();
    let kube_chains = String::from_utf8_lossy(&rules.stdout)
        .lines()
        .filter(|l| l.contains("KUBE-") || l.contains("CNI-"))
        .count();
    let mut cgroups = BTreeSet::new();
    for c in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for top in ["kubepods", "k8s.io"] {
            let p = c.path().join(top);
            if p.exists() {
                cgroups.insert(p.display().to_string());
            }
        }
    }
    let sysctls = [
        "vm/overcommit_memory",
        "vm/panic_on_oom",
        "kernel/panic",
        "kernel/panic_on_oops",
    ]
    .iter()
    .map(|k| std::fs::read_to_string(Path::new("/proc/sys").join(k)).unwrap())
    .collect();
    let global_paths = [
        "/run/containerd",
        "/var/lib/cni",
        "/var/lib/kubelet",
        "/var/log/containers",
    ]
    .iter()
    .map(|p| Path::new(p).exists())
    .collect();
    HostState {
        netns,
        kube_chains,
        cgroups,
        sysctls,
        global_paths,
    }
}

/// Nothing on the machine names the cluster's work dir.
fn nothing_names(dir: &Path) {
    let dir = dir.display().to_string();
    assert!(!Path::new(&dir).exists(), "{dir} is still there");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&dir)).collect();
    assert!(left.is_empty(), "mounts left: {left:#?}");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !cmdline.contains(&dir),
            "a process is left: {}: {cmdline}",
            entry.path().display()
        );
    }
}

/// The host's state while no one-node cluster runs: taken under the
/// machine-wide lock that every cluster's watchdog holds from before its
/// setup to after its teardown (another process's cluster may be running
/// when this test starts). The lock is let go before this test's own
/// cluster takes it.
fn host_state_between_clusters() -> HostState {
    let path = std::env::var("VALKYRIE_NODE_LOCK")
        .unwrap_or_else(|_| "/run/lock/valkyrie-node.lock".to_owned());
    std::fs::create_dir_all(Path::new(&path).parent().unwrap()).unwrap();
    let lock = std::fs::File::create(&path).unwrap();
    lock.lock().unwrap();
    let state = host_state();
    lock.unlock().unwrap();
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_statefulset_dns_and_services_on_a_real_node() {
    let before = host_state_between_clusters();
    let cluster = Cluster::start().await;
    let client = cluster.client().await;
    let ns = cluster.namespace("node").await;
    let image = cluster
        .images
        .get("valkey")
        .expect("no valkey image in images.txt")
        .clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // The `kubernetes` Service has the API server's real address.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let api_slice = eventually(
        "EndpointSlice of `kubernetes`",
        Duration::from_secs(30),
        || async { slices.get_opt("kubernetes").await.ok().flatten() },
    )
    .await;
    assert_eq!(api_slice.endpoints[0].addresses, vec![NODE_IP.to_string()]);

    // 1. A pod with no nodeName: the scheduler places it, the bridge
    //    gives it an address, and the image's valkey-server runs.
    let began = Instant::now();
    create::<Pod>(
        &client,
        &ns,
        serde_json::json!({
            "metadata": {"name": "solo"},
            "spec": {"containers": [valkey_container(&image)]},
        }),
    )
    .await;
    let solo = ready_pod(&pods, "solo").await;
    eprintln!("pod solo Ready {:.1?} after its creation", began.elapsed());
    assert_eq!(
        solo.spec.as_ref().unwrap().node_name.as_deref(),
        Some(NODE_NAME)
    );
    let ip = pod_ip(&solo);
    assert!(
        ip.starts_with("10.88."),
        "pod IP {ip} is not from the bridge's {}",
        POD_CIDR
    );
    let log = pods.logs("solo", &LogParams::default()).await.unwrap();
    assert!(log.contains("Ready to accept connections"), "{log}");

    // 2. A StatefulSet behind a headless Service, and a client pod.
    create::<Service>(&client, &ns, serde_json::json!({
        "metadata": {"name": "kv"},
        "spec": {"clusterIP": "None", "selector": {"app": "kv"}, "ports": [{"port": 6379, "name": "valkey"}]},
    }))
    .await;
    create::<StatefulSet>(
        &client,
        &ns,
        serde_json::json!({
            "metadata": {"name": "kv"},
            "spec": {
                "serviceName": "kv", "replicas": 2, "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "kv"}},
                "template": {"metadata": {"labels": {"app": "kv"}},
                             "spec": {"containers": [valkey_container(&image)]}},
            },
        }),
    )
    .await;
    create::<Pod>(&client, &ns, serde_json::json!({
        "metadata": {"name": "client"},
        "spec": {"containers": [{"name": "client", "image": image, "command": ["sleep", "infinity"]}],
                 "terminationGracePeriodSeconds": 1},
    }))
    .await;
    let kv: Vec<Pod> = vec![
        ready_pod(&pods, "kv-0").await,
        ready_pod(&pods, "kv-1").await,
    ];
    ready_pod(&pods, "client").await;

    // Each StatefulSet pod's name resolves, from the other pod, to its IP.
    let domain = format!("{ns}.svc.{}", CLUSTER_DOMAIN);
    for (i, pod) in kv.iter().enumerate() {
        let name = format!("kv-{i}.kv.{domain}");
        let want = pod_ip(pod);
        let got = eventually(
            &format!("{name} resolves"),
            Duration::from_secs(30),
            || async {
                let out = cluster
                    .exec(&ns, "client", &["getent", "hosts", &name])
                    .ok()?;
                out.split_whitespace().next().map(str::to_string)
            },
        )
        .await;
        assert_eq!(got, want, "{name}");
    }
    let pong = cluster.exec(
        &ns,
        "client",
        &["valkey-cli", "-h", &format!("kv-0.kv.{domain}"), "ping"],
    );
    assert_eq!(pong.unwrap().trim(), "PONG");

    // 3. A ClusterIP Service in front of kv-0 carries TCP from a pod,
    //    by name and by address, through kube-proxy's DNAT.
    let rw: Service = create(
        &client,
        &ns,
        serde_json::json!({
            "metadata": {"name": "kv-rw"},
            "spec": {"selector": {"statefulset.kubernetes.io/pod-name": "kv-0"},
                     "ports": [{"port": 6379, "name": "valkey"}]},
        }),
    )
    .await;
    let cluster_ip = rw.spec.unwrap().cluster_ip.unwrap();
    eventually("SET through kv-rw", Duration::from_secs(30), || async {
        let out = cluster.exec(
            &ns,
            "client",
            &[
                "valkey-cli",
                "-h",
                &format!("kv-rw.{domain}"),
                "set",
                "k",
                "through-the-service",
            ],
        );
        (out.ok()?.trim() == "OK").then_some(())
    })
    .await;
    let direct = cluster.exec(
        &ns,
        "client",
        &["valkey-cli", "-h", &pod_ip(&kv[0]), "get", "k"],
    );
    assert_eq!(
        direct.unwrap().trim(),
        "through-the-service",
        "the Service did not lead to kv-0"
    );
    let by_ip = cluster.exec(
        &ns,
        "client",
        &["valkey-cli", "-h", &cluster_ip, "get", "k"],
    );
    assert_eq!(by_ip.unwrap().trim(), "through-the-service");

    // ... and from the node's own netns.
    let mut s = cluster
        .net
        .connect(
            format!("{cluster_ip}:6379").parse().unwrap(),
            Duration::from_secs(5),
        )
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET k\r\n").unwrap();
    let want = b"$19\r\nthrough-the-service\r\n";
    let mut reply = vec![0u8; want.len()];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, want, "{}", String::from_utf8_lossy(&reply));

    // The `kubernetes` Service leads a pod to the API server.
    let https = cluster.exec(
        &ns,
        "client",
        &[
            "bash",
            "-c",
            &format!(
                "exec 3<>/dev/tcp/kubernetes.default.svc.{}/443 && echo connected",
                CLUSTER_DOMAIN
            ),
        ],
    );
    assert_eq!(https.unwrap().trim(), "connected");

    // 4. Torn down, nothing is left.
    let dir = cluster.dir.clone();
    let began = Instant::now();
    let report = cluster.teardown();
    eprintln!("teardown took {:.1?}", began.elapsed());
    assert!(report.contains("left: nothing"), "{report}");
    nothing_names(&dir);
    assert_eq!(host_state(), before);
}
