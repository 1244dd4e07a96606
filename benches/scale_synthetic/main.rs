//! Scale: one Valkyrie monitoring 1,000 and 10,000 instances, served by a
//! **synthetic Valkey** — a stand-in, not Valkey.
//!
//! Real `valkey-server` processes cannot reach 10,000 on one machine, so
//! the instances here are played by this bench binary: one tokio runtime
//! per process serving many instances, each on its own loopback port.
//! Each instance answers what a monitor sends, in Valkey 8's formats:
//! `PING`; `INFO` (server, replication and keyspace sections: `run_id`,
//! `role`, `connected_slaves` and `slaveN:ip=…,port=…,state=online,
//! offset=…,lag=0`, `master_repl_offset` / `slave_repl_offset`,
//! `master_host` / `master_port` / `master_link_status`,
//! `master_last_io_seconds_ago`, `slave_priority`, `master_replid`, `db0`);
//! `ROLE`; `REPLICAOF NO ONE` and `REPLICAOF host port`, which change a
//! topology shared by the instances of a group (the promoted one reports
//! the master role, the others follow whom they are told to follow, with
//! their link up at once and no data moved); `CLIENT SETNAME | KILL |
//! PAUSE | UNPAUSE`; `CONFIG REWRITE`; `AUTH`; `SUBSCRIBE` and `PUBLISH`
//! on `__sentinel__:hello` (a published hello is delivered to the
//! instance's subscribers — only a hello about the instance's own group,
//! so that a sentinel of another program on this machine that happens to
//! reach one of these ports cannot join the measured monitor, as happened
//! once while this bench was written; for the same reason `REPLICAOF`
//! accepts only a master of the group); anything else is `-ERR unknown
//! command`. Each process counts the PINGs, INFOs and PUBLISHes it serves,
//! which shows whether the monitor keeps its own schedule.
//! Requests are read with `valkyrie_protocol`'s `RequestDecoder` and
//! replies written with its encoder. A killed instance closes its listener
//! and its connections (later connects are refused), as a SIGKILLed
//! process would; its replicas then report their link down. There is no
//! data, no replication stream and no persistence: what is measured is the
//! monitor's side.
//!
//! The instances are served by as few child processes (this binary
//! re-executed) as the open-file limit allows: each instance holds a
//! listener and the monitor's two connections (command and pub/sub), so
//! 10,000 instances need about 30,000 descriptors on the serving side,
//! more than one process may hold under a 20,000 hard limit. Whole groups
//! stay in one process, so a group's topology is shared in memory. The
//! parent drives each child over a pipe (`kill <port>`).
//!
//! Measured, for each size (groups of a master and two replicas, one
//! `sentinel monitor gK 127.0.0.1 <port> 1` per group, `index-port 0`,
//! `admin-port 0`), with the **release `valkyrie` binary as a separate
//! process**:
//!
//! 1. `mixed`: every group at the default `down-after` (30 s: PING every
//!    second) except the groups that will be killed, at
//!    `down-after-milliseconds 1000` (PING every 100 ms): the time until
//!    every group shows its two replicas (flags `slave`, nothing down),
//!    then Valkyrie's CPU (user+system from `/proc/PID/stat`), RSS
//!    (`VmRSS`) and open descriptors over an idle window, and the events
//!    no healthy instance should cause (`+sdown`, `+odown`,
//!    `+try-failover`, `+switch-master`, `+tilt`, from a `PSUBSCRIBE *` on
//!    Valkyrie's Sentinel port) up to the first kill; then failovers, one
//!    group per trial: the instance Valkyrie names as the group's master
//!    is killed and the time until `SENTINEL get-master-addr-by-name gK`
//!    names another instance of the group is taken (with the `+sdown` and
//!    `+switch-master` of that group on the way); after a trial that gets
//!    no answer within 60 s the others are skipped;
//! 2. `default`: every group at the default `down-after`: discovery, CPU
//!    and RSS again (no failover: it would take 30 s);
//! 3. `1000` (not run unless asked): every group at 1000 ms, failovers as
//!    in 1 — ten PINGs a second per instance, a stress rather than a
//!    deployment (100,000 PINGs a second at 10,000 instances);
//! 4. before those, the same failover with a single group monitored
//!    (N = 3, 1000 ms), a fresh Valkyrie and synthetic group per trial:
//!    the baseline of the ratio.
//!
//! Run: `cargo bench --bench scale_synthetic`. Knobs:
//! `VALKYRIE_SCALE_GROUPS` (comma list of group counts, default
//! `334,3334`: 1,002 and 10,002 instances), `VALKYRIE_SCALE_TRIALS`
//! (failovers per size, default 5), `VALKYRIE_SCALE_IDLE_SECS` (the idle
//! window, default 20), `VALKYRIE_SCALE_DISCOVERY_SECS` (how long
//! discovery may take before the bench goes on without it, default 180),
//! `VALKYRIE_SCALE_DOWN_AFTER` (which runs, a comma list of `mixed`,
//! `default` and `1000`; default `mixed,default`), `VALKYRIE_SCALE_BASE_PORT` (first port tried
//! for the instances, default 14000; ports in use are skipped),
//! `VALKYRIE_BIN` (a `valkyrie` binary to use instead of building one),
//! `VALKYRIE_SCALE_NO_CLAMP=1` (run a size even when Valkyrie's two
//! connections per instance do not fit in the open-file limit; by default
//! such a size is reduced to the largest that fits, and the output says
//! so). The soft open-file limit is raised to the hard one with `prlimit`
//! first (the children inherit it). Prints markdown tables for
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod client;
mod measure;
#[path = "../../tests/support/procstat.rs"]
#[allow(dead_code)]
mod procstat;
mod replies;
mod shards;
mod synthetic;
mod valkyrie;

use measure::{Timers, baseline, opt_summary, run_size, summary};
use valkyrie::{env_num, valkyrie_bin};

/// Set in a child process: the groups it serves (see `synthetic::serve`).
pub(crate) const SERVE_ENV: &str = "VALKYRIE_SCALE_SERVE";

fn main() {
    if let Ok(spec) = std::env::var(SERVE_ENV) {
        return synthetic::serve(&spec);
    }
    // `cargo test --benches` runs bench binaries without `--bench`.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    // As high as the hard limit allows.
    let limit = procstat::raise_nofile(u64::MAX);
    let bin = valkyrie_bin();
    let groups: Vec<usize> = std::env::var("VALKYRIE_SCALE_GROUPS")
        .unwrap_or_else(|_| "334,3334".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let trials = env_num("VALKYRIE_SCALE_TRIALS", 5) as usize;
    let idle_secs = env_num("VALKYRIE_SCALE_IDLE_SECS", 20);
    let base_port = env_num("VALKYRIE_SCALE_BASE_PORT", 14000) as u16;
    let no_clamp = std::env::var_os("VALKYRIE_SCALE_NO_CLAMP").is_some();
    let variants: Vec<Timers> = std::env::var("VALKYRIE_SCALE_DOWN_AFTER")
        .unwrap_or_else(|_| "mixed,default".into())
        .split(',')
        .map(|v| match v.trim() {
            "1000" => Timers::Fast,
            "default" => Timers::Default,
            "mixed" => Timers::Mixed,
            other => panic!("VALKYRIE_SCALE_DOWN_AFTER: {other:?} is not 1000, default or mixed"),
        })
        .collect();
    // Valkyrie holds two connections per instance; keep 64 descriptors
    // for everything else. A synthetic shard holds three per instance.
    let fit_groups = (limit.saturating_sub(64) / 2 / 3) as usize;
    let per_shard = (limit.saturating_sub(256) / 12).max(1) as usize;
    eprintln!(
        "open-file limit {limit}: Valkyrie fits {} instances; up to {per_shard} groups per synthetic process; valkyrie at {}",
        fit_groups * 3,
        bin.display()
    );

    eprintln!("baseline: one group (N = 3), {trials} trials");
    let (base, base_rss) = baseline(&bin, trials, base_port);
    let base_med = base.median();

    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for &g in &groups {
        let mut g2 = g;
        if g * 3 > fit_groups * 3 && !no_clamp {
            g2 = fit_groups;
            notes.push(format!(
                "{} instances ({g} groups) need about {} descriptors in Valkyrie (two connections \
                 per instance) but the open-file limit is {limit}: measured {} instances ({g2} \
                 groups) instead",
                g * 3,
                g * 6 + 64,
                g2 * 3
            ));
            eprintln!("{}", notes.last().unwrap());
        }
        for &timers in &variants {
            rows.push(run_size(
                &bin, g2, base_port, per_shard, timers, idle_secs, trials,
            ));
        }
    }

    let (load1, _) = load_average();
    println!();
    println!("load average at the end: {load1}");
    for n in &notes {
        println!("note: {n}");
    }
    println!();
    println!(
        "| instances | down-after | all replicas up after | Valkyrie CPU, % of one core (user + sys) | µs CPU per s per instance | Valkyrie RSS (MiB) | KiB per instance | Valkyrie fds | synthetic CPU (%) | served per instance per s: PING / INFO / PUBLISH | before any kill: +sdown / +odown / +try-failover / +switch-master / +tilt |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for r in &rows {
        let disc = match &r.discovery {
            Ok(d) => format!("{:.1} s", d.as_secs_f64()),
            Err(e) => format!("never ({e})"),
        };
        let Some(i) = &r.idle else { continue };
        let u = r.unprovoked;
        println!(
            "| {} | {} | {} | {:.1} % ({:.1} + {:.1}) | {:.0} | {:.1} | {:.1} | {} | {:.1} % | {:.2} / {:.2} / {:.2} | {} / {} / {} / {} / {} |",
            r.instances,
            r.down_after,
            disc,
            i.cpu_pct,
            i.user_pct,
            i.cpu_pct - i.user_pct,
            i.cpu_pct / 100.0 * 1e6 / r.instances as f64,
            i.rss_kib as f64 / 1024.0,
            i.rss_kib as f64 / r.instances as f64,
            i.fds,
            i.syn_cpu_pct,
            i.rates[0],
            i.rates[1],
            i.rates[2],
            u[0],
            u[1],
            u[2],
            u[3],
            u[4]
        );
    }
    println!();
    println!(
        "| instances monitored | failovers | kill → replica named, median (min–max) | kill → +sdown | kill → +switch-master | vs one group |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| 3 (one group; RSS {:.1} MiB) | {} | {} | {} | {} | 1.00× |",
        base_rss as f64 / 1024.0,
        base.totals.len(),
        summary(&base.totals),
        opt_summary(&base.sdowns),
        opt_summary(&base.switches),
    );
    for r in &rows {
        let Some(f) = &r.failover else { continue };
        let ratio = match (f.median(), base_med) {
            (Some(a), Some(b)) => format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64()),
            _ => "—".into(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.instances,
            f.totals.len(),
            summary(&f.totals),
            opt_summary(&f.sdowns),
            opt_summary(&f.switches),
            ratio
        );
    }
    println!();
    for r in &rows {
        if let Some(f) = &r.failover {
            for e in &f.errors {
                println!("failover error at {} instances: {e}", r.instances);
            }
        }
        if r.spurious > 0 {
            println!(
                "{} instances: {} `+switch-master` beyond the killed groups'",
                r.instances, r.spurious
            );
        }
        if r.events_lost > 0 {
            println!(
                "{} instances, down-after {}: the event subscription was lost {} times \
                 (event counts are lower bounds)",
                r.instances, r.down_after, r.events_lost
            );
        }
        if r.warnings.0 > 0 {
            println!(
                "{} instances, down-after {}: {} WARN/ERROR log lines, first: {:?}",
                r.instances, r.down_after, r.warnings.0, r.warnings.1
            );
        }
    }
    for e in &base.errors {
        println!("baseline error: {e}");
    }
}

fn load_average() -> (String, String) {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let f: Vec<&str> = l.split_whitespace().collect();
    (
        f.first().copied().unwrap_or("?").to_string(),
        f.get(1).copied().unwrap_or("?").to_string(),
    )
}
