//! The measured windows: resource use of the monitor processes over a
//! window (CPU, RSS, descriptors, loopback and own-socket packets), the
//! idle window, one group's failover, and the mass failure (a third of the
//! masters SIGKILLed at once), each with what the monitors published.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::fleet::Fleet;
use crate::monitors::{Event, Monitors, Recorder, advertised};
use crate::support::Client;
use crate::support::procstat::{
    clock_ticks, cpu_ticks, fds, loopback_tx, rss_kib, segment_rates, socket_segments,
};

/// One process's figures over a window.
#[derive(Clone, Debug)]
pub struct ProcessUse {
    pub cpu_pct: f64,
    pub rss_kib: u64,
    pub fds: usize,
    pub segments_ps: f64,
}

/// The monitor processes' use of the machine over one window.
#[derive(Clone, Debug)]
pub struct Window {
    pub secs: f64,
    pub processes: Vec<ProcessUse>,
    /// `lo` packets per second, everything on loopback.
    pub lo_pps: f64,
    /// Segments per second of this benchmark's own probe sockets
    /// (included in `lo_pps`).
    pub probe_pps: f64,
    /// Segments per second on the monitors' own sockets, a segment between
    /// two monitors counted once.
    pub segments_ps: f64,
}

impl Window {
    pub fn cpu(&self) -> f64 {
        self.processes.iter().map(|p| p.cpu_pct).sum()
    }
    pub fn rss_kib(&self) -> u64 {
        self.processes.iter().map(|p| p.rss_kib).sum()
    }
    pub fn fds(&self) -> usize {
        self.processes.iter().map(|p| p.fds).sum()
    }
}

/// Measures `pids` (none for the servers-only baseline) while `body` runs.
pub fn measure<R>(pids: &[u32], body: impl FnOnce() -> R) -> (Window, R) {
    let me = std::process::id();
    let mut watched = pids.to_vec();
    watched.push(me);
    // `ss` walks every process's descriptors and may take a while: its
    // interval is timed from the middle of each call.
    let t = Instant::now();
    let s0 = socket_segments(&watched);
    let u0 = t + t.elapsed() / 2;
    let (a, lo0, cpu0) = (Instant::now(), loopback_tx(), cpus(pids));
    let result = body();
    let (b, lo1, cpu1) = (Instant::now(), loopback_tx(), cpus(pids));
    let t = Instant::now();
    let s1 = socket_segments(&watched);
    let u1 = t + t.elapsed() / 2;
    let secs = (b - a).as_secs_f64();
    let ticks = clock_ticks() as f64;
    let sock_secs = (u1 - u0).as_secs_f64();
    let own = |keep: &dyn Fn(u32) -> bool| {
        let before = s0.iter().filter(|(k, _)| keep(k.pid));
        let after = s1.iter().filter(|(k, _)| keep(k.pid));
        (
            before
                .map(|(k, v)| (k.clone(), *v))
                .collect::<HashMap<_, _>>(),
            after
                .map(|(k, v)| (k.clone(), *v))
                .collect::<HashMap<_, _>>(),
        )
    };
    let (p0, p1) = own(&|p| p == me);
    let (_, probe_pps) = segment_rates(&[me], &p0, &p1, sock_secs, &[]);
    let probe_addrs: Vec<String> = p1.keys().map(|k| k.local.clone()).collect();
    let (m0, m1) = own(&|p| p != me);
    let (per, segments_ps) = segment_rates(pids, &m0, &m1, sock_secs, &probe_addrs);
    let processes = pids
        .iter()
        .zip(cpu0.iter().zip(&cpu1))
        .map(|(&pid, (c0, c1))| ProcessUse {
            cpu_pct: 100.0 * c1.saturating_sub(*c0) as f64 / ticks / secs,
            rss_kib: rss_kib(pid),
            fds: fds(pid),
            segments_ps: per.get(&pid).copied().unwrap_or(0.0),
        })
        .collect();
    let window = Window {
        secs,
        processes,
        lo_pps: lo1.saturating_sub(lo0) as f64 / secs,
        probe_pps,
        segments_ps,
    };
    (window, result)
}

fn cpus(pids: &[u32]) -> Vec<u64> {
    pids.iter().map(|&p| cpu_ticks(p)).collect()
}

/// What one failover (or many at once) looked like from outside.
#[derive(Clone, Debug)]
pub struct Failovers {
    /// Group indices whose masters were killed, and their old ports.
    pub victims: Vec<(usize, String, u16)>,
    pub killed_at: Instant,
    /// Per victim and per monitor process: when it first answered
    /// `get-master-addr-by-name` with another port, and that port.
    pub answered: Vec<Vec<Option<(Duration, u16)>>>,
    /// Every event published from the kill until the end of the window.
    pub events: Vec<Event>,
    /// `+switch-master` of groups that were not killed.
    pub stray_switches: usize,
}

impl Failovers {
    /// For victim `v`: the first instant any process published `channel`
    /// for its group, after the kill.
    pub fn first(&self, v: usize, channel: &str) -> Option<Duration> {
        let name = &self.victims[v].1;
        self.events
            .iter()
            .filter(|e| e.channel == channel && e.group() == Some(name.as_str()))
            .map(|e| e.at - self.killed_at)
            .min()
    }

    /// Every event on `channel` (any group), after the kill.
    pub fn all(&self, channel: &str) -> Vec<Duration> {
        self.events
            .iter()
            .filter(|e| e.channel == channel)
            .map(|e| e.at - self.killed_at)
            .collect()
    }

    /// The most replicas of one group being reconfigured at once by one
    /// process (`+slave-reconf-sent` not yet `+slave-reconf-done`).
    pub fn max_reconf_in_flight(&self) -> usize {
        let mut in_flight: HashMap<(usize, String), i64> = HashMap::new();
        let mut most = 0i64;
        for e in &self.events {
            let Some(g) = e.group() else { continue };
            let n = in_flight.entry((e.process, g.to_string())).or_default();
            match e.channel.as_str() {
                "+slave-reconf-sent" => *n += 1,
                "+slave-reconf-done" => *n -= 1,
                _ => {}
            }
            most = most.max(*n);
        }
        most as usize
    }
}

/// SIGKILLs the masters of `victims` at once and follows the failovers:
/// polls every monitor process's `get-master-addr-by-name` for each victim
/// every 50 ms until all answer another master and every victim has
/// `+failover-end` (or `limit` passes), then waits `post` more.
pub fn kill_and_follow(
    fleet: &mut Fleet,
    monitors: &Monitors,
    recorder: &Recorder,
    victims: &[usize],
    limit: Duration,
    post: Duration,
) -> Failovers {
    let mut clients: Vec<Client> = monitors
        .ports
        .iter()
        .map(|&p| Client::connect(p).expect("connect to a monitor"))
        .collect();
    let named: Vec<(usize, String, u16)> = victims
        .iter()
        .map(|&g| (g, fleet.groups[g].name.clone(), fleet.groups[g].master))
        .collect();
    let mut answered = vec![vec![None; clients.len()]; victims.len()];
    let killed_at = fleet.kill_masters(victims);
    let deadline = killed_at + limit;
    loop {
        for (v, (_, name, old)) in named.iter().enumerate() {
            for (i, c) in clients.iter_mut().enumerate() {
                if answered[v][i].is_none()
                    && let Some(port) = advertised(c, name).filter(|p| p != old)
                {
                    answered[v][i] = Some((killed_at.elapsed(), port));
                }
            }
        }
        let all_answered = answered.iter().flatten().all(Option::is_some);
        let events = recorder.since(killed_at);
        let ended = named.iter().all(|(_, name, _)| {
            events
                .iter()
                .any(|e| e.channel == "+failover-end" && e.group() == Some(name.as_str()))
        });
        if (all_answered && ended) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(post);
    let events = recorder.since(killed_at);
    let stray_switches = events
        .iter()
        .filter(|e| {
            e.channel == "+switch-master"
                && !named.iter().any(|(_, n, _)| e.group() == Some(n.as_str()))
        })
        .count();
    Failovers {
        victims: named,
        killed_at,
        answered,
        events,
        stray_switches,
    }
}
