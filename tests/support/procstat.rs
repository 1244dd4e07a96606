//! What `/proc` says about processes and the loopback interface, for
//! benchmarks that compare real processes: CPU time, resident memory, open
//! descriptors, loopback packets, and the TCP segments of a process's own
//! sockets (from `ss`). Also the open-file limit of this process.

use std::collections::HashMap;
use std::process::Command;

/// Clock ticks per second, the unit of `/proc/PID/stat`'s times.
pub fn clock_ticks() -> u64 {
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf (libc-bin) is needed to read /proc CPU times");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("getconf CLK_TCK printed a number")
}

/// User + system CPU time of `pid`, in clock ticks (0 once it is gone).
pub fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name may hold spaces: fields count from after its ')'.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

/// `VmRSS` of `pid`, in KiB (0 once it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Open file descriptors of `pid` (entries of `/proc/PID/fd`).
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Packets transmitted on `lo` (`/proc/net/dev`). On loopback every
/// packet is transmitted once and received once.
pub fn loopback_tx() -> u64 {
    let dev = std::fs::read_to_string("/proc/net/dev").expect("read /proc/net/dev");
    for line in dev.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() == "lo" {
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|v| v.parse().unwrap_or(0))
                .collect();
            return f[9];
        }
    }
    panic!("no lo interface in /proc/net/dev");
}

/// The 1-, 5- and 15-minute load averages, as `/proc/loadavg` prints them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Raises this process's soft open-file limit to at least `want` (within
/// the hard limit) and returns the soft limit now in force. Children
/// inherit it.
pub fn raise_nofile(want: u64) -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= want {
        return soft;
    }
    let to = limit.maximum.map_or(want, |hard| hard.min(want));
    limit.current = Some(to);
    setrlimit(Resource::Nofile, limit).expect("raise RLIMIT_NOFILE");
    to
}

/// One established TCP socket: owning process, local and peer address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SocketKey {
    pub pid: u32,
    pub local: String,
    pub peer: String,
}

/// The established TCP sockets of `pids`, with the segments each has sent
/// and received so far (`ss -tinp`: `segs_out`, `segs_in`). `ss` walks every
/// process's descriptors, so this takes a while with many processes.
pub fn socket_segments(pids: &[u32]) -> HashMap<SocketKey, (u64, u64)> {
    let out = Command::new("ss")
        .args(["-tinpH", "state", "established"])
        .output()
        .expect("ss (iproute2) is needed to count a process's own segments");
    assert!(out.status.success(), "ss -tinp failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted: Vec<String> = pids.iter().map(|p| format!("pid={p},")).collect();
    let mut sockets = HashMap::new();
    let mut current: Option<SocketKey> = None;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            // `Recv-Q Send-Q Local Peer users:(("name",pid=N,fd=M))`
            current = None;
            let f: Vec<&str> = line.split_whitespace().collect();
            let owner = pids
                .iter()
                .zip(&wanted)
                .find(|(_, w)| line.contains(w.as_str()));
            if let (Some((&pid, _)), true) = (owner, f.len() >= 4) {
                current = Some(SocketKey {
                    pid,
                    local: f[2].to_string(),
                    peer: f[3].to_string(),
                });
            }
        } else if let Some(key) = current.take() {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(name))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if let (Some(o), Some(i)) = (field("segs_out:"), field("segs_in:")) {
                sockets.insert(key, (o, i));
            }
        }
    }
    sockets
}

/// Segments per second on the sockets of `pids` between two
/// [`socket_segments`] readings `secs` apart: per process, and in total
/// with a segment between two of these processes counted once. Sockets
/// whose peer is in `skip` (a benchmark's own probes) are left out. It
/// misses sockets that closed in between.
pub fn segment_rates(
    pids: &[u32],
    before: &HashMap<SocketKey, (u64, u64)>,
    after: &HashMap<SocketKey, (u64, u64)>,
    secs: f64,
    skip: &[String],
) -> (HashMap<u32, f64>, f64) {
    let locals: std::collections::HashSet<&str> = after.keys().map(|k| k.local.as_str()).collect();
    let mut per: HashMap<u32, f64> = pids.iter().map(|&p| (p, 0.0)).collect();
    let mut total = 0u64;
    for (key, &(o1, i1)) in after {
        if skip.contains(&key.peer) {
            continue;
        }
        let (o0, i0) = before.get(key).copied().unwrap_or((0, 0));
        let (o, i) = (o1.saturating_sub(o0), i1.saturating_sub(i0));
        *per.entry(key.pid).or_default() += (o + i) as f64 / secs;
        total += o + if locals.contains(key.peer.as_str()) {
            0
        } else {
            i
        };
    }
    (per, total as f64 / secs)
}
