//! Rolling operations on the real node with writers running, Valkyrie
//! beside the usual Sentinel layout in the same cluster (the groups,
//! writers and settle checks of `faults.rs`). One after the other, each
//! operation a user runs on a group in production:
//! - an update of the pods (Valkyrie: a `spec.config` change of the
//!   `ValkeyCluster`; the layout: a pod template change of its
//!   StatefulSet, rolled by the StatefulSet controller);
//! - a scale from 3 pods to 5;
//! - a scale from 5 back to 3 with the master on a removed ordinal (put
//!   there first by a switchover, the other pods' `replica-priority`
//!   raised);
//! - `kubectl delete pod` of the master;
//! - a drain, as far as one node allows: every pod evicted through the
//!   eviction API (the replicas first, the master last), one at a time as
//!   the PodDisruptionBudget lets it; while the first is away, every other
//!   pod's eviction must be refused (429).
//!
//! For each, per writer: acknowledged writes lost, the longest time
//! without an acknowledged write, failed attempts, and the promotions
//! (the master moves a monitor reports, asked every 100 ms). Valkyrie
//! must lose no acknowledged write and move the master exactly as the
//! operation asks; the layout is measured, not judged. The stalls are timings: printed and
//! recorded in docs/benchmarks.md, not asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ::kube::api::{Api, EvictParams, ListParams, PostParams};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use valkyrie_protocol::Frame;

use super::classic;
use super::groups::{Group, print_switchover_timelines, print_valkyrie_logs};
use super::settle::{settle, valkey};
use super::setup::{SECOND, install_valkyrie, kubectl, valkey_cluster};
use super::writer::Writer;
use crate::support::Client;
use crate::support::cluster::{Cluster, pod_ready};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Update,
    ScaleUp,
    ScaleDownFromMaster,
    DeleteMasterPod,
    Drain,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::Update,
        Op::ScaleUp,
        Op::ScaleDownFromMaster,
        Op::DeleteMasterPod,
        Op::Drain,
    ];

    /// The master moves it asks for (a drain's are counted as it goes).
    fn master_moves(self) -> u64 {
        match self {
            Op::ScaleUp => 0,
            _ => 1,
        }
    }
}

struct Row {
    layout: &'static str,
    op: Op,
    route: String,
    took: Duration,
    lost: usize,
    lost_sample: Vec<u64>,
    /// The longest time without an acknowledged write.
    stall: Duration,
    failed: usize,
    promotions: u64,
    /// The master moves the operation asks for (a drain: each eviction
    /// of the master's pod).
    moves: u64,
    /// For a drain: a second eviction was refused while a pod was away.
    budget_held: Option<bool>,
    /// The failed attempts in the longest stall (ms into it, what).
    stalled: Vec<(u128, String)>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_operations_beside_the_sentinel_layout() {
    let c = Cluster::start().await;
    install_valkyrie(&c).await;
    let ns = valkey_cluster(&c, "roll").await;
    let group = Group::valkyrie(&c, ns).await;
    let writers = group.writers(&c);
    let mut rows = Vec::new();
    for op in Op::ALL {
        match run_op(&c, &group, &writers, op).await {
            Ok(r) => rows.extend(r),
            Err(e) => {
                print_table(&rows);
                print_valkyrie_logs(&c, 60);
                panic!("Valkyrie, {op:?}: {e}");
            }
        }
    }
    drop(writers);
    // A move more than asked fails below; a master move that stalled
    // writes beyond the 100 ms goal is measured, not judged. Either way
    // the logs say why.
    let slow_move = |r: &Row| r.moves > 0 && r.stall > Duration::from_millis(100);
    if rows.iter().any(|r| r.promotions > r.moves || slow_move(r)) {
        print_valkyrie_logs(&c, 400);
        print_endpoint_trail(&c, &group.ns);
    }
    print_switchover_timelines(&c);
    let valkyrie = rows.len();
    let reasons = group.event_reasons(&c).await;

    let ns = classic::install(&c).await;
    let group = Group::classic(ns);
    let writers = group.writers(&c);
    for op in Op::ALL {
        match run_op(&c, &group, &writers, op).await {
            Ok(r) => rows.extend(r),
            Err(e) => {
                println!("Sentinel layout, {op:?}: {e}; its series stops here");
                break;
            }
        }
    }
    drop(writers);
    print_table(&rows);
    println!("Valkyrie's events: {reasons:?}");

    for want in [
        "UpdatingPod",
        "SwitchoverForUpdate",
        "SwitchoverBeforeDeletion",
    ] {
        assert!(reasons.contains(want), "no {want} event: {reasons:?}");
    }
    for refused in ["SwitchoverRefused", "UpdateStalled"] {
        assert!(!reasons.contains(refused), "a {refused} event: {reasons:?}");
    }
    for r in &rows[..valkyrie] {
        assert_eq!(
            r.lost, 0,
            "{} lost acknowledged writes in {:?}: {:?}",
            r.route, r.op, r.lost_sample
        );
        // Every move asked for happened, and no other (a drain's extra
        // moves in earlier runs were this test's own "dry-run" evictions,
        // real ones: `budget_holds`).
        assert_eq!(r.promotions, r.moves, "{:?}: promotions", r.op);
        if r.op == Op::Drain {
            assert_eq!(r.budget_held, Some(true), "the budget let two pods go");
        }
    }
    let report = c.teardown();
    assert!(report.contains("left: nothing"), "{report}");
}

fn print_table(rows: &[Row]) {
    println!(
        "\n| layout | operation | writer | took | acknowledged writes lost | longest stall | failed attempts | promotions |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:?} | {} | {:.0} s | {} | {} ms | {} | {} |",
            r.layout,
            r.op,
            r.route,
            r.took.as_secs_f64(),
            r.lost,
            r.stall.as_millis(),
            r.failed,
            r.promotions
        );
        if r.lost > 0 {
            println!("  lost (numbers): {:?}", r.lost_sample);
        }
        for (at, what) in &r.stalled {
            println!("  {at} ms into the stall: {what}");
        }
        if let Some(held) = r.budget_held {
            println!("  a second eviction refused while a pod was away: {held}");
        }
    }
}

/// Runs `op` on `group` with `writers` running, and measures.
async fn run_op(
    c: &Cluster,
    group: &Group,
    writers: &[Writer],
    op: Op,
) -> Result<Vec<Row>, String> {
    let master = settle(c, group, 180 * SECOND).await?;
    if op == Op::ScaleDownFromMaster {
        master_to_a_high_ordinal(c, group, &master).await?;
    }
    let moves = MasterMoves::watch(c, group);
    let t0 = Instant::now();
    let drained = perform(c, group, op).await?;
    settle(c, group, 300 * SECOND).await?;
    let took = t0.elapsed();
    let promotions = moves.count();
    let mut rows = Vec::new();
    for w in writers {
        let (acked, stall, failed, stalled) = w.read(|l| {
            let from = w.checked.swap(l.acked.len(), Ordering::Relaxed);
            let times: Vec<Instant> = l.acked[from.saturating_sub(1)..]
                .iter()
                .map(|a| a.1)
                .collect();
            let (stall_from, stall) = times
                .windows(2)
                .filter(|p| p[1] > t0)
                .map(|p| (p[0], p[1] - p[0]))
                .max_by_key(|p| p.1)
                .unwrap_or((t0, Duration::ZERO));
            let failed = l.failed.iter().filter(|f| f.0 > t0).count();
            // What the writer saw during its longest stall.
            let stalled: Vec<(u128, String)> = l
                .failed
                .iter()
                .filter(|f| f.0 > stall_from && f.0 < stall_from + stall)
                .take(6)
                .map(|f| {
                    (
                        (f.0 - stall_from).as_millis(),
                        f.1.chars().take(90).collect(),
                    )
                })
                .collect();
            let acked: Vec<u64> = l.acked[from..].iter().map(|a| a.0).collect();
            (acked, stall, failed, stalled)
        });
        let stored: BTreeSet<u64> = w.stored()?.into_iter().collect();
        let lost: Vec<u64> = acked.into_iter().filter(|n| !stored.contains(n)).collect();
        rows.push(Row {
            layout: group.layout,
            op,
            route: w.key.clone(),
            took,
            lost: lost.len(),
            lost_sample: lost.into_iter().take(8).collect(),
            stall,
            failed,
            promotions,
            moves: drained.as_ref().map_or(op.master_moves(), |d| d.masters),
            budget_held: drained.as_ref().map(|d| d.second_refused),
            stalled,
        });
    }
    if op == Op::ScaleDownFromMaster {
        set_priority(c, group, 100).await?;
    }
    Ok(rows)
}

/// Starts `op`, and waits for its own end (the settle check follows).
async fn perform(c: &Cluster, group: &Group, op: Op) -> Result<Option<Drained>, String> {
    let ns = group.ns.as_str();
    match op {
        Op::Update => {
            let before = revision(c, group).await?;
            let patch = if group.valkyrie {
                r#"{"spec":{"config":{"maxmemory-samples":"7"}}}"#
            } else {
                r#"{"spec":{"template":{"metadata":{"annotations":{"valkyrie.io/roll":"1"}}}}}"#
            };
            let kind = if group.valkyrie {
                "valkeycluster/cache"
            } else {
                "statefulset/classic"
            };
            kubectl(
                c,
                &["patch", kind, "-n", ns, "--type", "merge", "-p", patch],
                "",
            );
            every_pod_updated(c, group, &before).await?;
        }
        Op::ScaleUp | Op::ScaleDownFromMaster => {
            let pods = if op == Op::ScaleUp { 5 } else { 3 };
            scale(c, group, pods);
            group.pods.store(pods, Ordering::Relaxed);
        }
        Op::DeleteMasterPod => {
            let master = monitors_master_pod(c, group)?;
            let pods: Api<Pod> = Api::namespaced(c.client().await, ns);
            let uid = |p: Option<Pod>| p.and_then(|p| p.metadata.uid);
            let before = uid(pods.get_opt(&master).await.map_err(|e| e.to_string())?);
            kubectl(c, &["delete", "pod", "-n", ns, &master, "--wait=false"], "");
            // Settled only counts once the pod was replaced.
            let deadline = Instant::now() + 120 * SECOND;
            while uid(pods.get_opt(&master).await.map_err(|e| e.to_string())?) == before {
                if Instant::now() > deadline {
                    return Err(format!("{master} not replaced within 120 s"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Op::Drain => return drain(c, group).await.map(Some),
    }
    Ok(None)
}

fn scale(c: &Cluster, group: &Group, pods: usize) {
    let ns = group.ns.as_str();
    if group.valkyrie {
        let patch = format!(r#"{{"spec":{{"replicas":{pods}}}}}"#);
        kubectl(
            c,
            &[
                "patch",
                "valkeycluster/cache",
                "-n",
                ns,
                "--type",
                "merge",
                "-p",
                &patch,
            ],
            "",
        );
    } else {
        let replicas = format!("--replicas={pods}");
        kubectl(
            c,
            &["scale", "statefulset/classic", "-n", ns, &replicas],
            "",
        );
    }
}

/// The StatefulSet's update revision.
async fn revision(c: &Cluster, group: &Group) -> Result<String, String> {
    let sets: Api<StatefulSet> = Api::namespaced(c.client().await, &group.ns);
    let name = if group.valkyrie { "cache" } else { "classic" };
    let sts = sets.get(name).await.map_err(|e| e.to_string())?;
    Ok(sts
        .status
        .and_then(|s| s.update_revision)
        .unwrap_or_default())
}

/// Waits until the update revision is new and every pod runs it.
async fn every_pod_updated(c: &Cluster, group: &Group, before: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(c.client().await, &group.ns);
    let deadline = Instant::now() + 600 * SECOND;
    loop {
        let now = revision(c, group).await?;
        let list = pods
            .list(&ListParams::default().labels(group.selector))
            .await
            .map_err(|e| e.to_string())?;
        let updated = list.items.iter().all(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("controller-revision-hash"))
                == Some(&now)
                && pod_ready(p)
        });
        if now != before && updated && list.items.len() == group.pods.load(Ordering::Relaxed) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the pods are not all updated after 600 s".into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Evicts every pod through the eviction API, one at a time as the
/// budget allows (retried every second, as a drain does). What the
/// drain saw: whether a second eviction was refused while the first pod
/// was away, and how many evictions took the master's pod.
async fn drain(c: &Cluster, group: &Group) -> Result<Drained, String> {
    // The client's own retries would wait out a 429 (kube retries them).
    let pods: Api<Pod> = Api::namespaced(c.client_without_retries().await, &group.ns);
    let count = group.pods.load(Ordering::Relaxed);
    let set = if group.valkyrie { "cache" } else { "classic" };
    // The replicas first, the master last, as a careful operator drains:
    // one master move (a drain that took the master first would move it
    // onto a pod still to be evicted).
    let master = monitors_master_pod(c, group)?;
    let mut names: Vec<String> = (0..count).map(|i| format!("{set}-{i}")).collect();
    names.sort_by_key(|n| *n == master);
    let mut drained = Drained {
        second_refused: false,
        masters: 0,
    };
    for (i, name) in names.iter().enumerate() {
        let deadline = Instant::now() + 180 * SECOND;
        loop {
            let master = monitors_master_pod(c, group)?;
            match pods.evict(name, &EvictParams::default()).await {
                Ok(_) => {
                    println!("{}: {name} evicted", group.layout);
                    drained.masters += u64::from(master == *name);
                    break;
                }
                Err(::kube::Error::Api(s)) if s.code == 429 => {}
                Err(e) => return Err(format!("evict {name}: {e}")),
            }
            if Instant::now() > deadline {
                return Err(format!("{name} not evicted within 180 s"));
            }
            tokio::time::sleep(SECOND).await;
        }
        if i == 0 {
            drained.second_refused = budget_holds(&pods, name, &names).await?;
        }
    }
    Ok(drained)
}

/// While `away` (just evicted) is not back and Ready, every other pod's
/// eviction, asked every 200 ms as a dry run (the budget is checked, no
/// pod goes), must be refused. An answer counts only if `away` was away
/// both before it was asked and after it came. Whether at least one
/// counted, and all that counted were refused. The dry run is asked in
/// the query (`dryRun=All`): kube-rs 5 puts an eviction's delete options
/// in the body as `delete_options`, a field the API server ignores, so a
/// dry run asked there is a real eviction once the budget allows one
/// (which moved the master of earlier runs' drains once more). The other
/// pods' uids are compared afterwards, so that no answer evicted one.
async fn budget_holds(pods: &Api<Pod>, away: &str, names: &[String]) -> Result<bool, String> {
    let dry = EvictParams {
        post_options: PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        ..EvictParams::default()
    };
    let uids = |names: Vec<String>| async move {
        let mut out = Vec::new();
        for n in names {
            let pod = pods.get_opt(&n).await.map_err(|e| e.to_string())?;
            out.push((n, pod.and_then(|p| p.metadata.uid)));
        }
        Ok::<_, String>(out)
    };
    let others: Vec<String> = names.iter().filter(|n| *n != away).cloned().collect();
    let before = uids(others.clone()).await?;
    let counted = ask_while_away(pods, &dry, away, &others).await?;
    let after = uids(others).await?;
    if before != after {
        return Err(format!(
            "a dry-run eviction evicted a pod: {before:?} became {after:?}"
        ));
    }
    Ok(counted)
}

/// [`budget_holds`]' questions, until `away` is back.
async fn ask_while_away(
    pods: &Api<Pod>,
    dry: &EvictParams,
    away: &str,
    others: &[String],
) -> Result<bool, String> {
    let back = || async {
        pods.get_opt(away)
            .await
            .map_err(|e| e.to_string())
            .map(|p| p.is_some_and(|p| pod_ready(&p) && p.metadata.deletion_timestamp.is_none()))
    };
    let mut counted = 0;
    let deadline = Instant::now() + 120 * SECOND;
    loop {
        for other in others {
            if back().await? {
                println!("{counted} evictions refused while {away} was away");
                return Ok(counted > 0);
            }
            let asked = Instant::now();
            let answer = pods.evict(other, dry).await;
            if back().await? {
                continue;
            }
            counted += 1;
            if !matches!(answer, Err(::kube::Error::Api(ref s)) if s.code == 429) {
                return Err(format!(
                    "the budget would let {other} go while {away} is away ({:?} to answer): {answer:?}",
                    asked.elapsed()
                ));
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{away} not back within 120 s"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a drain saw.
struct Drained {
    second_refused: bool,
    /// Evictions of the master's pod.
    masters: u64,
}

/// Puts the master on ordinal 3 or 4: the others' `replica-priority`
/// raised (less preferred), then a switchover asked of the monitors.
async fn master_to_a_high_ordinal(c: &Cluster, group: &Group, master: &str) -> Result<(), String> {
    let ordinal = |pod: &str| pod.rsplit('-').next().and_then(|n| n.parse::<usize>().ok());
    if ordinal(master).is_some_and(|n| n >= 3) {
        return Ok(());
    }
    set_priority(c, group, 200).await?;
    // The monitors read priorities from the replicas' INFO, every 10 s.
    let deadline = Instant::now() + 60 * SECOND;
    while !priorities_seen(c, group, 200)? {
        if Instant::now() > deadline {
            return Err("the monitors did not see the new priorities in 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if group.valkyrie {
        // Valkyrie's Sentinel port takes no command that changes things
        // from outside the loopback without a password (protected mode):
        // the master's pod deleted is a switchover too.
        kubectl(
            c,
            &["delete", "pod", "-n", &group.ns, master, "--wait=false"],
            "",
        );
    } else {
        let mut s = monitor(c, group)?;
        let reply = s.call(&["SENTINEL", "FAILOVER", &group.master])?;
        if reply.is_error() {
            return Err(format!("SENTINEL FAILOVER: {reply:?}"));
        }
    }
    let deadline = Instant::now() + 120 * SECOND;
    loop {
        if let Ok(m) = settle(c, group, 10 * SECOND).await
            && ordinal(&m).is_some_and(|n| n >= 3)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the master did not move to ordinal 3 or 4".into());
        }
    }
}

/// `CONFIG SET replica-priority <p>` on pods 0 to 2.
async fn set_priority(c: &Cluster, group: &Group, priority: u32) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(c.client().await, &group.ns);
    for i in 0..3 {
        let set = if group.valkyrie { "cache" } else { "classic" };
        let pod = pods
            .get(&format!("{set}-{i}"))
            .await
            .map_err(|e| e.to_string())?;
        let ip = pod.status.and_then(|s| s.pod_ip).ok_or("no pod IP")?;
        let mut v = valkey(&c.net.dialer(), &ip, &group.password)?;
        v.call(&["CONFIG", "SET", "replica-priority", &priority.to_string()])?;
    }
    Ok(())
}

/// Whether the first monitor reports `priority` for every replica on
/// pods 0 to 2.
fn priorities_seen(c: &Cluster, group: &Group, priority: u32) -> Result<bool, String> {
    let reply = monitor(c, group)?.call(&["SENTINEL", "REPLICAS", &group.master])?;
    let Frame::Array(replicas) = reply else {
        return Err(format!("SENTINEL REPLICAS: {reply:?}"));
    };
    let set = if group.valkyrie { "cache" } else { "classic" };
    let low: Vec<String> = (0..3).map(|i| format!("{set}-{i}.")).collect();
    let want = priority.to_string();
    Ok(replicas.iter().all(|r| {
        let Frame::Array(kv) = r else { return false };
        let fields: Vec<String> = kv
            .iter()
            .filter_map(|f| f.as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        let get = |k: &str| fields.chunks(2).find(|p| p[0] == k).and_then(|p| p.get(1));
        let on_low = get("ip").is_some_and(|ip| low.iter().any(|l| ip.starts_with(l.as_str())));
        !on_low || get("slave-priority") == Some(&want)
    }))
}

/// A connection to the group's first monitor.
fn monitor(c: &Cluster, group: &Group) -> Result<Client, String> {
    let dialer = c.net.dialer();
    let ip = dialer.resolve(&group.monitors[0])?;
    let s = dialer
        .connect(format!("{ip}:26379").parse().unwrap(), 2 * SECOND)
        .map_err(|e| e.to_string())?;
    Client::over(s, 2 * SECOND)
}

/// The master's pod, as the first monitor names it.
fn monitors_master_pod(c: &Cluster, group: &Group) -> Result<String, String> {
    let reply = monitor(c, group)?.call(&["SENTINEL", "get-master-addr-by-name", &group.master])?;
    let Frame::Array(parts) = &reply else {
        return Err(format!("get-master-addr-by-name: {reply:?}"));
    };
    let host = parts
        .first()
        .and_then(|f| f.as_bytes())
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .ok_or("no address")?;
    Ok(host.split('.').next().unwrap_or("").to_string())
}

/// The master moves the first monitor reports, asked every 100 ms on a
/// thread of the test's until counted. (Not the config epoch: the
/// layout's sentinels restart with their pods and start again from 0.)
struct MasterMoves {
    moves: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MasterMoves {
    fn watch(c: &Cluster, group: &Group) -> MasterMoves {
        let (moves, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (dialer, host, name) = (
            c.net.dialer(),
            group.monitors[0].clone(),
            group.master.clone(),
        );
        let (m, s) = (moves.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut last: Option<String> = None;
            while !s.load(Ordering::Relaxed) {
                let named = dialer.resolve(&host).ok().and_then(|ip| {
                    let stream = dialer
                        .connect(format!("{ip}:26379").parse().ok()?, SECOND)
                        .ok()?;
                    let reply = Client::over(stream, SECOND)
                        .ok()?
                        .call(&["SENTINEL", "get-master-addr-by-name", &name])
                        .ok()?;
                    let Frame::Array(parts) = reply else {
                        return None;
                    };
                    let host = parts.first()?.as_bytes()?;
                    Some(String::from_utf8_lossy(host).split('.').next()?.to_owned())
                });
                if let Some(now) = named {
                    if last.as_ref().is_some_and(|l| *l != now) {
                        m.fetch_add(1, Ordering::Relaxed);
                    }
                    last = Some(now);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        MasterMoves {
            moves,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops watching; the moves seen.
    fn count(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.moves.load(Ordering::Relaxed)
    }
}

/// What moved the `-master` Service's endpoint, for a slow move: its
/// EndpointSlice (with the times of its writes) and what the
/// EndpointSlice controller and kube-proxy logged about endpoints.
fn print_endpoint_trail(c: &Cluster, ns: &str) {
    let out = c
        .kubectl()
        .args([
            "get",
            "endpointslices",
            "-n",
            ns,
            "-l",
            "kubernetes.io/service-name=cache-master",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .output()
        .unwrap();
    println!(
        "--- the -master EndpointSlice:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for part in ["kube-controller-manager", "kube-proxy"] {
        let log =
            std::fs::read_to_string(c.dir.join(format!("logs/{part}.log"))).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.to_ascii_lowercase().contains("endpoint") || l.contains("sync"))
            .collect();
        println!(
            "--- {part}, endpoint lines (last 60 of {}):\n{}",
            lines.len(),
            lines[lines.len().saturating_sub(60)..].join("\n")
        );
    }
}
