//! Valkyrie installed on the real node as the README tells a user:
//! `kubectl apply` of every manifest in `deploy/` (with the image's local
//! name and a StorageClass of local volumes, which a bare cluster lacks),
//! then the example `ValkeyCluster`. Three Valkyrie pods run, elect a
//! reconciler and peer with one another; the ValkeyCluster's StatefulSet
//! runs real valkey-server pods, the `-master` Service selects the master
//! pod, and a client pod discovers the master through the Sentinel port's
//! Service and writes through the `-master` Service.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use ::kube::api::Api;
use k8s_openapi::api::core::v1::Pod;

use super::setup::{SECOND, eventually, install_valkyrie, password, ready_pods, valkey_cluster};
use crate::support::cluster::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_and_a_valkey_cluster_run_on_a_real_node() {
    let c = Cluster::start().await;
    let client = c.client().await;

    // 1. kubectl apply -f deploy/: three Valkyries, ready and peered.
    install_valkyrie(&c).await;
    // 2. The example ValkeyCluster, its image the node's Valkey; the
    // -master Service selects the master pod, and only it.
    let ns = valkey_cluster(&c, "shop").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    // Every Valkyrie knows the two others for this group.
    let group = format!("{ns}.cache");
    let sentinel = "valkyrie.valkyrie.svc.cluster.local";
    eventually("each Valkyrie sees two peers", 60 * SECOND, || {
        let (c, ns, group) = (&c, ns.clone(), group.clone());
        async move {
            let mut all = true;
            for i in 0..3 {
                // The Valkyrie image has no client: ask from a Valkey pod.
                let host = format!("valkyrie-{i}.valkyrie-headless.valkyrie.svc.cluster.local");
                let peers = c
                    .exec(
                        &ns,
                        "cache-1",
                        &[
                            "valkey-cli",
                            "-h",
                            &host,
                            "-p",
                            "26379",
                            "SENTINEL",
                            "sentinels",
                            &group,
                        ],
                    )
                    .ok()?;
                all &= peers.lines().filter(|l| *l == "runid").count() == 2;
            }
            all.then_some(())
        }
    })
    .await;

    // 3. A client pod discovers the master through the Sentinel port's
    // Service and writes through the -master Service.
    let addr = c
        .exec(
            &ns,
            "cache-2",
            &[
                "valkey-cli",
                "-h",
                sentinel,
                "-p",
                "26379",
                "SENTINEL",
                "get-master-addr-by-name",
                &group,
            ],
        )
        .unwrap();
    let master_pod = ready_pods(&pods, "valkyrie.io/role=master").await.remove(0);
    assert_eq!(
        addr.lines().collect::<Vec<_>>(),
        [
            format!("{master_pod}.cache-headless.{ns}.svc.cluster.local").as_str(),
            "6379"
        ]
    );
    let password = password(&c, &ns, "cache-auth").await;
    let master_service = format!("cache-master.{ns}.svc.cluster.local");
    let auth = format!("REDISCLI_AUTH={password}");
    let set = c
        .exec(
            &ns,
            "cache-2",
            &[
                "env",
                &auth,
                "valkey-cli",
                "-h",
                &master_service,
                "SET",
                "written",
                "through-the-service",
            ],
        )
        .unwrap();
    assert_eq!(set.trim(), "OK");
    eventually("the write on a replica", 30 * SECOND, || {
        let (c, ns, auth) = (&c, ns.clone(), auth.clone());
        async move {
            let got = c
                .exec(
                    &ns,
                    "cache-1",
                    &["env", &auth, "valkey-cli", "GET", "written"],
                )
                .ok()?;
            (got.trim() == "through-the-service").then_some(())
        }
    })
    .await;

    let report = c.teardown();
    assert!(report.contains("left: nothing"), "{report}");
}
