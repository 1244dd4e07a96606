//! A real one-node Kubernetes cluster for tests: every part a real process,
//! inside a network namespace the test makes (the node's), torn down
//! however the test ends.
//!
//! In the node's netns (`config.rs` has the addresses and every file):
//! etcd; kube-apiserver on the node's address, so that the `kubernetes`
//! Service gets real endpoints; kube-controller-manager (all its default
//! controllers: StatefulSets, EndpointSlices, service accounts, the root
//! CA ConfigMap); kube-scheduler; containerd with runc and a CNI bridge;
//! kubelet, registered with the API server; kube-proxy in iptables mode;
//! CoreDNS as a process on the node, behind the `kube-dns` Service that
//! kubelet's `clusterDNS` names. The binaries come from
//! `VALKYRIE_KUBE_BIN` (`VALKYRIE_KUBE_NODE=1 scripts/kube-testbin`), the
//! images from `VALKYRIE_IMAGES` (the directory `scripts/images` prints;
//! its `images.txt` lists `<name> <reference> <archive>`), imported into
//! the node's containerd at start. Either missing fails the test.
//!
//! The test process stays in the host's netns; [`NodeNet`] opens sockets
//! inside, and forwards a loopback port to the API server, so that
//! [`Cluster::client`] and [`Cluster::kubectl`] work from the host.
//!
//! **Teardown.** The host-side state (the netns, the saved sysctls, the
//! global paths, the lock) belongs to `node.sh`, run as a watchdog in a
//! process group of its own: it reads a pipe that only this process
//! holds, and when the pipe closes (on [`Cluster::teardown`], on a drop in
//! a panic, or when this process dies of a signal) it stops everything
//! and removes what the cluster left (see `node.sh`).
//!
//! **One cluster at a time**, on the whole machine: two nodes would share
//! `/run/containerd`, `/var/lib/cni`, `/var/log/containers` and the pod
//! cgroups. The watchdog takes a file lock before it sets anything up and
//! keeps it until its teardown is over; within a process, a second
//! [`Cluster::start`] waits for the first cluster's teardown.

pub mod config;
mod dns;
mod faults;
mod host;
pub mod netns;
mod start;

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use ::kube::Client;
use ::kube::api::{Api, PostParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use tokio::time::Instant;

pub use netns::NodeNet;

/// A running one-node cluster.
pub struct Cluster {
    /// The work dir: configs, state, logs (`logs/<part>.log`).
    pub dir: PathBuf,
    /// The node's netns, under `/run/netns`.
    pub netns: String,
    /// The images imported, by `images.txt` name (`pause`, `valkey`, …).
    pub images: BTreeMap<String, String>,
    /// Sockets inside the node's netns.
    pub net: NodeNet,
    /// The host's loopback port in front of the API server.
    pub api_port: u16,
    /// From the node's netns made to every part ready.
    pub startup: Duration,
    parts: Vec<Part>,
    watchdog: Option<(Child, ChildStdin, BufReader<ChildStdout>)>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

/// A part's process, and the arguments it was started with (for a
/// restart).
struct Part {
    name: &'static str,
    args: String,
    child: Child,
}

/// One cluster per process at a time (the machine-wide lock is the
/// watchdog's).
static TURN: LazyLock<Arc<tokio::sync::Mutex<()>>> = LazyLock::new(Default::default);

/// Whether the pod's `Ready` condition is true.
pub fn pod_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The last `n` lines of a log.
pub fn tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Cluster {
    /// `GET path` at `addr` inside the node's netns answers 200.
    pub fn http_ok(&self, addr: &str, path: &str) -> bool {
        let Ok(mut s) = self
            .net
            .connect(addr.parse().unwrap(), Duration::from_secs(2))
        else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut answer = String::new();
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && answer.split_whitespace().nth(1) == Some("200")
    }

    /// An administrator's client, through the forwarded port.
    pub async fn client(&self) -> Client {
        Client::try_from(self.config().await).unwrap()
    }

    /// As [`Cluster::client`], without the client's own retries of
    /// 429, 503 and 504: what the API server answered, as it answered
    /// (an eviction the disruption budget refuses is a 429).
    pub async fn client_without_retries(&self) -> Client {
        let mut config = self.config().await;
        config.default_retry = false;
        Client::try_from(config).unwrap()
    }

    async fn config(&self) -> ::kube::Config {
        let kubeconfig = Kubeconfig::read_from(self.dir.join("host.kubeconfig")).unwrap();
        ::kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .unwrap()
    }

    /// kubectl as the administrator, through the forwarded port.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new(self.dir.join("bin/kubectl"));
        c.arg("--kubeconfig").arg(self.dir.join("host.kubeconfig"));
        c
    }

    /// Runs `cmd` in container 0 of pod `ns/pod` (`kubectl exec`); its
    /// stdout, or the failure.
    pub fn exec(&self, ns: &str, pod: &str, cmd: &[&str]) -> Result<String, String> {
        let out = self
            .kubectl()
            .args(["exec", "-n", ns, pod, "--"])
            .args(cmd)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// A fresh namespace `<name>-<n>`, once its `default` service account
    /// exists (pods are refused before).
    pub async fn namespace(&self, name: &str) -> String {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let ns = format!("{name}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let client = self.client().await;
        let object: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(client, &ns);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(accounts.get_opt("default").await, Ok(Some(_))) {
            assert!(
                Instant::now() < deadline,
                "no default service account in {ns} after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ns
    }

    /// Stops the cluster and removes all it left; the watchdog's report,
    /// which ends in "left: nothing" when nothing is left. (Also what a
    /// drop does, without waiting.)
    pub fn teardown(mut self) -> String {
        let (mut child, stdin, mut out) = self.watchdog.take().unwrap();
        drop(stdin);
        let mut report = String::new();
        out.read_to_string(&mut report).unwrap();
        let status = child.wait().unwrap();
        for part in &mut self.parts {
            let _ = part.child.wait();
        }
        eprintln!("teardown ({status}):\n{report}");
        report
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.watchdog.is_some() && std::thread::panicking() {
            // The watchdog removes the work dir: keep the logs of a failed
            // test for inspection.
            let kept = PathBuf::from(format!("{}-logs", self.dir.display()));
            let _ = Command::new("cp")
                .arg("-a")
                .arg(self.dir.join("logs"))
                .arg(&kept)
                .status();
            eprintln!("kept the cluster's logs in {}", kept.display());
        }
        // Closing the watchdog's pipe (dropping it) starts the teardown.
    }
}
