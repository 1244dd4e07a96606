//! Scale with real processes: one Valkyrie against three real
//! valkey-sentinels (quorum 2), each watching the same `GROUPS` groups of
//! real `valkey-server` processes (a master and two replicas each, `--save
//! ""`, on loopback), one system at a time, in one run.
//!
//! ```sh
//! # idle and one group's failover, 300 instances:
//! cargo bench --bench scale_real -- --groups 100 --scenario failover
//! # a third of the masters SIGKILLed at once, 300 instances:
//! cargo bench --bench scale_real -- --groups 100 --scenario mass
//! # both in one run (the default; about 6 minutes at 100 groups):
//! cargo bench --bench scale_real -- --groups 100
//! ```
//!
//! Options (or the environment variable beside each):
//! `--groups N` (`SCALE_GROUPS`, default 100), `--scenario
//! failover|mass|all` (`SCALE_SCENARIO`, default all), `--idle SECS`
//! (`SCALE_IDLE`, 20), `--down-after MS` (`SCALE_DOWN_AFTER`, 30000, for
//! both systems), `--warmup SECS` (`SCALE_WARMUP`, 10), `--post SECS`
//! (`SCALE_POST`, 5), `--keep` (`SCALE_KEEP=1`: keep the scratch
//! directory with every log). `VALKYRIE_BIN=path` runs that daemon binary
//! instead of this build's. Under `cargo test` (no `--bench`) the
//! defaults are 6 groups, 2 s windows and a 2 s down-after: a check
//! that the bench runs, not a measurement. Needs valkey-server, valkey-sentinel
//! (`source scripts/deps.sh && valkyrie_deps --valkey-only`) and `ss`.
//!
//! The run:
//! 1. starts every master at once, then every replica, on ports above the
//!    kernel's ephemeral range; waits until every replica is linked; and
//!    measures the loopback traffic of the servers alone (the baseline);
//! 2. for each system (Valkyrie first): starts it on the current masters
//!    (Valkyrie quorum 1 with index and admin ports off, Sentinel quorum 2;
//!    failover-timeout and parallel-syncs at their defaults) and waits
//!    until every process knows every group, replica and peer, then
//!    - `failover`: an idle window, then SIGKILL of `g1`'s master, followed
//!      until every process answers `get-master-addr-by-name` with the new
//!      master and `+failover-end` is out, plus `--post`; the old master
//!      comes back empty on its port as a replica of the new one;
//!    - `mass`: SIGKILL of a third of the masters (the middle third of the
//!      groups) back to back, followed the same way for every victim;
//!      afterwards the system stops and the killed masters come back;
//! 3. measures the baseline again and prints markdown tables.
//!
//! Figures per monitor process (and summed over the three sentinels): CPU
//! = user+system time over the window (`/proc/PID/stat`), RSS and open
//! descriptors at the window's end (`/proc/PID/status`, `/proc/PID/fd`);
//! packets as the segments of the monitors' own established sockets (`ss
//! -tinp`, before and after; a segment between two sentinels counted once)
//! and as `lo`'s packets (`/proc/net/dev`) above the servers-only
//! baseline, less this benchmark's own probe sockets. Every process is
//! killed by PID when the run ends, also on a panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../../tests/support/mod.rs"]
mod support;

mod fleet;
mod monitors;
mod report;
mod scenarios;

use std::time::{Duration, Instant};

use fleet::Fleet;
use monitors::{Monitors, Recorder, System};
use report::{Run, SystemRun};
use scenarios::{kill_and_follow, measure};
use support::procstat::{loadavg, raise_nofile};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Failover,
    Mass,
    All,
}

#[derive(Debug)]
struct Options {
    groups: usize,
    scenario: Scenario,
    idle: Duration,
    down_after_ms: u64,
    warmup: Duration,
    post: Duration,
    keep: bool,
}

impl Options {
    /// `--name value` arguments, else `SCALE_NAME` variables, else
    /// defaults. Cargo's own `--bench` is ignored.
    fn parse() -> Options {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let get = |flag: &str, var: &str| -> Option<String> {
            args.iter()
                .position(|a| a == flag)
                .map(|i| {
                    args.get(i + 1)
                        .unwrap_or_else(|| panic!("{flag} needs a value"))
                        .clone()
                })
                .or_else(|| std::env::var(var).ok())
        };
        let num = |flag: &str, var: &str, default: u64| -> u64 {
            get(flag, var).map_or(default, |v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{flag} / {var}: not a number: {v}"))
            })
        };
        let scenario = match get("--scenario", "SCALE_SCENARIO").as_deref() {
            None | Some("all") => Scenario::All,
            Some("failover") => Scenario::Failover,
            Some("mass") => Scenario::Mass,
            Some(other) => panic!("--scenario: failover, mass or all, not {other}"),
        };
        // `cargo test --all-targets` runs this binary without `--bench`:
        // then the same steps run small (6 groups, 2 s timers), so the
        // suite checks that the bench still works without spending
        // minutes on it. Flags and variables still win.
        let smoke = !args.iter().any(|a| a == "--bench");
        let [groups, idle, down_after, warmup, post] = if smoke {
            [6, 2, 2_000, 2, 1]
        } else {
            [100, 20, 30_000, 10, 5]
        };
        let groups = num("--groups", "SCALE_GROUPS", groups) as usize;
        assert!(groups >= 3, "--groups: at least 3 (a third of them die)");
        Options {
            groups,
            scenario,
            idle: Duration::from_secs(num("--idle", "SCALE_IDLE", idle)),
            down_after_ms: num("--down-after", "SCALE_DOWN_AFTER", down_after),
            warmup: Duration::from_secs(num("--warmup", "SCALE_WARMUP", warmup)),
            post: Duration::from_secs(num("--post", "SCALE_POST", post)),
            keep: args.iter().any(|a| a == "--keep")
                || std::env::var("SCALE_KEEP").is_ok_and(|v| v == "1"),
        }
    }
}

fn log(started: Instant, what: &str) {
    eprintln!("[{:6.1} s] {what}", started.elapsed().as_secs_f64());
}

fn main() {
    let opts = Options::parse();
    let started = Instant::now();
    // 3 × groups servers, each with its clients and replication links, and
    // the monitors' links to all of them: children inherit this limit.
    let nofile = raise_nofile(65_536);
    let load_before = loadavg();
    log(
        started,
        &format!("{opts:?}; open-file limit {nofile}; load {load_before}"),
    );
    let dir = support::TempDir::new("scale-real");
    let mut fleet = Fleet::start(&support::valkey_server(), &dir.0, opts.groups);
    log(
        started,
        &format!("{} servers up, every replica linked", 3 * opts.groups),
    );
    let mut baselines = Vec::new();
    baselines.push(measure(&[], || std::thread::sleep(opts.idle)).0);
    log(started, "baseline measured (servers alone)");
    let mut systems = Vec::new();
    for system in [System::Valkyrie, System::Sentinels] {
        systems.push(run_system(&opts, system, &mut fleet, &dir.0, started));
    }
    fleet.wait_healthy(None, Duration::from_secs(60));
    baselines.push(measure(&[], || std::thread::sleep(opts.idle)).0);
    let run = Run {
        groups: opts.groups,
        down_after_ms: opts.down_after_ms,
        parallel_syncs: 1,
        load_before,
        load_after: loadavg(),
        baselines,
        systems,
        wall: started.elapsed(),
    };
    log(started, "done");
    println!("{}", run.markdown());
    drop(fleet);
    if opts.keep {
        eprintln!("kept {}", dir.0.display());
        std::mem::forget(dir);
    }
}

fn run_system(
    opts: &Options,
    system: System,
    fleet: &mut Fleet,
    dir: &std::path::Path,
    started: Instant,
) -> SystemRun {
    let t0 = Instant::now();
    let monitors = Monitors::start(system, dir, &fleet.groups, opts.down_after_ms);
    let ready_limit = Duration::from_secs(60 + opts.groups as u64);
    monitors.wait_ready(opts.groups, ready_limit);
    let discovery = t0.elapsed();
    log(
        started,
        &format!("{}: every group discovered", system.label()),
    );
    let recorder = Recorder::start(&monitors.ports);
    std::thread::sleep(opts.warmup);
    let pids = monitors.pids.clone();
    let limit = Duration::from_millis(opts.down_after_ms) + Duration::from_secs(60);
    let mut run = SystemRun {
        system,
        discovery,
        idle: None,
        failover: None,
        mass: None,
        tilts: Vec::new(),
    };
    let ready_at = Instant::now();
    if opts.scenario != Scenario::Mass {
        run.idle = Some(measure(&pids, || std::thread::sleep(opts.idle)).0);
        log(
            started,
            &format!("{}: idle window measured", system.label()),
        );
        let failover = measure(&pids, || {
            kill_and_follow(fleet, &monitors, &recorder, &[0], limit, opts.post)
        });
        log(
            started,
            &format!("{}: one failover followed", system.label()),
        );
        fleet.bring_back(&[0]);
        monitors.wait_ready(opts.groups, ready_limit);
        run.failover = Some(failover);
    }
    if opts.scenario != Scenario::Failover {
        let third = opts.groups / 3;
        let victims: Vec<usize> = (third..2 * third).collect();
        let mass = measure(&pids, || {
            kill_and_follow(fleet, &monitors, &recorder, &victims, limit, opts.post)
        });
        log(
            started,
            &format!("{}: mass failure followed", system.label()),
        );
        run.mass = Some(mass);
    }
    run.tilts = recorder
        .since(ready_at)
        .into_iter()
        .filter(|e| e.channel == "+tilt" || e.channel == "-tilt")
        .map(|e| (e.at - ready_at, e.process, e.channel))
        .collect();
    drop(recorder);
    drop(monitors);
    if let Some((_, mass)) = &run.mass {
        let victims: Vec<usize> = mass.victims.iter().map(|v| v.0).collect();
        fleet.bring_back(&victims);
    }
    run
}
