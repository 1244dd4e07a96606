//! The monitor's own path to a healthy master breaks: Valkyrie against
//! three real valkey-sentinel processes (quorum 2), side by side.
//!
//! Each trial builds a fresh master and two replicas (`valkey-server`, no
//! persistence) and either one Valkyrie or three sentinels, all at
//! `down-after-milliseconds 1000`. The monitors run as their own uid
//! (tests/support/cut.rs); a writer connected to the master (as root)
//! writes `SET` about 200 times a second. Then every packet the monitors
//! send to the master's port is dropped (`iptables` owner match) for 8 s,
//! while the master, its replicas and the writer keep talking. The cut
//! heals; once the old master is demoted (or 20 s pass), counted:
//!
//! - **spurious promotions**: `+switch-master` events during the trial
//!   (the master was healthy throughout);
//! - **lost writes**: writes the master acknowledged that the final
//!   master does not hold.
//!
//! Run as root: `cargo bench --bench partition` (`VALKYRIE_BENCH_TRIALS`
//! sets the trials per system, default 3). Prints a markdown table for
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::cut::{Cut, CutProcess, require_root, spawn_as_cut_user};
use support::observe::{Events, Writer, lost_writes};
use support::*;

const CUT_FOR: Duration = Duration::from_secs(8);

#[derive(Clone, Copy, Debug, PartialEq)]
enum System {
    Valkyrie,
    Sentinels,
}

struct Trial {
    promotions: usize,
    lost: usize,
    acked: usize,
}

fn start_monitors(system: System, dir: &Path, pm: u16) -> (Vec<u16>, Vec<CutProcess>) {
    let common = format!(
        "bind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {pm} 2\n\
         sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n\
         sentinel parallel-syncs mymaster 1\n",
        dir.display()
    );
    let count = if system == System::Valkyrie { 1 } else { 3 };
    let mut ports = Vec::new();
    let mut procs = Vec::new();
    for i in 0..count {
        let port = free_port();
        let conf = dir.join(format!("monitor-{i}.conf"));
        let extra = if system == System::Valkyrie {
            "index-port 0\nadmin-port 0\n"
        } else {
            ""
        };
        std::fs::write(&conf, format!("port {port}\n{extra}{common}")).unwrap();
        let bin = match system {
            System::Valkyrie => PathBuf::from(env!("CARGO_BIN_EXE_valkyrie")),
            System::Sentinels => support::sentinel::valkey_sentinel(),
        };
        let conf = conf.to_str().unwrap().to_string();
        procs.push(spawn_as_cut_user(
            &bin,
            &[&conf],
            dir,
            &format!("monitor-{i}.log"),
        ));
        ports.push(port);
    }
    // Every monitor knows both replicas, and the sentinels each other.
    wait_until(Duration::from_secs(30), || {
        ports.iter().all(|&p| {
            master_field(p, "num-slaves").as_deref() == Some("2")
                && (system == System::Valkyrie
                    || master_field(p, "num-other-sentinels").as_deref() == Some("2"))
        })
    });
    (ports, procs)
}

fn trial(system: System) -> Trial {
    let bin = valkey_server();
    let tmp = TempDir::new("bench-partition");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    let mdir = tmp.0.join("monitors");
    std::fs::create_dir_all(&mdir).unwrap();
    let (ports, _procs) = start_monitors(system, &mdir, pm);
    // Let a full INFO round reach every monitor.
    wait_until(Duration::from_secs(15), || {
        ports
            .iter()
            .all(|&p| master_field(p, "flags").as_deref() == Some("master"))
    });
    let events: Vec<Events> = ports.iter().map(|&p| Events::watch(p)).collect();
    let writer = Writer::start(Duration::from_millis(5), move || Some(pm));
    wait_until(Duration::from_secs(5), || writer.acked() > 50);

    let cut = Cut::new(&[pm]);
    std::thread::sleep(CUT_FOR);
    cut.heal();
    // The monitors see the old master again; whoever promoted a replica
    // now demotes it (Sentinel at its next INFO, within ~10 s).
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_secs(20) {
        let promoted = ports.iter().any(|&p| advertised_master(p) != Some(pm));
        let demoted = info_field(pm, "role").as_deref() == Some("slave");
        let up = ports
            .iter()
            .all(|&p| master_field(p, "flags").as_deref() == Some("master"));
        if (promoted && demoted) || (!promoted && up && settle.elapsed() > Duration::from_secs(2)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let acked = writer.stop();
    let final_master = advertised_master(ports[0]).unwrap();
    let promotions = events
        .iter()
        .map(|e| e.count("+switch-master"))
        .max()
        .unwrap_or(0);
    let lost = lost_writes(&acked, final_master);
    drop((r1, r2, master));
    Trial {
        promotions,
        lost,
        acked: acked.len(),
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs bench
    // binaries without it, where a partition bench has nothing to add to
    // tests/failover/partition.rs.
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "partition bench: not run under `cargo test` (use `cargo bench --bench partition`)"
        );
        return;
    }
    require_root();
    let n: usize = std::env::var("VALKYRIE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    println!("| system | trials | spurious promotions | acknowledged writes lost / acknowledged |");
    println!("|---|---:|---:|---:|");
    for system in [System::Valkyrie, System::Sentinels] {
        let trials: Vec<Trial> = (0..n).map(|_| trial(system)).collect();
        let promotions: usize = trials.iter().map(|t| t.promotions).sum();
        let lost: usize = trials.iter().map(|t| t.lost).sum();
        let acked: usize = trials.iter().map(|t| t.acked).sum();
        let per: Vec<String> = trials.iter().map(|t| t.lost.to_string()).collect();
        println!(
            "| {} | {n} | {promotions} | {lost} / {acked} (lost per trial: {}) |",
            match system {
                System::Valkyrie => "Valkyrie",
                System::Sentinels => "3 × valkey-sentinel",
            },
            per.join(", ")
        );
    }
}
