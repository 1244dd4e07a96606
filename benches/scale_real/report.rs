//! The markdown tables printed at the end of a run, for
//! docs/benchmarks.md: resource use per system (idle, during one failover,
//! during the mass failure), failover times, and what each system did when
//! a third of the masters died at once.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::monitors::System;
use crate::scenarios::{Failovers, Window};

/// Everything one system's part of the run produced.
pub struct SystemRun {
    pub system: System,
    /// Start of the processes → every group discovered everywhere.
    pub discovery: Duration,
    pub idle: Option<Window>,
    pub failover: Option<(Window, Failovers)>,
    pub mass: Option<(Window, Failovers)>,
    /// `+tilt` / `-tilt` over the whole time the system ran: since its
    /// processes were ready, which process.
    pub tilts: Vec<(Duration, usize, String)>,
}

pub struct Run {
    pub groups: usize,
    pub down_after_ms: u64,
    pub parallel_syncs: u32,
    pub load_before: String,
    pub load_after: String,
    pub baselines: Vec<Window>,
    pub systems: Vec<SystemRun>,
    pub wall: Duration,
}

fn ms(d: Duration) -> String {
    let v = d.as_millis();
    if v >= 1000 {
        format!("{},{:03} ms", v / 1000, v % 1000)
    } else {
        format!("{v} ms")
    }
}

fn opt_ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "not seen".into(), ms)
}

/// A rate rounded to a whole number, with thousands separated by commas.
fn whole(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < -0.5 { format!("-{out}") } else { out }
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// `first / last` of a set of durations, with how many are missing.
fn span(values: &[Option<Duration>]) -> String {
    let got: Vec<Duration> = values.iter().flatten().copied().collect();
    match (got.iter().min(), got.iter().max()) {
        (Some(a), Some(b)) if got.len() == values.len() && a == b => ms(*a),
        (Some(a), Some(b)) if got.len() == values.len() => format!("{} / {}", ms(*a), ms(*b)),
        (Some(a), _) => format!(
            "{} / {} of {} not seen",
            ms(*a),
            values.len() - got.len(),
            values.len()
        ),
        _ => "not seen".into(),
    }
}

/// min / median / p90 / max.
fn spread(mut values: Vec<Duration>) -> String {
    if values.is_empty() {
        return "none".into();
    }
    values.sort();
    let at =
        |p: f64| values[((values.len() as f64 * p).ceil() as usize).clamp(1, values.len()) - 1];
    format!(
        "{} / {} / {} / {}",
        ms(values[0]),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(values[values.len() - 1])
    )
}

impl Run {
    /// The servers-only loopback rate subtracted below: the quieter
    /// baseline (other programs on loopback only add).
    fn baseline_pps(&self) -> f64 {
        self.baselines
            .iter()
            .map(|w| w.lo_pps)
            .fold(f64::INFINITY, f64::min)
    }

    fn usage_table(&self, out: &mut String, pick: impl Fn(&SystemRun) -> Option<&Window>) {
        let base = self.baseline_pps();
        out.push_str(
            "| system | process | window | CPU (% of one core) | RSS (MiB) | open fds | \
             own sockets: segments/s | loopback packets/s above the servers alone |\n\
             |---|---|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in &self.systems {
            let Some(w) = pick(s) else { continue };
            let label = if w.processes.len() > 1 {
                "sum of 3"
            } else {
                "valkyrie"
            };
            let _ = writeln!(
                out,
                "| {} | {label} | {:.1} s | {:.1} | {} | {} | {} | {} |",
                s.system.label(),
                w.secs,
                w.cpu(),
                mib(w.rss_kib()),
                w.fds(),
                whole(w.segments_ps),
                whole(w.lo_pps - base - w.probe_pps)
            );
            if w.processes.len() > 1 {
                for (i, p) in w.processes.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "| {} | sentinel {} | | {:.1} | {} | {} | {} | — |",
                        s.system.label(),
                        i + 1,
                        p.cpu_pct,
                        mib(p.rss_kib),
                        p.fds,
                        whole(p.segments_ps)
                    );
                }
            }
        }
    }

    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} groups, {} valkey-server instances (`--save \"\"`), down-after {} ms, \
             parallel-syncs {}, run took {:.0} s. Load average before: {}; after: {}.\n",
            self.groups,
            3 * self.groups,
            self.down_after_ms,
            self.parallel_syncs,
            self.wall.as_secs_f64(),
            self.load_before,
            self.load_after
        );
        let _ = writeln!(
            out,
            "Servers alone, loopback: {} (the quieter is subtracted below; \
             the probes' own segments too).\n",
            self.baselines
                .iter()
                .map(|w| format!("{} packets/s over {:.0} s", whole(w.lo_pps), w.secs))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let quiet = self.baseline_pps();
        if self
            .baselines
            .iter()
            .any(|w| w.lo_pps > 1.25 * quiet + 50.0)
        {
            out.push_str(
                "**The two baselines differ: another program used loopback during this run, so \
                 the loopback column is not the monitors' alone. The own-sockets column is \
                 unaffected.**\n\n",
            );
        }
        let _ = writeln!(
            out,
            "Discovery (start → every group, replica and peer known): {}.\n",
            self.systems
                .iter()
                .map(|s| format!("{} {}", s.system.label(), ms(s.discovery)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            out,
            "TILT at any time while the system ran (since its processes were ready): {}.\n",
            self.systems
                .iter()
                .map(|s| {
                    let tilts = if s.tilts.is_empty() {
                        "none".to_string()
                    } else {
                        s.tilts
                            .iter()
                            .map(|(at, p, c)| format!("`{c}` (process {}) at {}", p + 1, ms(*at)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    format!("{} {tilts}", s.system.label())
                })
                .collect::<Vec<_>>()
                .join("; ")
        );
        if self.systems.iter().any(|s| s.idle.is_some()) {
            out.push_str("#### Idle\n\n");
            self.usage_table(&mut out, |s| s.idle.as_ref());
            out.push_str("\n#### During one group's failover (SIGKILL of its master)\n\n");
            self.usage_table(&mut out, |s| s.failover.as_ref().map(|f| &f.0));
            out.push_str(
                "\n| system | group | SIGKILL → `+sdown` | → `+odown` | → `+switch-master` \
                 (first / last process) | → get-master-addr-by-name answers the new master \
                 (first / last process) | → `+failover-end` |\n|---|---|---:|---:|---:|---:|---:|\n",
            );
            for s in &self.systems {
                let Some((_, f)) = &s.failover else { continue };
                let switches: Vec<Option<Duration>> = (0..f.answered[0].len())
                    .map(|p| {
                        f.events
                            .iter()
                            .filter(|e| e.process == p && e.channel == "+switch-master")
                            .map(|e| e.at - f.killed_at)
                            .min()
                    })
                    .collect();
                let answers: Vec<Option<Duration>> =
                    f.answered[0].iter().map(|a| a.map(|x| x.0)).collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    s.system.label(),
                    f.victims[0].1,
                    opt_ms(f.first(0, "+sdown")),
                    opt_ms(f.first(0, "+odown")),
                    span(&switches),
                    span(&answers),
                    opt_ms(f.first(0, "+failover-end"))
                );
            }
        }
        if self.systems.iter().any(|s| s.mass.is_some()) {
            self.mass_tables(&mut out);
        }
        out
    }

    fn mass_tables(&self, out: &mut String) {
        let killed = self
            .systems
            .iter()
            .find_map(|s| s.mass.as_ref().map(|m| m.1.victims.len()))
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "\n#### Mass failure: {killed} of {} masters SIGKILLed at once\n",
            self.groups
        );
        out.push_str(
            "| system | groups failed over | other groups switched | `+tilt` | \
             SIGKILL → `+switch-master`, per group: min / median / p90 / max | \
             → all processes answer the new master: min / median / p90 / max | \
             → `+failover-end`: min / median / p90 / max | the group's first `+sdown` → \
             its `+switch-master`: min / median / p90 / max | most replicas of one group \
             reconfigured at once | one group alone: → `+switch-master` (from `+sdown`) |\n\
             |---|---:|---:|---|---|---|---|---|---:|---:|\n",
        );
        for s in &self.systems {
            let Some((_, m)) = &s.mass else { continue };
            let n = m.victims.len();
            let switched: Vec<Duration> = (0..n)
                .filter_map(|v| m.first(v, "+switch-master"))
                .collect();
            let answered: Vec<Duration> = m
                .answered
                .iter()
                .filter_map(|per| {
                    per.iter()
                        .map(|a| a.map(|x| x.0))
                        .collect::<Option<Vec<_>>>()
                })
                .filter_map(|v| v.into_iter().max())
                .collect();
            let ended: Vec<Duration> = (0..n).filter_map(|v| m.first(v, "+failover-end")).collect();
            // What the failover itself took, without the detection: SDOWN
            // lands at a different moment for each master (its last reply).
            let acted: Vec<Duration> = (0..n)
                .filter_map(|v| {
                    let down = m.first(v, "+sdown")?;
                    Some(m.first(v, "+switch-master")?.saturating_sub(down))
                })
                .collect();
            let tilts = m.all("+tilt");
            let tilt = if tilts.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} (first at {}; `-tilt` {})",
                    tilts.len(),
                    ms(tilts[0]),
                    m.all("-tilt").len()
                )
            };
            let alone = s.failover.as_ref().map_or("—".into(), |(_, f)| {
                let from_down = f
                    .first(0, "+switch-master")
                    .zip(f.first(0, "+sdown"))
                    .map(|(a, b)| a.saturating_sub(b));
                format!(
                    "{} ({})",
                    opt_ms(f.first(0, "+switch-master")),
                    opt_ms(from_down)
                )
            });
            let _ = writeln!(
                out,
                "| {} | {} of {n} | {} | {tilt} | {} | {} | {} | {} | {} | {alone} |",
                s.system.label(),
                answered.len(),
                m.stray_switches,
                spread(switched),
                spread(answered),
                spread(ended),
                spread(acted),
                m.max_reconf_in_flight()
            );
        }
        out.push_str("\nEvents published during the mass failure (all processes):\n\n");
        for s in &self.systems {
            let Some((_, m)) = &s.mass else { continue };
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for e in &m.events {
                *counts.entry(e.channel.as_str()).or_default() += 1;
            }
            let _ = writeln!(
                out,
                "- {}: {}",
                s.system.label(),
                counts
                    .iter()
                    .map(|(c, n)| format!("`{c}` {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        out.push_str("\nPer group, SIGKILL → first `+switch-master` (ms, sorted):\n\n");
        for s in &self.systems {
            let Some((_, m)) = &s.mass else { continue };
            let mut v: Vec<u128> = (0..m.victims.len())
                .filter_map(|i| m.first(i, "+switch-master").map(|d| d.as_millis()))
                .collect();
            v.sort_unstable();
            let _ = writeln!(
                out,
                "- {}: {}",
                s.system.label(),
                v.iter().map(u128::to_string).collect::<Vec<_>>().join(" ")
            );
        }
        out.push_str("\nResource use during the mass failure:\n\n");
        self.usage_table(out, |s| s.mass.as_ref().map(|m| &m.0));
    }
}
