//! What the node tests share: Valkyrie installed from `deploy/` as the
//! README tells a user, and the example `ValkeyCluster` applied.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use ::kube::api::Api;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::time::Instant;

use crate::support::cluster::config::NODE_NAME;
use crate::support::cluster::{Cluster, pod_ready};

pub const SECOND: Duration = Duration::from_secs(1);

/// Polls `f` every 500 ms until it gives `Some`; fails after `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    crate::support::eventually(what, limit, Duration::from_millis(500), f).await
}

/// `kubectl ARGS` with `stdin`; fails the test when kubectl does.
pub fn kubectl(c: &Cluster, args: &[&str], stdin: &str) -> String {
    let mut child = c
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?}: {text}");
    text
}

/// A default StorageClass of local volumes, one per Valkyrie, on the node:
/// what a cluster without a volume provisioner needs for the state claims
/// (local volumes, unlike hostPath ones, take the pods' fsGroup).
fn local_volumes(c: &Cluster, count: usize) -> String {
    let mut out = String::from(
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local
  annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
",
    );
    for i in 0..count {
        let dir = c.dir.join(format!("volume-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        out.push_str(&format!(
            "---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: local-{i}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {{path: {}}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {{key: kubernetes.io/hostname, operator: In, values: [{NODE_NAME}]}}
",
            dir.display()
        ));
    }
    out
}

/// Every manifest of `deploy/`, in file order, the Valkyrie image named
/// as the node knows it.
fn manifests(image: &str) -> String {
    let mut files: Vec<_> = std::fs::read_dir("deploy")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut all = String::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        all.push_str("---\n");
        all.push_str(&text.replace("image: valkyrie:0.1.0", &format!("image: {image}")));
        all.push('\n');
    }
    // The StatefulSet's init container and container.
    assert_eq!(all.matches(&format!("image: {image}")).count(), 2);
    all
}

/// The names of the ready pods of `pods` matching `labels`.
pub async fn ready_pods(pods: &Api<Pod>, labels: &str) -> Vec<String> {
    let list = pods
        .list(&::kube::api::ListParams::default().labels(labels))
        .await
        .unwrap();
    list.items
        .iter()
        .filter(|p| pod_ready(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// `kubectl apply -f deploy/` (after a StorageClass of local volumes):
/// returns once the three Valkyrie pods are ready.
pub async fn install_valkyrie(c: &Cluster) {
    kubectl(c, &["apply", "-f", "-"], &local_volumes(c, 3));
    let started = Instant::now();
    kubectl(c, &["apply", "-f", "-"], &manifests(&c.images["valkyrie"]));
    let valkyries: Api<Pod> = Api::namespaced(c.client().await, "valkyrie");
    eventually("three Valkyrie pods ready", 120 * SECOND, || {
        let valkyries = valkyries.clone();
        async move {
            (ready_pods(&valkyries, "app.kubernetes.io/name=valkyrie")
                .await
                .len()
                == 3)
                .then_some(())
        }
    })
    .await;
    println!(
        "deploy/ applied: three Valkyries ready in {:?}",
        started.elapsed()
    );
}

/// The example `ValkeyCluster` `cache` applied in a fresh namespace
/// `<prefix>-N`, its image the node's Valkey: returns the namespace once
/// its three pods are ready and the `-master` Service's one endpoint is
/// the master pod.
pub async fn valkey_cluster(c: &Cluster, prefix: &str) -> String {
    let client = c.client().await;
    let cr = std::fs::read_to_string("deploy/examples/minimal.yaml")
        .unwrap()
        .replace(
            "image: valkey/valkey:8.1",
            &format!("image: {}", c.images["valkey"]),
        );
    let ns = c.namespace(prefix).await;
    let started = Instant::now();
    kubectl(c, &["apply", "-n", &ns, "-f", "-"], &cr);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    eventually("three Valkey pods ready", 180 * SECOND, || {
        let pods = pods.clone();
        async move {
            (ready_pods(&pods, "app.kubernetes.io/instance=cache")
                .await
                .len()
                == 3)
                .then_some(())
        }
    })
    .await;
    let master_ip = eventually("the -master Service's one endpoint", 60 * SECOND, || {
        let (client, pods) = (client.clone(), pods.clone());
        async move {
            let ips = master_endpoints(&client, pods.namespace()?).await?;
            let masters = ready_pods(&pods, "valkyrie.io/role=master").await;
            let master = pods.get(masters.first()?).await.ok()?;
            let ip = master.status?.pod_ip?;
            (masters.len() == 1 && ips == [ip.clone()]).then_some(ip)
        }
    })
    .await;
    println!(
        "ValkeyCluster ready, -master at {master_ip}, in {:?}",
        started.elapsed()
    );
    ns
}

/// The ready addresses of the `cache-master` Service's EndpointSlices.
pub async fn master_endpoints(client: &::kube::Client, ns: &str) -> Option<Vec<String>> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let list = slices
        .list(&::kube::api::ListParams::default().labels("kubernetes.io/service-name=cache-master"))
        .await
        .ok()?;
    Some(
        list.items
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .flat_map(|e| e.addresses.clone())
            .collect(),
    )
}

/// The `password` of Secret `ns/name`.
pub async fn password(c: &Cluster, ns: &str, name: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(c.client().await, ns);
    let secret = secrets.get(name).await.unwrap();
    String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap()
}
