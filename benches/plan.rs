//! Planned switchovers across 30 groups under writes, side by side: one
//! Valkyrie running one plan (`POST /api/v1/plans`, `{"match": ["g*"],
//! "concurrency": 3}`) against three real valkey-sentinels (quorum 2)
//! driven as an operator's script would: `SENTINEL FAILOVER gNN` with at
//! most 3 groups in flight, in name order, each done once the sentinel
//! advertises another master. Each system gets fresh servers: 30 groups
//! `g00`..`g29`, each a master and one replica, on loopback.
//!
//! One writer per group asks the monitor's Sentinel port for the master
//! (`SENTINEL GET-MASTER-ADDR-BY-NAME gNN`, again after each failed
//! write), writes `SET w<i> <i>` every 3 ms and counts a write once the
//! server answers `+OK` ([`Writer`]). Once every writer has acknowledged
//! writes on its master, the switchovers are asked; when they are done,
//! the writers go on until each has acknowledged writes on its new master
//! (bounded), then stop. Measured per group:
//!
//! - **stall at the switchover**: the gap between the last write the old
//!   master acknowledged and the first the new one did;
//! - **longest gap**: the longest gap between two acknowledged writes of
//!   the whole run;
//! - **lost**: acknowledged writes the final master does not hold;
//!
//! and per run the **duration**: the first request to the last group done
//! (Valkyrie: the plan report's `submitted_ms` → `finished_ms`; Sentinel:
//! the first `SENTINEL FAILOVER` → the last group advertising its new
//! master, polled every 5 ms). Also printed: when the last old master
//! reported `role:slave` (polled every 100 ms), and each group's request
//! → new master advertised.
//!
//! Run: `cargo bench --bench plan` (needs valkey-server and
//! valkey-sentinel; `VALKYRIE_BENCH_TRIALS` sets N, default 1). Prints a
//! markdown table for docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::http::http;
use support::observe::{Writer, lost_writes, stalls};
use support::sentinel::RealSentinel;
use support::*;
use valkyrie::config::GroupConfig;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

const GROUPS: usize = 30;
const CONCURRENCY: usize = 3;
const TOKEN: &str = "plan-bench-token-0123456789";
/// The writers' pause between two writes.
const PAUSE: Duration = Duration::from_millis(3);
/// Writes each writer must have acknowledged on a master before the
/// switchovers are asked, and on the new one before it stops.
const SOME_WRITES: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq)]
enum System {
    Valkyrie,
    Sentinel,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::Valkyrie => "Valkyrie, one plan",
            System::Sentinel => "valkey-sentinel 8.0.1, operator's loop",
        }
    }
}

/// One group's figures.
struct Group {
    at_switch: Duration,
    longest: Duration,
    lost: usize,
    acked: usize,
    switched: bool,
}

struct Trial {
    groups: Vec<Group>,
    /// First request → last group done.
    duration: Duration,
    /// The same on this process's clock (Valkyrie: observed by polling
    /// the plans list every 20 ms).
    own_clock: Duration,
    /// Each group's request → its new master advertised.
    took: Vec<Duration>,
    /// First request → the last old master reporting `role:slave`.
    demoted_by: Option<Duration>,
    notes: Vec<String>,
}

/// The port `sentinel_port` advertises as `name`'s master.
fn advertised(sentinel_port: u16, name: &str) -> Option<u16> {
    let mut c = Client::connect_timeout(sentinel_port, Duration::from_millis(500)).ok()?;
    advertised_on(&mut c, name)
}

fn advertised_on(c: &mut Client, name: &str) -> Option<u16> {
    match c
        .call(&["SENTINEL", "get-master-addr-by-name", name])
        .ok()?
    {
        Frame::Array(v) if v.len() == 2 => String::from_utf8_lossy(v[1].as_bytes()?).parse().ok(),
        _ => None,
    }
}

fn text(f: &Frame) -> String {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_else(|| format!("{f:?}"))
}

/// 30 masters with one replica each, returned once every replica's link
/// is up.
fn fleet(bin: &Path, dir: &Path) -> Vec<(Server, Server)> {
    let pairs: Vec<(Server, Server)> = (0..GROUPS)
        .map(|_| {
            let m = Server::start(bin, dir, free_port(), None);
            let r = Server::start(bin, dir, free_port(), Some(m.port));
            (m, r)
        })
        .collect();
    wait_until(Duration::from_secs(30), || {
        pairs
            .iter()
            .all(|(_, r)| info_field(r.port, "master_link_status").as_deref() == Some("up"))
    });
    pairs
}

fn names() -> Vec<String> {
    (0..GROUPS).map(|i| format!("g{i:02}")).collect()
}

/// Polls every old master's role every 100 ms; records when each first
/// reports `role:slave`.
struct Demotions {
    at: Arc<Mutex<Vec<Option<Instant>>>>,
    running: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Demotions {
    fn watch(ports: Vec<u16>) -> Demotions {
        let at = Arc::new(Mutex::new(vec![None; ports.len()]));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (at, running) = (at.clone(), running.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    for (k, p) in ports.iter().enumerate() {
                        if at.lock().unwrap()[k].is_none()
                            && info_field(*p, "role").as_deref() == Some("slave")
                        {
                            at.lock().unwrap()[k] = Some(Instant::now());
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Demotions {
            at,
            running,
            thread: Some(thread),
        }
    }

    fn all(&self) -> Vec<Option<Instant>> {
        self.at.lock().unwrap().clone()
    }
}

impl Drop for Demotions {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One writer per group, following the master `monitor` advertises;
/// returned once each has acknowledged some writes on `before`.
fn start_writers(monitor: u16, names: &[String], before: &[u16]) -> Vec<Writer> {
    let writers: Vec<Writer> = names
        .iter()
        .map(|n| {
            let n = n.clone();
            Writer::start(PAUSE, move || advertised(monitor, &n))
        })
        .collect();
    wait_until(Duration::from_secs(30), || {
        writers
            .iter()
            .zip(before)
            .all(|(w, p)| w.acked_on(*p) > SOME_WRITES)
    });
    writers
}

/// Lets the writers go on until each has acknowledged some writes on the
/// master `monitor` now advertises (at most 60 s), stops them, and
/// measures each group.
fn settle(
    monitor: u16,
    names: &[String],
    before: &[u16],
    writers: Vec<Writer>,
    notes: &mut Vec<String>,
) -> Vec<Group> {
    let after: Vec<u16> = names
        .iter()
        .zip(before)
        .map(|(n, b)| advertised(monitor, n).unwrap_or(*b))
        .collect();
    let start = Instant::now();
    while !writers
        .iter()
        .zip(&after)
        .all(|(w, p)| w.acked_on(*p) > SOME_WRITES)
    {
        if start.elapsed() > Duration::from_secs(60) {
            let behind: Vec<&str> = writers
                .iter()
                .zip(&after)
                .zip(names)
                .filter(|((w, p), _)| w.acked_on(**p) <= SOME_WRITES)
                .map(|(_, n)| n.as_str())
                .collect();
            notes.push(format!(
                "writers not yet on their new master after 60 s: {behind:?}"
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    notes.push(format!(
        "writers on every new master {} ms after the last group was done",
        start.elapsed().as_millis()
    ));
    writers
        .into_iter()
        .zip(before.iter().zip(&after))
        .map(|(w, (old, new))| {
            let acked = w.stop_timed();
            let plain: Vec<(u64, u16)> = acked.iter().map(|(i, p, _)| (*i, *p)).collect();
            let (at_switch, longest) = stalls(&acked);
            Group {
                at_switch,
                longest,
                lost: lost_writes(&plain, *new),
                acked: acked.len(),
                switched: old != new,
            }
        })
        .collect()
}

fn demoted_by(d: &Demotions, t0: Instant, notes: &mut Vec<String>) -> Option<Duration> {
    let all = d.all();
    let missing = all.iter().filter(|a| a.is_none()).count();
    if missing > 0 {
        notes.push(format!(
            "{missing} old master(s) still role:master at the end"
        ));
        return None;
    }
    all.iter()
        .flatten()
        .map(|at| at.saturating_duration_since(t0))
        .max()
}

fn post(admin: u16, path: &str, body: &str) -> (u16, Value) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (code, text) = http(admin, &request).unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn plan_report(admin: u16, id: u64) -> Value {
    let request = format!(
        "GET /api/v1/plans HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    let (code, text) = http(admin, &request).unwrap();
    assert_eq!(code, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

/// `VALKYRIE_BENCH_SAMPLE=<ms>`: every 20 ms during the plan, each node's
/// `INFO replication` offsets, to see where a slow catch-up waits (the
/// replica not receiving, or receiving and not applying). Printed for the
/// groups whose stall exceeded `<ms>`.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Vec<String>>>>,
}

impl Sampler {
    fn start(pairs: &[(u16, u16)], t0: Instant) -> Option<Sampler> {
        std::env::var("VALKYRIE_BENCH_SAMPLE").ok()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (s, pairs) = (stop.clone(), pairs.to_vec());
        let thread = std::thread::spawn(move || {
            let mut lines = vec![Vec::new(); pairs.len()];
            let mut clients: Vec<(Option<Client>, Option<Client>)> =
                pairs.iter().map(|_| (None, None)).collect();
            while !s.load(Ordering::Relaxed) {
                let at = t0.elapsed().as_millis();
                for (i, (a, b)) in pairs.iter().enumerate() {
                    let one = |c: &mut Option<Client>, port: u16| -> String {
                        if c.is_none() {
                            *c = Client::connect(port).ok();
                        }
                        let Some(conn) = c.as_mut() else {
                            return format!("{port}: -");
                        };
                        let Ok(reply) = conn.call(&["INFO", "replication"]) else {
                            *c = None;
                            return format!("{port}: -");
                        };
                        let text = reply
                            .as_bytes()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_default();
                        let field = |f: &str| {
                            text.lines()
                                .find_map(|l| {
                                    l.strip_prefix(&format!("{f}:"))
                                        .map(|v| v.trim().to_owned())
                                })
                                .unwrap_or_default()
                        };
                        format!(
                            "{port} {} off {} read {} applied {} link {} io {}",
                            field("role"),
                            field("master_repl_offset"),
                            field("slave_read_repl_offset"),
                            field("slave_repl_offset"),
                            field("master_link_status"),
                            field("master_last_io_seconds_ago"),
                        )
                    };
                    let (ca, cb) = &mut clients[i];
                    let line = format!("{at} ms: {} | {}", one(ca, *a), one(cb, *b));
                    lines[i].push(line);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            lines
        });
        Some(Sampler {
            stop,
            thread: Some(thread),
        })
    }

    fn finish(mut self) -> Vec<Vec<String>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default()
    }
}

fn valkyrie_trial() -> Trial {
    let bin = valkey_server();
    let tmp = TempDir::new("bench-plan-valkyrie");
    let pairs = fleet(&bin, &tmp.0);
    let names = names();
    let before: Vec<u16> = pairs.iter().map(|(m, _)| m.port).collect();
    let groups = names
        .iter()
        .zip(&before)
        .map(|(n, m)| {
            let mut g = GroupConfig::new(n, "127.0.0.1", *m, 1);
            g.down_after = Duration::from_millis(1000);
            g.failover_timeout = Duration::from_millis(10_000);
            g
        })
        .collect();
    let mut cfg = daemon_config(&tmp.0.join("v"), groups);
    std::fs::create_dir_all(&cfg.dir).unwrap();
    cfg.admin_port = free_port();
    let token = tmp.0.join("token");
    std::fs::write(&token, TOKEN).unwrap();
    cfg.admin_auth_token_file = Some(token);
    let admin = cfg.admin_port;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = rt.block_on(Daemon::start(cfg)).unwrap();
    let h = d.handle.clone();
    wait_until(Duration::from_secs(30), || {
        let t = h.topology.borrow().clone();
        names.iter().all(|n| {
            t.groups.get(n).is_some_and(|g| {
                g.replicas.len() == 1 && g.replicas.iter().all(|r| !r.run_id.is_empty())
            }) && t.readiness.get(n).is_some_and(|v| v.readiness.ready)
        })
    });
    let monitor = d.sentinel_addrs[0].port();
    let writers = start_writers(monitor, &names, &before);
    let demotions = Demotions::watch(before.clone());
    let mut notes = Vec::new();

    let t0 = Instant::now();
    let ports: Vec<(u16, u16)> = pairs.iter().map(|(m, r)| (m.port, r.port)).collect();
    let sampler = Sampler::start(&ports, t0);
    let (code, made) = post(
        admin,
        "/api/v1/plans",
        &format!(r#"{{"match": ["g*"], "concurrency": {CONCURRENCY}}}"#),
    );
    assert_eq!(code, 201, "{made}");
    let id = made["id"].as_u64().unwrap();
    let mut report = Value::Null;
    wait_until(Duration::from_secs(180), || {
        report = plan_report(admin, id);
        !report["finished_ms"].is_null()
    });
    let own_clock = t0.elapsed();
    if report["state"] != "completed" {
        notes.push(format!(
            "plan ended {}: {}",
            report["state"], report["stopped"]
        ));
    }
    let duration = Duration::from_millis(
        report["finished_ms"].as_u64().unwrap() - report["submitted_ms"].as_u64().unwrap(),
    );
    let took = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["took_ms"].as_u64())
        .map(Duration::from_millis)
        .collect();
    let samples = sampler.map(Sampler::finish);
    let groups = settle(monitor, &names, &before, writers, &mut notes);
    if let Some(samples) = samples {
        let above = std::env::var("VALKYRIE_BENCH_SAMPLE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        for (i, g) in groups.iter().enumerate() {
            if g.at_switch > Duration::from_millis(above) {
                eprintln!("--- {} stalled {}:", names[i], ms(g.at_switch));
                for line in &samples[i] {
                    eprintln!("  {line}");
                }
            }
        }
    }
    let demoted_by = demoted_by(&demotions, t0, &mut notes);
    drop(demotions);
    rt.block_on(d.stop()).unwrap();
    drop(pairs);
    Trial {
        groups,
        duration,
        own_clock,
        took,
        demoted_by,
        notes,
    }
}

/// `SENTINEL MASTERS` on `port` lists every group with its replica and
/// the two other sentinels, none down or failing over.
fn sentinel_ready(port: u16) -> bool {
    support::sentinel::masters_settled(port, GROUPS, 1, 2)
}

/// What the operator's loop holds for one group.
struct Asked {
    group: usize,
    first: Instant,
    /// When `SENTINEL FAILOVER` was last sent.
    last: Option<Instant>,
    /// The last `SENTINEL FAILOVER` was refused: ask again.
    refused: bool,
}

fn sentinel_trial() -> Trial {
    let bin = valkey_server();
    let tmp = TempDir::new("bench-plan-sentinel");
    let pairs = fleet(&bin, &tmp.0);
    let names = names();
    let before: Vec<u16> = pairs.iter().map(|(m, _)| m.port).collect();
    let monitors: String = names
        .iter()
        .zip(&before)
        .map(|(n, m)| {
            format!(
                "sentinel monitor {n} 127.0.0.1 {m} 2\n\
                 sentinel down-after-milliseconds {n} 1000\n\
                 sentinel failover-timeout {n} 10000\n\
                 sentinel parallel-syncs {n} 1\n"
            )
        })
        .collect();
    let sentinels: Vec<RealSentinel> = (0..3)
        .map(|i| {
            let own = tmp.0.join(format!("sentinel-{i}"));
            std::fs::create_dir_all(&own).unwrap();
            RealSentinel::start(
                &own,
                &format!("logfile {}\n{monitors}", own.join("sentinel.log").display()),
            )
        })
        .collect();
    wait_until(Duration::from_secs(60), || {
        sentinels.iter().all(|s| sentinel_ready(s.port))
    });
    // Every sentinel must have the replicas' INFO before it is asked.
    std::thread::sleep(Duration::from_millis(2_000));
    let monitor = sentinels[0].port;
    let writers = start_writers(monitor, &names, &before);
    let demotions = Demotions::watch(before.clone());
    let mut notes = Vec::new();

    // The operator's script: at most CONCURRENCY groups in flight, in
    // name order, each done once the sentinel advertises another master.
    let limit = Duration::from_secs(30);
    let mut op: Option<Client> = None;
    let mut ask = |args: &[&str]| -> Result<Frame, String> {
        if op.is_none() {
            op = Some(Client::connect(monitor)?);
        }
        let r = op.as_mut().unwrap().call(args);
        if r.is_err() {
            op = None;
        }
        r
    };
    let mut took = Vec::new();
    let mut in_flight: Vec<Asked> = Vec::new();
    let mut next = 0;
    let mut refusals = Vec::new();
    let t0 = Instant::now();
    let mut last_done = t0;
    while next < GROUPS || !in_flight.is_empty() {
        while in_flight.len() < CONCURRENCY && next < GROUPS {
            in_flight.push(Asked {
                group: next,
                first: Instant::now(),
                last: None,
                refused: true,
            });
            next += 1;
        }
        for a in &mut in_flight {
            if a.refused
                && a.last
                    .is_none_or(|l| l.elapsed() > Duration::from_millis(200))
            {
                a.last = Some(Instant::now());
                match ask(&["SENTINEL", "FAILOVER", &names[a.group]]) {
                    Ok(Frame::Simple(_)) => a.refused = false,
                    other => refusals.push(format!("{}: {other:?}", names[a.group])),
                }
            }
        }
        in_flight.retain(|a| {
            let name = &names[a.group];
            let now = match ask(&["SENTINEL", "get-master-addr-by-name", name]) {
                Ok(Frame::Array(v)) if v.len() == 2 => text(&v[1]).parse::<u16>().ok(),
                _ => None,
            };
            if now.is_some_and(|p| p != before[a.group]) {
                last_done = Instant::now();
                took.push(a.first.elapsed());
                false
            } else if a.first.elapsed() > limit {
                notes.push(format!("{name}: no new master within {limit:?}"));
                false
            } else {
                true
            }
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    let duration = last_done.duration_since(t0);
    if !refusals.is_empty() {
        notes.push(format!(
            "SENTINEL FAILOVER refused {} time(s), first: {}",
            refusals.len(),
            refusals[0]
        ));
    }
    let groups = settle(monitor, &names, &before, writers, &mut notes);
    let demoted_by = demoted_by(&demotions, t0, &mut notes);
    drop(demotions);
    drop(sentinels);
    drop(pairs);
    Trial {
        groups,
        duration,
        own_clock: duration,
        took,
        demoted_by,
        notes,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    let n = d.as_millis();
    if n >= 10_000 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{n} ms")
    }
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without --bench, in
    // a debug build: timings would mean nothing there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("plan bench: not run under `cargo test` (use `cargo bench --bench plan`)");
        return;
    }
    let n: usize = std::env::var("VALKYRIE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    // Valkyrie's warnings on stderr, each switchover's timeline among
    // them (where its write stall went).
    valkyrie::telemetry::init_logging("warning", false);
    let mut results: Vec<(System, Vec<Trial>)> = vec![
        (System::Valkyrie, Vec::new()),
        (System::Sentinel, Vec::new()),
    ];
    for k in 0..n {
        for (system, trials) in &mut results {
            let started = Instant::now();
            eprintln!("trial {k}: {system:?}…");
            let t = match system {
                System::Valkyrie => valkyrie_trial(),
                System::Sentinel => sentinel_trial(),
            };
            eprintln!(
                "trial {k}: {system:?} done in {:.0} s",
                started.elapsed().as_secs_f64()
            );
            trials.push(t);
        }
    }
    println!(
        "| system | stall at the switchover, median (min–max) over {GROUPS}×{n} groups | longest gap, median / max | acknowledged writes lost / acknowledged | first request → last group done, median (min–max) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let mut details = Vec::new();
    for (system, trials) in &results {
        let groups: Vec<&Group> = trials.iter().flat_map(|t| &t.groups).collect();
        let stalls: Vec<Duration> = groups.iter().map(|g| g.at_switch).collect();
        let longest: Vec<Duration> = groups.iter().map(|g| g.longest).collect();
        let lost: usize = groups.iter().map(|g| g.lost).sum();
        let acked: usize = groups.iter().map(|g| g.acked).sum();
        let durations: Vec<Duration> = trials.iter().map(|t| t.duration).collect();
        println!(
            "| {} | {} ({}–{}) | {} / {} | {lost} / {acked} | {} ({}–{}) |",
            system.label(),
            ms(median(stalls.clone())),
            ms(*stalls.iter().min().unwrap()),
            ms(*stalls.iter().max().unwrap()),
            ms(median(longest.clone())),
            ms(*longest.iter().max().unwrap()),
            ms(median(durations.clone())),
            ms(*durations.iter().min().unwrap()),
            ms(*durations.iter().max().unwrap()),
        );
        for (k, t) in trials.iter().enumerate() {
            let switched = t.groups.iter().filter(|g| g.switched).count();
            let lost_groups = t.groups.iter().filter(|g| g.lost > 0).count();
            let mut line = format!(
                "{system:?} trial {k}: {switched}/{GROUPS} switched; duration {} (own clock {}); \
                 request → new master per group median {}, max {}; last old master demoted {}; \
                 lost {} / {} in {lost_groups} group(s)",
                ms(t.duration),
                ms(t.own_clock),
                if t.took.is_empty() {
                    "-".to_string()
                } else {
                    ms(median(t.took.clone()))
                },
                t.took
                    .iter()
                    .max()
                    .map_or_else(|| "-".to_string(), |d| ms(*d)),
                t.demoted_by
                    .map_or_else(|| "never".to_string(), |d| format!("at {}", ms(d))),
                t.groups.iter().map(|g| g.lost).sum::<usize>(),
                t.groups.iter().map(|g| g.acked).sum::<usize>(),
            );
            let mut stalls: Vec<u128> = t.groups.iter().map(|g| g.at_switch.as_millis()).collect();
            stalls.sort_unstable();
            line.push_str(&format!(
                "; stalls at the switchover (ms, sorted): {stalls:?}"
            ));
            // In plan order: which groups stalled longest (the first
            // ones, started together; or a late one).
            let ordered: Vec<u128> = t.groups.iter().map(|g| g.at_switch.as_millis()).collect();
            line.push_str(&format!("; in plan order: {ordered:?}"));
            for note in &t.notes {
                line.push_str("; ");
                line.push_str(note);
            }
            details.push(line);
        }
    }
    println!();
    for l in details {
        println!("{l}");
    }
}
