//! The master isolated with its clients: its replicas and every monitor
//! cut from it (both directions), the writers still reaching it.
//! Valkyrie with and without the write fence, alone and as three peers,
//! against three real valkey-sentinel processes (quorum 2), side by side.
//!
//! Each trial builds a fresh master and two replicas (`valkey-server`, no
//! persistence; the replicas connect from 127.0.0.2) and the monitors,
//! each as their own uid (tests/support/cut.rs), all at
//! `down-after-milliseconds 1000`. A writer writes `SET` about 200 times
//! a second to whichever node the first monitor advertises, moving on
//! when a write fails; a probe writes to every node every 10 ms. Then the
//! master is isolated (`Cut::isolate`) for 8 or 20 s, the cut heals, and
//! once the old master is a replica again (or 30 s pass), counted:
//!
//! - **promotions**: `+switch-master` events;
//! - **isolated acks**: writes the isolated master acknowledged after the
//!   cut, and when the last one was;
//! - **lost**: acknowledged writes the final master does not hold;
//! - **first write on the new master**: after the cut, as the writer
//!   saw it;
//! - **two writable masters**: how long the probe saw the old master take
//!   writes after another node had started to.
//!
//! Run as root: `cargo bench --bench isolation` (`VALKYRIE_BENCH_TRIALS`
//! sets the trials per row, default 1; `VALKYRIE_BENCH_CUTS` the cut
//! lengths in seconds, default `8,20`). Prints a markdown table for
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::cut::{Cut, CutProcess, connect_from_isolated_side, require_root, spawn_as_cut_user};
use support::observe::{Events, Probe, Writer, lost_writes};
use support::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum System {
    /// Valkyrie processes, with the write fence or without.
    Valkyrie {
        count: usize,
        fence: bool,
    },
    Sentinels,
}

impl System {
    fn label(self) -> String {
        match self {
            System::Valkyrie { count, fence } => format!(
                "{}Valkyrie, write-fence {}",
                if count > 1 {
                    format!("{count} × ")
                } else {
                    String::new()
                },
                if fence { "auto" } else { "off" }
            ),
            System::Sentinels => "3 × valkey-sentinel".to_string(),
        }
    }
}

struct Trial {
    promotions: usize,
    isolated_acks: usize,
    isolated_last: Duration,
    lost: usize,
    first_new: Option<Duration>,
    overlap: Option<Duration>,
}

fn start_monitors(system: System, dir: &Path, pm: u16) -> (Vec<u16>, Vec<CutProcess>) {
    let mut common = format!(
        "bind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {pm} 2\n\
         sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\n\
         sentinel parallel-syncs mymaster 1\n",
        dir.display()
    );
    let count = match system {
        System::Valkyrie { count, fence } => {
            if fence {
                common.push_str("sentinel write-fence mymaster auto\n");
            }
            common.push_str("index-port 0\nadmin-port 0\n");
            count
        }
        System::Sentinels => 3,
    };
    let mut ports = Vec::new();
    let mut procs = Vec::new();
    for i in 0..count {
        let port = free_port();
        let sub = dir.join(format!("m{i}"));
        std::fs::create_dir_all(&sub).unwrap();
        let conf = sub.join("monitor.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\n{}",
                common.replace(&dir.display().to_string(), &sub.display().to_string())
            ),
        )
        .unwrap();
        let bin = match system {
            System::Valkyrie { .. } => PathBuf::from(env!("CARGO_BIN_EXE_valkyrie")),
            System::Sentinels => support::sentinel::valkey_sentinel(),
        };
        let conf = conf.to_str().unwrap().to_string();
        procs.push(spawn_as_cut_user(&bin, &[&conf], &sub, "monitor.log"));
        ports.push(port);
    }
    let peers = (count - 1).to_string();
    wait_until(Duration::from_secs(60), || {
        ports.iter().all(|&p| {
            master_field(p, "num-slaves").as_deref() == Some("2")
                && master_field(p, "num-other-sentinels").as_deref() == Some(peers.as_str())
        })
    });
    (ports, procs)
}

fn trial(system: System, cut_for: Duration) -> Trial {
    let bin = valkey_server();
    let tmp = TempDir::new("bench-isolation");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let pm = master.port;
    for p in [r1.port, r2.port] {
        connect_from_isolated_side(p);
    }
    wait_until(Duration::from_secs(15), || {
        [r1.port, r2.port]
            .iter()
            .all(|&p| info_field(p, "master_link_status").as_deref() == Some("up"))
    });
    let mdir = tmp.0.join("monitors");
    std::fs::create_dir_all(&mdir).unwrap();
    let (ports, _procs) = start_monitors(system, &mdir, pm);
    wait_until(Duration::from_secs(15), || {
        ports
            .iter()
            .all(|&p| master_field(p, "flags").as_deref() == Some("master"))
    });
    if matches!(system, System::Valkyrie { fence: true, .. }) {
        wait_until(Duration::from_secs(15), || {
            matches!(
                try_call(pm, &["CONFIG", "GET", "min-replicas-to-write"]),
                Ok(valkyrie_protocol::Frame::Array(kv)) if kv.len() == 2 && kv[1].as_bytes().map(|b| &b[..]) == Some(&b"2"[..])
            )
        });
    }
    let events: Vec<Events> = ports.iter().map(|&p| Events::watch(p)).collect();
    let first = ports[0];
    let writer = Writer::start(Duration::from_millis(5), move || advertised_master(first));
    wait_until(Duration::from_secs(5), || writer.acked() > 50);
    let probe = Probe::start(&[pm, r1.port, r2.port]);
    std::thread::sleep(Duration::from_millis(200));

    let cut = Cut::isolate(pm);
    let t0 = Instant::now();
    std::thread::sleep(cut_for);
    cut.heal();
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_secs(30) {
        let promoted = ports.iter().any(|&p| advertised_master(p) != Some(pm));
        let demoted = info_field(pm, "role").as_deref() == Some("slave");
        if promoted && demoted {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let oks = probe.stop();
    let acked = writer.stop_timed();
    let final_master = advertised_master(ports[0]).unwrap();
    let promotions = events
        .iter()
        .map(|e| e.count("+switch-master"))
        .max()
        .unwrap_or(0);
    let plain: Vec<(u64, u16)> = acked.iter().map(|(i, p, _)| (*i, *p)).collect();
    let lost = lost_writes(&plain, final_master);
    let isolated: Vec<Duration> = acked
        .iter()
        .filter(|(_, p, at)| *p == pm && *at > t0)
        .map(|(_, _, at)| *at - t0)
        .collect();
    let first_new = acked
        .iter()
        .find(|(_, p, at)| *p != pm && *at > t0)
        .map(|(_, _, at)| *at - t0);
    let old_last = oks
        .iter()
        .filter(|(p, at)| *p == pm && *at > t0)
        .map(|(_, at)| *at)
        .max();
    let new_first = oks
        .iter()
        .filter(|(p, at)| *p != pm && *at > t0)
        .map(|(_, at)| *at)
        .min();
    let overlap = match (old_last, new_first) {
        (Some(o), Some(n)) if o > n => Some(o - n),
        _ => None,
    };
    drop((r1, r2, master));
    Trial {
        promotions,
        isolated_acks: isolated.len(),
        isolated_last: isolated.last().copied().unwrap_or_default(),
        lost,
        first_new,
        overlap,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs bench
    // binaries without it; tests/failover/write_fence.rs is the test.
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "isolation bench: not run under `cargo test` (use `cargo bench --bench isolation`)"
        );
        return;
    }
    require_root();
    let n: usize = std::env::var("VALKYRIE_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let cuts: Vec<u64> = std::env::var("VALKYRIE_BENCH_CUTS")
        .unwrap_or_else(|_| "8,20".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    println!(
        "| system | cut (s) | promotions | isolated master's acks after the cut (last at, s) | \
         acknowledged writes lost | first write on a new master (s) | two writable masters |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let systems = [
        System::Valkyrie {
            count: 1,
            fence: true,
        },
        System::Valkyrie {
            count: 3,
            fence: true,
        },
        System::Valkyrie {
            count: 1,
            fence: false,
        },
        System::Sentinels,
    ];
    for cut in cuts {
        for system in systems {
            for _ in 0..n {
                let t = trial(system, Duration::from_secs(cut));
                println!(
                    "| {} | {cut} | {} | {} ({}) | {} | {} | {} |",
                    system.label(),
                    t.promotions,
                    t.isolated_acks,
                    secs(t.isolated_last),
                    t.lost,
                    t.first_new.map_or("none".into(), secs),
                    t.overlap
                        .map_or("no".into(), |d| format!("yes, {} s", secs(d))),
                );
            }
        }
    }
}
