//! A planned switchover (`SENTINEL FAILOVER mymaster`) under steady
//! writes, side by side: one Valkyrie against three real valkey-sentinels
//! (quorum 2) on the same master and two replicas, on loopback.
//!
//! A writer asks the monitor for the master, writes `SET w<i>` then
//! `WAIT 1 100` in a loop, and follows the master when a write fails
//! (asking again every 1 ms, so the figure is the switchover's, not a
//! client's back-off). Measured per trial:
//!
//! - **write stall**: the longest gap between two acknowledged writes,
//!   from the `SENTINEL FAILOVER` on;
//! - **lost writes**: writes acknowledged by `WAIT` (≥ 1 replica) that
//!   the final master does not have;
//! - **new master**: `SENTINEL FAILOVER` → the monitor advertises the
//!   promoted replica;
//! - **old master demoted**: `SENTINEL FAILOVER` → the old master reports
//!   `role:slave`.
//!
//! For Valkyrie the steps are also timed from its events (`+failover-…`,
//! `+switch-master`), to show where the stall goes.
//!
//! Run: `cargo bench --bench switchover` (needs valkey-server and
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
    Valkyrie,
    Sentinel,
}

struct Trial {
    stall: Duration,
    lost: usize,
    acked: usize,
    new_master: Duration,
    demoted: Option<Duration>,
    /// Valkyrie's events after the request, with their offsets.
    steps: Vec<(Duration, &'static str)>,
}

type Seen = Arc<Mutex<Vec<(Instant, &'static str)>>>;

fn trial(system: System) -> Trial {
    let bin = valkey_server();
    let tmp = TempDir::new("bench-switchover");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut _sentinels = None;
    let mut daemon = None;
    let seen: Seen = Arc::default();
    let monitor = match system {
        System::Valkyrie => {
            let mut g = GroupConfig::new("mymaster", "127.0.0.1", pm, 1);
            g.down_after = Duration::from_millis(1000);
            g.failover_timeout = Duration::from_millis(10_000);
            let cfg = Config {
                port: free_port(),
                admin_port: 0,
                index_port: 0,
                bind: vec!["127.0.0.1".into()],
                dir: tmp.0.join("valkyrie"),
                groups: vec![g],
                ..Config::default()
            };
            std::fs::create_dir_all(&cfg.dir).unwrap();
            let d = rt.block_on(Daemon::start(cfg)).unwrap();
            let h = d.handle.clone();
            wait_until(Duration::from_secs(10), || {
                h.topology.borrow().groups["mymaster"].replicas.len() == 2
            });
            std::thread::sleep(Duration::from_millis(1_500));
            let mut rx = d.handle.events.subscribe();
            let seen = seen.clone();
            rt.spawn(async move {
                while let Ok(e) = rx.recv().await {
                    seen.lock()
                        .unwrap()
                        .push((Instant::now(), e.channel.as_str()));
                }
            });
            let port = d.sentinel_addrs[0].port();
            daemon = Some(d);
            port
        }
        System::Sentinel => {
            let s = support::sentinel::three_sentinels(&tmp.0, pm);
            let port = s[0].port;
            // Every sentinel must know both replicas before it is asked.
            std::thread::sleep(Duration::from_millis(2_000));
            _sentinels = Some(s);
            port
        }
    };

    let writer =
        Writer::start_replicated(Duration::from_millis(1), move || advertised_master(monitor));
    std::thread::sleep(Duration::from_millis(500));

    let t0 = Instant::now();
    let reply = call(monitor, &["SENTINEL", "FAILOVER", "mymaster"]);
    assert!(matches!(reply, Frame::Simple(_)), "{reply:?}");
    let mut new_master = None;
    let mut demoted = None;
    while t0.elapsed() < Duration::from_secs(30) && (new_master.is_none() || demoted.is_none()) {
        if new_master.is_none() && advertised_master(monitor).is_some_and(|p| p != pm) {
            new_master = Some(t0.elapsed());
        }
        if demoted.is_none() && info_field(pm, "role").as_deref() == Some("slave") {
            demoted = Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let new_master = new_master.expect("the switchover never happened");
    // Writes go on a while on the new master.
    std::thread::sleep(Duration::from_millis(1_000));

    let acked = writer.stop_timed();
    let mut last = t0;
    let mut stall = Duration::ZERO;
    for (_, _, at) in acked.iter().filter(|(_, _, at)| *at > t0) {
        stall = stall.max(at.saturating_duration_since(last));
        last = *at;
    }
    let final_master = advertised_master(monitor).unwrap();
    let mut c = Client::connect(final_master).unwrap();
    let lost = acked
        .iter()
        .filter(|(i, _, _)| {
            c.call(&["GET", &format!("w{i}")]).unwrap() != Frame::bulk(i.to_string())
        })
        .count();
    let steps = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at >= t0)
        .map(|(at, ch)| (at.saturating_duration_since(t0), *ch))
        .collect();
    if let Some(d) = daemon {
        rt.block_on(d.stop()).unwrap();
    }
    drop((master, r1, r2));
    Trial {
        stall,
        lost,
        acked: acked.len(),
        new_master,
        demoted,
        steps,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without --bench, in
    // a debug build: timings would mean nothing there.
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "switchover bench: not run under `cargo test` (use `cargo bench --bench switchover`)"
        );
        return;
    }
    let n: usize = std::env::var("VALKYRIE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    println!(
        "| system | write stall median (min–max) | acknowledged writes lost / acknowledged | new master advertised, median | old master demoted, median |"
    );
    println!("|---|---:|---:|---:|---:|");
    let mut step_lines = Vec::new();
    for system in [System::Valkyrie, System::Sentinel] {
        let trials: Vec<Trial> = (0..n).map(|_| trial(system)).collect();
        let stalls: Vec<Duration> = trials.iter().map(|t| t.stall).collect();
        let lost: usize = trials.iter().map(|t| t.lost).sum();
        let acked: usize = trials.iter().map(|t| t.acked).sum();
        let adv = median(trials.iter().map(|t| t.new_master).collect());
        let dem: Vec<Duration> = trials.iter().filter_map(|t| t.demoted).collect();
        let dem = if dem.is_empty() {
            "not within 30 s".into()
        } else {
            ms(median(dem))
        };
        println!(
            "| {system:?} | {} ({}–{}) | {lost} / {acked} | {} | {dem} |",
            ms(median(stalls.clone())),
            ms(*stalls.iter().min().unwrap()),
            ms(*stalls.iter().max().unwrap()),
            ms(adv),
        );
        for (k, t) in trials.iter().enumerate() {
            if !t.steps.is_empty() {
                let steps: Vec<String> = t
                    .steps
                    .iter()
                    .map(|(d, ch)| format!("{ch} {}", ms(*d)))
                    .collect();
                step_lines.push(format!("trial {k}: {}", steps.join(", ")));
            }
        }
    }
    println!();
    for l in step_lines {
        println!("{l}");
    }
}
