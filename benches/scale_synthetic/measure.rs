//! The measurements: discovery, the idle window, one group's failover,
//! the one-group baseline and a whole size's run, with their summaries.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use valkyrie_protocol::Frame;

use crate::client::{Client, Events, fields, text};
use crate::procstat::rss_kib;
use crate::shards::Synthetic;
use crate::valkyrie::{Valkyrie, clk_tck, cpu_ticks, env_num};

/// Waits until every group lists its two replicas, each flagged `slave`
/// only (connected, not down), and the master is flagged `master` only.
pub(crate) fn wait_discovered(
    c: &mut Client,
    groups: &[[u16; 3]],
    limit: Duration,
    from: Instant,
) -> Result<Duration, String> {
    let mut last_report = Instant::now();
    loop {
        let ok_masters = match c.call(&["SENTINEL", "MASTERS"]) {
            Ok(Frame::Array(ms)) => {
                let mut ok = 0;
                for m in &ms {
                    let f = fields(m);
                    if f.get("flags").map(String::as_str) == Some("master")
                        && f.get("num-slaves").map(String::as_str) == Some("2")
                    {
                        ok += 1;
                    }
                }
                ok
            }
            other => return Err(format!("SENTINEL MASTERS answered {other:?}")),
        };
        let mut ok_replicas = 0;
        if ok_masters == groups.len() {
            for (k, [_, r1, r2]) in groups.iter().enumerate() {
                let name = format!("g{k}");
                let Ok(Frame::Array(rs)) = c.call(&["SENTINEL", "REPLICAS", &name]) else {
                    continue;
                };
                let good = rs
                    .iter()
                    .map(fields)
                    .filter(|f| {
                        f.get("flags").map(String::as_str) == Some("slave")
                            && f.get("port")
                                .and_then(|p| p.parse::<u16>().ok())
                                .is_some_and(|p| p == *r1 || p == *r2)
                    })
                    .count();
                if good == 2 {
                    ok_replicas += 1;
                }
            }
            if ok_replicas == groups.len() {
                return Ok(from.elapsed());
            }
        }
        let status = format!(
            "{:.0} s: {ok_masters}/{} masters list 2 replicas, {ok_replicas} groups with both replicas up",
            from.elapsed().as_secs_f64(),
            groups.len()
        );
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("  discovery: {status}");
            last_report = Instant::now();
        }
        if from.elapsed() > limit {
            return Err(status);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub(crate) struct Idle {
    /// PINGs, INFOs and PUBLISHes per second per instance, as served.
    pub(crate) rates: [f64; 3],
    pub(crate) cpu_pct: f64,
    pub(crate) user_pct: f64,
    pub(crate) rss_kib: u64,
    pub(crate) syn_cpu_pct: f64,
    pub(crate) fds: usize,
    pub(crate) sdowns: usize,
}

pub(crate) fn measure_idle(v: &Valkyrie, syn: &mut Synthetic, ev: &Events, secs: u64) -> Idle {
    let hz = clk_tck() as f64;
    let n0 = syn.served();
    let (t0, c0, s0) = (Instant::now(), cpu_ticks(v.pid()), syn.cpu_ticks());
    std::thread::sleep(Duration::from_secs(secs));
    let (t1, c1, s1) = (Instant::now(), cpu_ticks(v.pid()), syn.cpu_ticks());
    let n1 = syn.served();
    let wall = (t1 - t0).as_secs_f64();
    let per = |k: usize| (n1[k] - n0[k]) as f64 / wall / (syn.groups.len() * 3) as f64;
    Idle {
        rates: [per(0), per(1), per(2)],
        cpu_pct: 100.0 * ((c1.0 + c1.1) - (c0.0 + c0.1)) as f64 / hz / wall,
        user_pct: 100.0 * (c1.0 - c0.0) as f64 / hz / wall,
        rss_kib: rss_kib(v.pid()),
        syn_cpu_pct: 100.0 * (s1 - s0) as f64 / hz / wall,
        fds: v.fds(),
        sdowns: ev.count_between("+sdown", t0, t1),
    }
}

pub(crate) struct Failover {
    pub(crate) total: Duration,
    /// Kill → `+sdown` of the master, and → `+switch-master`.
    pub(crate) sdown: Option<Duration>,
    pub(crate) switch: Option<Duration>,
}

pub(crate) fn master_of(c: &mut Client, name: &str) -> Result<(Option<u16>, Frame), String> {
    let reply = c.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])?;
    let port = match &reply {
        Frame::Array(v) if v.len() == 2 => text(&v[1]).parse::<u16>().ok(),
        _ => None,
    };
    Ok((port, reply))
}

/// Kills the instance Valkyrie names as group `k`'s master (the one it
/// was configured with, unless Valkyrie moved it) and waits until Valkyrie
/// names another instance of the group.
pub(crate) fn failover(
    syn: &mut Synthetic,
    c: &mut Client,
    ev: &Events,
    k: usize,
    limit: Duration,
) -> Result<Failover, String> {
    let ports = syn.groups[k];
    let name = format!("g{k}");
    let m = match master_of(c, &name)? {
        (Some(p), _) if ports.contains(&p) => p,
        (_, reply) => return Err(format!("{name}: Valkyrie names {reply:?} as its master")),
    };
    let t0 = syn.kill(m);
    loop {
        let (port, reply) = master_of(c, &name)?;
        if port.is_some_and(|p| p != m && ports.contains(&p)) {
            let total = t0.elapsed();
            // The events may reach the subscriber later than the answer:
            // give them up to 5 s.
            let (mut sdown, mut switch) = (None, None);
            let deadline = Instant::now() + Duration::from_secs(5);
            while (sdown.is_none() || switch.is_none()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
                sdown = ev
                    .first("+sdown", &format!("master {name} "), t0)
                    .map(|t| t - t0);
                switch = ev
                    .first("+switch-master", &format!("{name} "), t0)
                    .map(|t| t - t0);
            }
            return Ok(Failover {
                total,
                sdown,
                switch,
            });
        }
        if t0.elapsed() > limit {
            return Err(format!(
                "{name}: no replica named within {limit:?} (last reply {reply:?})"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

pub(crate) fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

pub(crate) fn summary(v: &[Duration]) -> String {
    if v.is_empty() {
        return "—".into();
    }
    let mut s = v.to_vec();
    let med = median(&mut s);
    format!("{} ms ({}–{})", ms(med), ms(s[0]), ms(*s.last().unwrap()))
}

pub(crate) fn opt_summary(v: &[Option<Duration>]) -> String {
    let got: Vec<Duration> = v.iter().flatten().copied().collect();
    if got.len() < v.len() {
        format!("{} (missing {})", summary(&got), v.len() - got.len())
    } else {
        summary(&got)
    }
}

pub(crate) struct FailoverRow {
    pub(crate) totals: Vec<Duration>,
    pub(crate) sdowns: Vec<Option<Duration>>,
    pub(crate) switches: Vec<Option<Duration>>,
    pub(crate) errors: Vec<String>,
}

impl FailoverRow {
    pub(crate) fn new() -> FailoverRow {
        FailoverRow {
            totals: Vec::new(),
            sdowns: Vec::new(),
            switches: Vec::new(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, r: Result<Failover, String>) {
        match r {
            Ok(f) => {
                self.totals.push(f.total);
                self.sdowns.push(f.sdown);
                self.switches.push(f.switch);
            }
            Err(e) => {
                eprintln!("  failover: {e}");
                self.errors.push(e);
            }
        }
    }

    pub(crate) fn median(&self) -> Option<Duration> {
        if self.totals.is_empty() {
            return None;
        }
        Some(median(&mut self.totals.clone()))
    }
}

pub(crate) struct SizeRow {
    pub(crate) instances: usize,
    pub(crate) down_after: &'static str,
    pub(crate) discovery: Result<Duration, String>,
    /// `+sdown`, `+odown`, `+try-failover`, `+switch-master`, `+tilt`
    /// from Valkyrie's start to the first kill: none is expected.
    pub(crate) unprovoked: [usize; 5],
    pub(crate) idle: Option<Idle>,
    pub(crate) failover: Option<FailoverRow>,
    pub(crate) warnings: (usize, Vec<String>),
    pub(crate) spurious: usize,
    /// Times the event subscription was lost.
    pub(crate) events_lost: usize,
}

pub(crate) fn baseline(bin: &Path, trials: usize, base_port: u16) -> (FailoverRow, u64) {
    let mut row = FailoverRow::new();
    let mut rss = 0;
    for t in 0..trials {
        let mut syn = Synthetic::start(1, base_port, 1);
        let v = Valkyrie::start(bin, &format!("n3-{t}"), &syn.groups, |_| true);
        let mut c = Client::connect(v.port, Duration::from_secs(10)).unwrap();
        let ev = Events::watch(v.port);
        if let Err(e) = wait_discovered(&mut c, &syn.groups, Duration::from_secs(60), v.started) {
            row.errors.push(format!("discovery: {e}"));
            continue;
        }
        std::thread::sleep(Duration::from_secs(3));
        rss = rss.max(rss_kib(v.pid()));
        let r = failover(&mut syn, &mut c, &ev, 0, Duration::from_secs(60));
        if let Ok(f) = &r {
            eprintln!("  N=3 trial {t}: {} ms", ms(f.total));
        }
        row.push(r);
    }
    (row, rss)
}

/// Which groups get `down-after-milliseconds 1000` (PING every 100 ms);
/// the others keep the default (30 s: PING every second).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timers {
    /// Every group.
    Fast,
    /// None (no failover is measured: it would take 30 s).
    Default,
    /// Only the groups whose master is killed.
    Mixed,
}

impl Timers {
    fn label(self) -> &'static str {
        match self {
            Timers::Fast => "1000 ms everywhere",
            Timers::Default => "default (30 s)",
            Timers::Mixed => "default; 1000 ms on the killed groups",
        }
    }
}

/// The group killed in trial `t`: spread over the range, never the same
/// twice.
fn trial_group(t: usize, trials: usize, groups: usize) -> usize {
    (t * groups / trials + groups / (2 * trials)).min(groups - 1)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_size(
    bin: &Path,
    groups: usize,
    base_port: u16,
    per_shard: usize,
    timers: Timers,
    idle_secs: u64,
    trials: usize,
) -> SizeRow {
    let instances = groups * 3;
    let trials = if timers == Timers::Default { 0 } else { trials };
    let label = timers.label();
    eprintln!("{instances} instances, down-after {label}: starting the synthetic instances");
    let mut syn = Synthetic::start(groups, base_port, per_shard);
    eprintln!(
        "  {} groups on {} process(es); starting valkyrie",
        syn.groups.len(),
        syn.shards.len()
    );
    let killed: Vec<usize> = (0..trials)
        .map(|t| trial_group(t, trials, groups))
        .collect();
    let v = Valkyrie::start(
        bin,
        &format!("n{instances}"),
        &syn.groups,
        |k| match timers {
            Timers::Fast => true,
            Timers::Default => false,
            Timers::Mixed => killed.contains(&k),
        },
    );
    // Both connections before the links take the descriptors.
    let mut c = Client::connect(v.port, Duration::from_secs(30)).unwrap();
    let ev = Events::watch(v.port);
    let limit = Duration::from_secs(env_num("VALKYRIE_SCALE_DISCOVERY_SECS", 180));
    let discovery = wait_discovered(&mut c, &syn.groups, limit, v.started);
    eprintln!("  discovery: {discovery:?}");
    let mut row = SizeRow {
        instances,
        down_after: label,
        discovery,
        unprovoked: [0; 5],
        idle: None,
        failover: None,
        warnings: (0, Vec::new()),
        spurious: 0,
        events_lost: 0,
    };
    // Settle: the discovery's INFO and hello bursts are over.
    std::thread::sleep(Duration::from_secs(5));
    let idle = measure_idle(&v, &mut syn, &ev, idle_secs);
    eprintln!(
        "  idle {idle_secs} s: valkyrie {:.1} % CPU, {:.1} MiB, {} fds; synthetic {:.1} % CPU; {} +sdown",
        idle.cpu_pct,
        idle.rss_kib as f64 / 1024.0,
        idle.fds,
        idle.syn_cpu_pct,
        idle.sdowns
    );
    row.idle = Some(idle);
    let now = Instant::now();
    for (i, ch) in UNPROVOKED.iter().enumerate() {
        row.unprovoked[i] = ev.count_between(ch, v.started, now);
    }
    if trials > 0 {
        let mut f = FailoverRow::new();
        let ticks_before = ev.count("+switch-master");
        for (t, &k) in killed.iter().enumerate() {
            let r = failover(&mut syn, &mut c, &ev, k, Duration::from_secs(60));
            if let Ok(x) = &r {
                eprintln!("  trial {t} (g{k}): {} ms", ms(x.total));
            }
            let failed = r.is_err();
            f.push(r);
            if failed && t + 1 < trials {
                f.errors
                    .push(format!("the other {} trials skipped", trials - t - 1));
                break;
            }
            // The remaining replica is reconfigured; the group settles.
            std::thread::sleep(Duration::from_secs(3));
        }
        row.spurious = (ev.count("+switch-master") - ticks_before).saturating_sub(trials);
        row.failover = Some(f);
    }
    row.warnings = v.warnings();
    row.events_lost = ev.lost.load(Ordering::Relaxed);
    row
}

/// Events that no healthy, untouched instance should cause.
pub(crate) const UNPROVOKED: [&str; 5] = [
    "+sdown",
    "+odown",
    "+try-failover",
    "+switch-master",
    "+tilt",
];
