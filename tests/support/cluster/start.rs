//! How the parts start, in order, and when each counts as ready.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ::kube::Client;
use ::kube::api::{Api, PostParams};
use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use tokio::time::Instant;

use super::config::*;
use super::host::{ctr, env_dir, host_tools, images, watchdog};
use super::{Cluster, NodeNet, Part, TURN, config, tail};

/// The binaries of `VALKYRIE_KUBE_BIN` a node runs.
const BINARIES: [&str; 9] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "kubelet",
    "kubectl",
    "crictl",
    "coredns",
];

/// How long the cluster may take to start, all parts together.
const START_LIMIT: Duration = Duration::from_secs(180);

/// Fails the test, with the tail of every part's log, if a part exited.
fn check_alive(parts: &mut [Part], dir: &Path) {
    for Part { name, child, .. } in parts.iter_mut() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "{name} exited with {status}:\n{}",
                tail(&dir.join(format!("logs/{name}.log")), 30)
            );
        }
    }
}

impl Cluster {
    /// Starts the cluster and waits until every part is ready: the node
    /// Ready, kube-proxy synced, CoreDNS serving, the controllers' service
    /// account and root CA in `default`.
    pub async fn start() -> Cluster {
        let turn = TURN.clone().lock_owned().await;
        let bin = env_dir(
            "VALKYRIE_KUBE_BIN",
            "Build them with `export VALKYRIE_KUBE_BIN=$(VALKYRIE_KUBE_NODE=1 scripts/kube-testbin | tail -n1)` (scripts/test does it)",
        );
        for b in BINARIES {
            assert!(
                bin.join(b).is_file(),
                "{} is missing: run VALKYRIE_KUBE_NODE=1 scripts/kube-testbin",
                bin.join(b).display()
            );
        }
        let made = images(&env_dir(
            "VALKYRIE_IMAGES",
            "Build them with `export VALKYRIE_IMAGES=$(scripts/images | tail -n1)` (scripts/test does it)",
        ));
        let pause = made
            .get("pause")
            .expect("no pause image in images.txt")
            .0
            .clone();
        host_tools();

        let id = std::process::id();
        let dir = PathBuf::from(format!("/tmp/valkyrie-node-{id}"));
        let netns = format!("valkyrie-node-{id}");
        let watchdog = watchdog(&dir, &netns).await;
        // From the netns made (a wait for another node's lock excluded).
        let began = Instant::now();
        let net = NodeNet::enter(&Path::new("/run/netns").join(&netns));
        std::os::unix::fs::symlink(&bin, dir.join("bin")).unwrap();
        config::write_all(&dir, &pause);
        let api: SocketAddr = format!("{NODE_IP}:{API_PORT}").parse().unwrap();
        let api_port = net.forward(api);
        std::fs::write(
            dir.join("host.kubeconfig"),
            kubeconfig(
                &format!("https://127.0.0.1:{api_port}"),
                &dir.join("pki/ca.crt").display().to_string(),
            ),
        )
        .unwrap();

        let mut cluster = Cluster {
            images: made.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect(),
            dir,
            netns,
            net,
            api_port,
            startup: Duration::ZERO,
            parts: Vec::new(),
            watchdog: Some(watchdog),
            _turn: turn,
        };
        let w = cluster.dir.display().to_string();
        cluster.spawn("etcd", &format!(
            "--name node --data-dir {w}/etcd \
             --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
             --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
             --initial-cluster node=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn"
        ));
        cluster.spawn(
            "containerd",
            &format!("--config {w}/containerd/config.toml"),
        );
        // On the node's address (not loopback): the default endpoint
        // reconciler then gives the `kubernetes` Service that address.
        cluster.spawn("kube-apiserver", &format!(
            "--etcd-servers http://127.0.0.1:2379 \
             --bind-address {NODE_IP} --advertise-address {NODE_IP} --secure-port {API_PORT} \
             --tls-cert-file {w}/pki/apiserver.crt --tls-private-key-file {w}/pki/apiserver.key \
             --client-ca-file {w}/pki/ca.crt --token-auth-file {w}/tokens.csv \
             --authorization-mode Node,RBAC --service-cluster-ip-range {SERVICE_CIDR} \
             --service-account-issuer https://kubernetes.default.svc.{CLUSTER_DOMAIN} \
             --service-account-key-file {w}/pki/sa.pub --service-account-signing-key-file {w}/pki/sa.key \
             --allow-privileged=true --enable-priority-and-fairness=false \
             --kubelet-preferred-address-types InternalIP"
        ));
        // (InternalIP: the node's name resolves nowhere.)
        cluster.import_images(&made).await;
        let client = cluster.wait_api().await;
        // One of each: no leader election; nobody scrapes them: no
        // serving port. The root CA goes into every namespace's
        // kube-root-ca.crt, which pods' service-account volumes mount.
        cluster.spawn(
            "kube-controller-manager",
            &format!(
                "--kubeconfig {w}/node.kubeconfig --leader-elect=false --secure-port 0 \
             --root-ca-file {w}/pki/ca.crt --service-account-private-key-file {w}/pki/sa.key"
            ),
        );
        cluster.spawn(
            "kube-scheduler",
            &format!("--kubeconfig {w}/node.kubeconfig --leader-elect=false --secure-port 0"),
        );
        cluster.spawn(
            "kubelet",
            &format!(
                "--config {w}/kubelet/config.yaml --kubeconfig {w}/node.kubeconfig \
             --root-dir {w}/kubelet/root --cert-dir {w}/kubelet/pki \
             --hostname-override {NODE_NAME} --node-ip {NODE_IP} -v 1"
            ),
        );
        cluster.spawn("kube-proxy", &format!("--config {w}/kube-proxy.yaml"));
        cluster.spawn("coredns", &format!("-conf {w}/Corefile"));
        dns_service(&client).await;
        cluster.wait_ready(&client, began).await;
        cluster.startup = began.elapsed();
        eprintln!(
            "one-node cluster ready in {:.1?} (dir {}, netns {}, API at 127.0.0.1:{})",
            cluster.startup, w, cluster.netns, cluster.api_port
        );
        cluster
    }

    /// Starts `name` (from the bin dir, containerd from the host) inside
    /// the node's netns, its output into `logs/<name>.log`, and records
    /// its PID for the watchdog. (`args` is split on white space: the work
    /// dir's path has none.)
    pub(super) fn spawn(&mut self, name: &'static str, args: &str) {
        let program = match name {
            "containerd" => PathBuf::from("containerd"),
            _ => self.dir.join("bin").join(name),
        };
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // Appended to: a restarted part keeps its first run's log.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{name}.log")))
            .unwrap();
        // nsenter execs the binary: the PID is the part's own, and its
        // command line names the work dir, as `node.sh` checks.
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.netns))
            .arg("--")
            .arg(program)
            .args(args.split_whitespace())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("nsenter {name}: {e}"));
        std::fs::write(
            self.dir.join(format!("pids/{name}")),
            child.id().to_string(),
        )
        .unwrap();
        self.parts.push(Part {
            name,
            args: args.to_string(),
            child,
        });
    }

    /// Imports every image of `images.txt` into the node's containerd (the
    /// `k8s.io` namespace, which the CRI reads), once it answers.
    async fn import_images(&mut self, made: &BTreeMap<String, (String, PathBuf)>) {
        let socket = self.dir.join("run/containerd.sock");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ctr(&socket, &["version"]).status.success() {
            check_alive(&mut self.parts, &self.dir);
            assert!(
                Instant::now() < deadline,
                "containerd does not answer:\n{}",
                tail(&self.dir.join("logs/containerd.log"), 30)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let began = Instant::now();
        for (name, (reference, archive)) in made {
            let out = ctr(
                &socket,
                &["images", "import", &archive.display().to_string()],
            );
            assert!(
                out.status.success(),
                "importing {name} ({reference}) from {}: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        eprintln!("imported {} images in {:.1?}", made.len(), began.elapsed());
    }

    /// The API server's /readyz says ok.
    async fn wait_api(&mut self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            check_alive(&mut self.parts, &self.dir);
            let client = self.client().await;
            let request = http::Request::get("/readyz").body(Vec::new()).unwrap();
            let answer =
                tokio::time::timeout(Duration::from_secs(5), client.request_text(request)).await;
            if matches!(answer, Ok(Ok(ref t)) if t.trim() == "ok") {
                return client;
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready within 60 s:\n{}",
                tail(&self.dir.join("logs/kube-apiserver.log"), 30)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn wait_ready(&mut self, client: &Client, began: Instant) {
        let nodes: Api<Node> = Api::all(client.clone());
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        let roots: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let mut waiting;
        loop {
            check_alive(&mut self.parts, &self.dir);
            waiting = Vec::new();
            let node = nodes.get_opt(NODE_NAME).await.ok().flatten();
            if !node.as_ref().is_some_and(node_ready) {
                waiting.push("kubelet (node Ready)");
            }
            if !self.http_ok("127.0.0.1:10256", "/healthz") {
                waiting.push("kube-proxy (healthz)");
            }
            if !self.http_ok("127.0.0.1:8181", "/ready") {
                waiting.push("CoreDNS (ready)");
            }
            if !matches!(accounts.get_opt("default").await, Ok(Some(_)))
                || !matches!(roots.get_opt("kube-root-ca.crt").await, Ok(Some(_)))
            {
                waiting.push("kube-controller-manager (default service account, root CA)");
            }
            if waiting.is_empty() {
                return;
            }
            assert!(
                began.elapsed() < START_LIMIT,
                "the cluster was not ready within {START_LIMIT:?}; waiting for {waiting:?}\nkubelet:\n{}",
                tail(&self.dir.join("logs/kubelet.log"), 30)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
/// The `kube-dns` Service in front of CoreDNS on the node: no selector
/// (CoreDNS is no pod), one EndpointSlice with the node's address.
async fn dns_service(client: &Client) {
    use ::kube::api::DynamicObject;
    use ::kube::discovery::ApiResource;
    let service = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {"clusterIP": DNS_IP, "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}
    });
    let slice = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kube-dns-node", "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "kube-dns"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [NODE_IP], "conditions": {"ready": true}}],
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                  {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]
    });
    for doc in [service, slice] {
        let object: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), "v1".to_string()),
        };
        let gvk =
            ::kube::api::GroupVersionKind::gvk(&group, &version, doc["kind"].as_str().unwrap());
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "kube-system", &ApiResource::from_gvk(&gvk));
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {}: {e}", doc["kind"]));
    }
}
