//! The usual Sentinel layout on Kubernetes, as the common Helm charts lay
//! it out, written here from Debian's packages (the node's Valkey image):
//! a StatefulSet `classic` of three pods, each a `valkey` container and a
//! `sentinel` container beside it; a headless Service that publishes
//! not-ready pods (the names must resolve while the pods start); and a
//! `classic-sentinel` Service in front of the sentinels, which clients
//! ask for the master. No Service follows the master. A
//! PodDisruptionBudget lets one pod go at a time, as those charts offer.
//!
//! At every start a container asks the sentinels for the master, and
//! takes pod 0 when none answers, as those charts do: `valkey` starts as
//! a replica of the master (or as the master), and `sentinel` writes its
//! config file to monitor it. Same timers as a `ValkeyCluster`'s
//! defaults: down-after 5 s, failover timeout 60 s, one parallel sync.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use super::setup::{SECOND, eventually, kubectl, ready_pods};
use crate::support::cluster::Cluster;

/// The master's name at the sentinels.
pub const MASTER: &str = "classic";
/// The Secret and its password.
pub const PASSWORD: &str = "classic-layout-password";

const START: &str = r#"set -eu
domain="classic-headless.$NAMESPACE.svc.cluster.local"
me="$(hostname).$domain"
master=""
for i in 1 2 3 4 5; do
  master=$(timeout 2 valkey-cli -h "classic-sentinel.$NAMESPACE.svc.cluster.local" -p 26379 \
    --raw SENTINEL get-master-addr-by-name classic 2>/dev/null | head -n1 || true)
  [ -n "$master" ] && break
  sleep 1
done
[ -n "$master" ] || master="classic-0.$domain"
echo "master: $master"
# The master's name resolves once its pod has an address.
until getent hosts "$master" >/dev/null; do sleep 1; done
if [ "$1" = sentinel ]; then
  cat > /data/sentinel.conf <<EOF
port 26379
dir /data
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $me
sentinel monitor classic $master 6379 2
sentinel down-after-milliseconds classic 5000
sentinel failover-timeout classic 60000
sentinel parallel-syncs classic 1
sentinel auth-pass classic $PASSWORD
EOF
  exec valkey-sentinel /data/sentinel.conf
fi
set -- --port 6379 --dir /data --protected-mode no --requirepass "$PASSWORD" \
  --masterauth "$PASSWORD" --replica-announce-ip "$me"
if [ "$master" != "$me" ]; then
  set -- "$@" --replicaof "$master" 6379
fi
exec valkey-server "$@"
"#;

/// The manifests (applied in a namespace of their own), from `image`.
fn manifests(image: &str) -> String {
    let script = START
        .lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    let container = |name: &str, port: u16, probe: &str| {
        format!(
            "      - name: {name}
        image: {image}
        command: [sh, /scripts/start.sh, {name}]
        env:
        - {{name: NAMESPACE, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
        - {{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: classic-auth, key: password}}}}}}
        ports: [{{containerPort: {port}, name: {name}}}]
        readinessProbe:
          exec: {{command: [sh, -c, '{probe}']}}
          periodSeconds: 2
        volumeMounts:
        - {{name: scripts, mountPath: /scripts}}
        - {{name: {name}-data, mountPath: /data}}
"
        )
    };
    format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: classic-auth}}
stringData: {{password: {PASSWORD}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: classic-scripts}}
data:
  start.sh: |
{script}
---
apiVersion: v1
kind: Service
metadata: {{name: classic-headless}}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {{app: classic}}
  ports: [{{name: valkey, port: 6379}}, {{name: sentinel, port: 26379}}]
---
apiVersion: v1
kind: Service
metadata: {{name: classic-sentinel}}
spec:
  selector: {{app: classic}}
  ports: [{{name: sentinel, port: 26379}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: classic}}
spec:
  maxUnavailable: 1
  selector: {{matchLabels: {{app: classic}}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: classic}}
spec:
  serviceName: classic-headless
  replicas: 3
  podManagementPolicy: Parallel
  selector: {{matchLabels: {{app: classic}}}}
  template:
    metadata: {{labels: {{app: classic}}}}
    spec:
      securityContext: {{runAsUser: 999, runAsGroup: 999, fsGroup: 999}}
      containers:
{}{}      volumes:
      - {{name: scripts, configMap: {{name: classic-scripts}}}}
      - {{name: valkey-data, emptyDir: {{}}}}
      - {{name: sentinel-data, emptyDir: {{}}}}
",
        container(
            "valkey",
            6379,
            "valkey-cli --no-auth-warning -a \"$PASSWORD\" ping | grep -q PONG",
        ),
        container("sentinel", 26379, "valkey-cli -p 26379 ping | grep -q PONG"),
    )
}

/// Applies the layout in a fresh namespace; returns it once the three
/// pods are ready and every sentinel knows the two others.
pub async fn install(c: &Cluster) -> String {
    let ns = c.namespace("classic").await;
    let started = tokio::time::Instant::now();
    kubectl(
        c,
        &["apply", "-n", &ns, "-f", "-"],
        &manifests(&c.images["valkey"]),
    );
    let pods: ::kube::api::Api<k8s_openapi::api::core::v1::Pod> =
        ::kube::api::Api::namespaced(c.client().await, &ns);
    eventually("three classic pods ready", 180 * SECOND, || {
        let pods = pods.clone();
        async move { (ready_pods(&pods, "app=classic").await.len() == 3).then_some(()) }
    })
    .await;
    eventually("each sentinel sees two others", 90 * SECOND, || {
        let ns = ns.clone();
        async move {
            for i in 0..3 {
                let pod = format!("classic-{i}");
                let out = c
                    .exec(
                        &ns,
                        &pod,
                        &["valkey-cli", "-p", "26379", "SENTINEL", "sentinels", MASTER],
                    )
                    .ok()?;
                (out.lines().filter(|l| *l == "runid").count() == 2).then_some(())?;
            }
            Some(())
        }
    })
    .await;
    println!("the Sentinel layout ready in {:?}", started.elapsed());
    ns
}
