//! Failover side by side: one Valkyrie, and three Valkyries as peers
//! (quorum 2), against three real valkey-sentinel processes (quorum 2) on
//! the same topology, same `down-after` (1000 ms).
//!
//! For each system and fault (SIGKILL, SIGSTOP of the master), N trials:
//! a writer asks the monitor for the master (`SENTINEL
//! get-master-addr-by-name`), writes `SET` + `WAIT 1 100` in a loop, and
//! follows the master when writes fail. Measured:
//!
//! - **write recovery**: fault → first acknowledged write on the new master;
//! - **demotion**: the old master back (restarted for SIGKILL, resumed for
//!   SIGSTOP) → it reports `role:slave`;
//! - **lost writes**: writes acknowledged by `WAIT` (≥ 1 replica) that the
//!   final master does not have.
//!
//! The writer gives each reply 250 ms, so a hung (stopped) master costs it
//! little and the figure measures the failover, not a client timeout.
//!
//! Run: `cargo bench --bench failover` (needs valkey-server and
//! valkey-sentinel; `VALKYRIE_BENCH_TRIALS` sets N, default 5). Prints a
//! markdown table for docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::observe::Writer;

use support::*;
use valkyrie::config::{Config, GroupConfig};
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

#[derive(Clone, Copy, Debug, PartialEq)]
enum System {
    /// One Valkyrie, the only authority.
    Valkyrie,
    /// Three Valkyries as peers, quorum 2: every promotion is elected.
    Valkyries3,
    /// Three valkey-sentinels, quorum 2.
    Sentinel,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Kill,
    Stop,
}

struct Trial {
    recovery: Duration,
    demotion: Option<Duration>,
    lost: usize,
    acked: usize,
    /// Peers only: the first `+try-failover` to `+elected-leader`, and the
    /// elections aborted (`-failover-abort-not-elected`) on the way.
    election: Option<(Duration, usize)>,
}

/// Every event of every daemon, with when it was seen.
type Seen = Arc<Mutex<Vec<(Instant, &'static str)>>>;

fn record_events(rt: &tokio::runtime::Runtime, daemons: &[Daemon]) -> Seen {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    for d in daemons {
        let mut rx = d.handle.events.subscribe();
        let seen = seen.clone();
        rt.spawn(async move {
            while let Ok(e) = rx.recv().await {
                seen.lock()
                    .unwrap()
                    .push((Instant::now(), e.channel.as_str()));
            }
        });
    }
    seen
}

/// The first `+try-failover` to the first `+elected-leader`, and the
/// aborted elections.
fn election_of(seen: &Seen) -> Option<(Duration, usize)> {
    let seen = seen.lock().unwrap();
    let tried = seen.iter().find(|(_, c)| *c == "+try-failover")?.0;
    let elected = seen.iter().find(|(_, c)| *c == "+elected-leader")?.0;
    let aborted = seen
        .iter()
        .filter(|(_, c)| *c == "-failover-abort-not-elected")
        .count();
    Some((elected.saturating_duration_since(tried), aborted))
}

/// Starts `n` Valkyries on `master`, each with its own state directory.
fn start_valkyries(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    master: u16,
    n: usize,
) -> Vec<Daemon> {
    (0..n)
        .map(|i| {
            let mut g = GroupConfig::new("mymaster", "127.0.0.1", master, 2);
            g.down_after = Duration::from_millis(1000);
            g.failover_timeout = Duration::from_millis(10_000);
            let own = dir.join(format!("valkyrie-{i}"));
            std::fs::create_dir_all(&own).unwrap();
            let cfg = Config {
                port: free_port(),
                admin_port: 0,
                index_port: 0,
                bind: vec!["127.0.0.1".into()],
                dir: own,
                groups: vec![g],
                ..Config::default()
            };
            rt.block_on(Daemon::start(cfg)).unwrap()
        })
        .collect()
}

fn trial(system: System, fault: Fault) -> Trial {
    let bin = valkey_server();
    let tmp = TempDir::new("bench-failover");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    let replicas = vec![r1, r2];

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut _sentinels = None;
    let mut daemons = Vec::new();
    let mut seen = None;
    let monitor = match system {
        System::Valkyrie | System::Valkyries3 => {
            let n = if system == System::Valkyrie { 1 } else { 3 };
            let ds = start_valkyries(&rt, &tmp.0, pm, n);
            let ports: Vec<u16> = ds.iter().map(|d| d.sentinel_addrs[0].port()).collect();
            for d in &ds {
                let h = d.handle.clone();
                wait_until(Duration::from_secs(10), || {
                    h.topology.borrow().groups["mymaster"].replicas.len() == 2
                });
            }
            if n > 1 {
                wait_discovered(&ports, Duration::from_secs(30));
            }
            // Let INFO from both replicas arrive, and (peers) the stale
            // window after start pass.
            std::thread::sleep(Duration::from_millis(if n > 1 { 8_500 } else { 1_500 }));
            if n > 1 {
                seen = Some(record_events(&rt, &ds));
            }
            daemons = ds;
            ports[0]
        }
        System::Sentinel => {
            let s = support::sentinel::three_sentinels(&tmp.0, pm);
            let port = s[0].port;
            _sentinels = Some(s);
            port
        }
    };

    // The writer.
    let writer =
        Writer::start_replicated(Duration::from_millis(5), move || advertised_master(monitor));
    std::thread::sleep(Duration::from_millis(500));

    let t0 = Instant::now();
    match fault {
        Fault::Kill => master.kill(),
        Fault::Stop => master.signal("STOP"),
    }
    // Recovery: first acknowledged write on another master.
    let recovery = loop {
        if let Some(at) = writer.first_elsewhere(pm, t0) {
            break at - t0;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{system:?} never recovered"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    // Demotion of the returning old master.
    let back = Instant::now();
    match fault {
        Fault::Kill => master.restart_empty(),
        Fault::Stop => master.signal("CONT"),
    }
    let mut demotion = None;
    while back.elapsed() < Duration::from_secs(30) {
        if info_field(pm, "role").as_deref() == Some("slave") {
            demotion = Some(back.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));

    // Lost: acknowledged writes missing on the final master.
    let final_master = advertised_master(monitor).unwrap();
    let acked = writer.stop_timed();
    let mut c = Client::connect(final_master).unwrap();
    let lost = acked
        .iter()
        .filter(|(i, _, _)| {
            c.call(&["GET", &format!("w{i}")]).unwrap() != Frame::bulk(i.to_string())
        })
        .count();
    for d in daemons {
        rt.block_on(d.stop()).unwrap();
    }
    drop(replicas);
    Trial {
        recovery,
        demotion,
        lost,
        acked: acked.len(),
        election: seen.as_ref().and_then(election_of),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms1(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes --bench. `cargo test --all-targets` runs bench
    // binaries without it, in a debug build: timings would mean nothing,
    // and the integration tests already cover the behaviour.
    if !std::env::args().any(|a| a == "--bench") {
        println!("failover bench: not run under `cargo test` (use `cargo bench --bench failover`)");
        return;
    }
    let n: usize = std::env::var("VALKYRIE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    println!(
        "| fault | system | write recovery median (min–max) | old master demoted, median (max) | acknowledged writes lost / acknowledged |"
    );
    println!("|---|---|---:|---:|---:|");
    let mut election_lines = Vec::new();
    for fault in [Fault::Kill, Fault::Stop] {
        for system in [System::Valkyrie, System::Valkyries3, System::Sentinel] {
            let trials: Vec<Trial> = (0..n).map(|_| trial(system, fault)).collect();
            let rec: Vec<Duration> = trials.iter().map(|t| t.recovery).collect();
            let dem: Vec<Duration> = trials.iter().filter_map(|t| t.demotion).collect();
            let undemoted = trials.len() - dem.len();
            let lost: usize = trials.iter().map(|t| t.lost).sum();
            let acked: usize = trials.iter().map(|t| t.acked).sum();
            let (lo, hi) = (
                rec.iter().min().copied().unwrap(),
                rec.iter().max().copied().unwrap(),
            );
            let dem_s = if dem.is_empty() {
                "not within 30 s".to_string()
            } else {
                let mx = *dem.iter().max().unwrap();
                let extra = if undemoted > 0 {
                    format!(", {undemoted} not within 30 s")
                } else {
                    String::new()
                };
                format!("{} ({}){extra}", ms(median(dem.clone())), ms(mx))
            };
            println!(
                "| {fault:?} | {system:?} | {} ({}–{}) | {dem_s} | {lost} / {acked} |",
                ms(median(rec)),
                ms(lo),
                ms(hi)
            );
            let elections: Vec<(Duration, usize)> =
                trials.iter().filter_map(|t| t.election).collect();
            if !elections.is_empty() {
                let took: Vec<Duration> = elections.iter().map(|e| e.0).collect();
                let aborted: usize = elections.iter().map(|e| e.1).sum();
                let worst = took.iter().max().copied().unwrap();
                election_lines.push(format!(
                    "| {fault:?} | {} | {} | {} | {aborted} |",
                    elections.len(),
                    ms1(median(took)),
                    ms1(worst)
                ));
            }
        }
    }
    println!();
    println!("Three Valkyries: first `+try-failover` to `+elected-leader`");
    println!();
    println!("| fault | trials | median | max | elections aborted |");
    println!("|---|---:|---:|---:|---:|");
    for line in election_lines {
        println!("{line}");
    }
}
