//! Faults on the real node with writers running, Valkyrie beside the
//! usual Sentinel layout in the same cluster.
//!
//! Valkyrie is installed from `deploy/` with the example `ValkeyCluster`;
//! two writers (`writer.rs`) push numbers to its master, one through the
//! `-master` Service, one through the Sentinel port's Service. Then, one
//! at a time, each fault, and the cluster let settle between them:
//! - the master pod deleted (`kubectl delete pod`): Valkyrie switches
//!   over before the pod stops (an event says so);
//! - the master's container killed (SIGKILL, as a crash or the OOM
//!   killer; the kubelet restarts it);
//! - the kubelet killed with the master's container, as when a node dies:
//!   nothing restarts it until the kubelet is started again;
//! - the Valkyrie pod holding the reconciler's Lease deleted.
//!
//! For each, per writer: how long after the fault writes were
//! acknowledged again for good, how many attempts failed, and how many
//! acknowledged writes the master's list does not hold once it settled.
//! Settled means: every pod ready, every monitor naming one master, every
//! other pod its replica with the link up; for Valkyrie also the role
//! labels, the `-master` Service's one endpoint and the CR's status. So
//! the old master's pod, recreated or restarted, is back as a replica.
//!
//! Then the Sentinel layout (`classic.rs`) under the same faults, with a
//! writer through its sentinels' Service (it has no Service that follows
//! the master), the fourth fault being one sentinel killed. Valkyrie must
//! lose no acknowledged write; the Sentinel layout is measured, not
//! judged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ::kube::api::Api;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;

use super::classic;
use super::groups::{Group, print_valkyrie_logs};
use super::settle::{settle, valkey};
use super::setup::{SECOND, install_valkyrie, kubectl, valkey_cluster};
use super::writer::Writer;
use crate::support::cluster::Cluster;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    DeleteMasterPod,
    KillMasterContainer,
    KillKubeletAndMaster,
    /// Valkyrie: the Lease holder's pod deleted; the Sentinel layout: one
    /// sentinel (not the master pod's) killed.
    LoseAMonitor,
}

impl Fault {
    const ALL: [Fault; 4] = [
        Fault::DeleteMasterPod,
        Fault::KillMasterContainer,
        Fault::KillKubeletAndMaster,
        Fault::LoseAMonitor,
    ];

    fn hits_master(self) -> bool {
        self != Fault::LoseAMonitor
    }
}

/// One fault's figures for one writer.
struct Row {
    layout: &'static str,
    fault: Fault,
    route: String,
    /// From the fault to the first acknowledgement after the last failure.
    recovery: Option<Duration>,
    failed: usize,
    lost: usize,
    /// The first few lost, with when they were acknowledged (from t0).
    lost_sample: Vec<(u64, f64)>,
    moved: bool,
    /// The first failures, with when they happened (from t0).
    failure_sample: Vec<(f64, String)>,
    /// For a deleted master pod: whether its Valkey was seen a replica
    /// before it stopped answering.
    handed_over: Option<bool>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkyrie_and_the_sentinel_layout_under_pod_faults() {
    let mut c = Cluster::start().await;
    install_valkyrie(&c).await;
    let ns = valkey_cluster(&c, "shop").await;
    let group = Group::valkyrie(&c, ns).await;
    let writers = group.writers(&c);
    let mut rows = Vec::new();
    for fault in Fault::ALL {
        match run_fault(&mut c, &group, &writers, fault).await {
            Ok(row) => rows.extend(row),
            Err(e) => {
                print_table(&rows);
                print_valkyrie_logs(&c, 80);
                panic!("Valkyrie, {fault:?}: {e}");
            }
        }
    }
    drop(writers);
    let valkyrie = rows.len();
    // The deleted master pod was switched over before it stopped.
    let reasons = group.event_reasons(&c).await;

    let ns = classic::install(&c).await;
    let group = Group::classic(ns);
    let writers = group.writers(&c);
    for fault in Fault::ALL {
        match run_fault(&mut c, &group, &writers, fault).await {
            Ok(row) => rows.extend(row),
            Err(e) => {
                println!("Sentinel layout, {fault:?}: {e}; its series stops here");
                break;
            }
        }
    }
    drop(writers);
    print_table(&rows);

    assert!(
        reasons.iter().any(|r| r == "SwitchoverBeforeDeletion")
            && !reasons.iter().any(|r| r == "SwitchoverRefused"),
        "the events: {reasons:?}"
    );
    for r in &rows[..valkyrie] {
        assert_eq!(
            r.lost, 0,
            "{} lost acknowledged writes after {:?}: {:?}",
            r.route, r.fault, r.lost_sample
        );
        // A master gone, or back behind its replicas (the container
        // restarts from its last snapshot: the empty-restart guard), must
        // move; and only then.
        assert_eq!(
            r.moved,
            r.fault.hits_master(),
            "{:?}: the master moved",
            r.fault
        );
        // The deleted master pod's Valkey was a replica before it
        // stopped: the switchover came first.
        if r.fault == Fault::DeleteMasterPod {
            assert_eq!(r.handed_over, Some(true), "{}: no hand-over", r.route);
        }
    }
    let report = c.teardown();
    assert!(report.contains("left: nothing"), "{report}");
}

fn print_table(rows: &[Row]) {
    println!(
        "\n| layout | fault | writer | writes back after | failed attempts | acknowledged writes lost | master moved |"
    );
    println!("|---|---|---|---:|---:|---:|---|");
    for r in rows {
        println!(
            "| {} | {:?} | {} | {} | {} | {} | {} |",
            r.layout,
            r.fault,
            r.route,
            r.recovery
                .map_or("no failure".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            r.failed,
            r.lost,
            if r.moved { "yes" } else { "no" }
        );
        for (at, what) in &r.failure_sample {
            println!("  failed at {at:.3} s: {what}");
        }
        if r.lost > 0 {
            println!(
                "  lost (number, seconds after the fault): {:?}",
                r.lost_sample
            );
        }
    }
}

/// Puts `fault` on `group` with `writers` running, and measures. An error
/// when the group does not settle or writes do not come back in time.
async fn run_fault(
    c: &mut Cluster,
    group: &Group,
    writers: &[Writer],
    fault: Fault,
) -> Result<Vec<Row>, String> {
    let before = settle(c, group, 180 * SECOND).await?;
    let t0 = Instant::now();
    let acked_before: Vec<usize> = writers.iter().map(|w| w.read(|l| l.acked.len())).collect();
    let handed_over = inject(c, group, fault, &before).await;
    // Writes back for good: each writer failed after the fault (when the
    // fault hits the master), then 3 s of acknowledgements since.
    let deadline = Instant::now() + 120 * SECOND;
    loop {
        let back = writers.iter().all(|w| {
            w.read(|l| {
                let last_failure = l.failed.iter().rev().map(|f| f.0).find(|&t| t > t0);
                if fault.hits_master() && last_failure.is_none() {
                    return false;
                }
                let since = last_failure.unwrap_or(t0);
                since.elapsed() > 3 * SECOND && l.acked.last().is_some_and(|a| a.1 > since)
            })
        });
        if back {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("writes not back within 120 s of {fault:?}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if fault == Fault::KillKubeletAndMaster {
        c.restart_part("kubelet");
    }
    let after = settle(c, group, 180 * SECOND).await?;
    let mut rows = Vec::new();
    for (w, from) in writers.iter().zip(acked_before) {
        let (acked, failed, recovery, failure_sample) = w.read(|l| {
            let failures: Vec<Instant> = l.failed.iter().map(|f| f.0).filter(|&t| t > t0).collect();
            let recovery = failures.last().and_then(|&last| {
                l.acked[from..]
                    .iter()
                    .find(|a| a.1 > last)
                    .map(|a| a.1 - t0)
            });
            // Those acknowledged since the last fault's count.
            let failure_sample: Vec<(f64, String)> = l
                .failed
                .iter()
                .filter(|f| f.0 > t0)
                .take(6)
                .map(|f| (seconds_from(t0, f.0), f.1.chars().take(90).collect()))
                .collect();
            let acked: Vec<(u64, f64)> = l.acked
                [w.checked.swap(l.acked.len(), Ordering::Relaxed)..]
                .iter()
                .map(|a| (a.0, seconds_from(t0, a.1)))
                .collect();
            (acked, failures.len(), recovery, failure_sample)
        });
        let stored: BTreeSet<u64> = w.stored()?.into_iter().collect();
        let lost: Vec<(u64, f64)> = acked
            .iter()
            .filter(|a| !stored.contains(&a.0))
            .copied()
            .collect();
        rows.push(Row {
            layout: group.layout,
            fault,
            route: w.key.clone(),
            recovery,
            failed,
            lost: lost.len(),
            lost_sample: lost.into_iter().take(8).collect(),
            moved: after != before,
            handed_over,
            failure_sample,
        });
    }
    Ok(rows)
}

/// Puts `fault` on `group`, whose master pod is `master`. For a deleted
/// master pod: whether its Valkey became a replica before it stopped
/// answering (asked every 20 ms at its pod address, which lasts until
/// the pod is gone).
async fn inject(c: &mut Cluster, group: &Group, fault: Fault, master: &str) -> Option<bool> {
    let ns = &group.ns;
    match fault {
        Fault::DeleteMasterPod => {
            let pods: Api<Pod> = Api::namespaced(c.client().await, ns);
            let ip = pods
                .get(master)
                .await
                .unwrap()
                .status
                .unwrap()
                .pod_ip
                .unwrap();
            // Watched from before the deletion, every 5 ms: its time as
            // a replica can be short (the hook looks every 200 ms, then
            // SIGTERM). The demotion kills client connections: a closed
            // one is made again, and only a refused one ends the watch.
            let (dialer, password) = (c.net.dialer(), group.password.clone());
            let mut old = valkey(&dialer, &ip, &password).unwrap();
            let watch = std::thread::spawn(move || {
                let deadline = Instant::now() + 60 * SECOND;
                while Instant::now() < deadline {
                    let info = match old.call(&["INFO", "replication"]) {
                        Ok(info) => info,
                        Err(_) => match valkey(&dialer, &ip, &password) {
                            Ok(again) => {
                                old = again;
                                continue;
                            }
                            Err(_) => return false,
                        },
                    };
                    let text = info
                        .as_bytes()
                        .map(|b| String::from_utf8_lossy(b).into_owned());
                    if text.is_some_and(|t| t.contains("role:slave")) {
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                false
            });
            kubectl(c, &["delete", "pod", "-n", ns, master, "--wait=false"], "");
            let seen = tokio::task::spawn_blocking(move || watch.join().unwrap());
            return Some(seen.await.unwrap());
        }
        Fault::KillMasterContainer => {
            c.kill_container(ns, master, "valkey");
        }
        Fault::KillKubeletAndMaster => {
            c.kill_part("kubelet");
            c.kill_container(ns, master, "valkey");
        }
        Fault::LoseAMonitor if group.valkyrie => {
            let leases: Api<Lease> = Api::namespaced(c.client().await, "valkyrie");
            let lease = leases.get("valkyrie-leader").await.unwrap();
            let holder = lease.spec.unwrap().holder_identity.unwrap();
            let pod = (0..3)
                .map(|i| format!("valkyrie-{i}"))
                .find(|p| holder.starts_with(p.as_str()))
                .unwrap_or_else(|| panic!("no Valkyrie pod holds the Lease ({holder})"));
            kubectl(
                c,
                &["delete", "pod", "-n", "valkyrie", &pod, "--wait=false"],
                "",
            );
        }
        Fault::LoseAMonitor => {
            let other = (0..3)
                .map(|i| format!("classic-{i}"))
                .find(|p| p != master)
                .unwrap();
            c.kill_container(ns, &other, "sentinel");
        }
    }
    None
}

/// `at` in seconds after `t0` (negative before).
fn seconds_from(t0: Instant, at: Instant) -> f64 {
    if at >= t0 {
        (at - t0).as_secs_f64()
    } else {
        -(t0 - at).as_secs_f64()
    }
}
