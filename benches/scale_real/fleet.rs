//! The fleet: `groups` × (a master and two replicas) of real
//! `valkey-server` processes on loopback ports above the kernel's
//! ephemeral range, started in parallel, checked for health, SIGKILLed and
//! brought back; every process is killed by PID when the fleet is dropped
//! (also when the benchmark panics).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Client, try_call};
use valkyrie_protocol::Frame;

/// One group: its master's port and its replicas' ports, as they are now.
#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    pub master: u16,
    pub replicas: Vec<u16>,
}

/// Every valkey-server process of the benchmark, by port.
pub struct Fleet {
    bin: PathBuf,
    dir: PathBuf,
    pub groups: Vec<Group>,
    children: HashMap<u16, Child>,
}

/// `n` free loopback ports above the ephemeral range (where no outgoing
/// connection takes its source port), starting at a spot that differs from
/// run to run.
pub fn high_ports(n: usize) -> Vec<u16> {
    let ephemeral_top = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u16>().ok())
        })
        .unwrap_or(60999);
    let (lo, hi) = (ephemeral_top.saturating_add(1).max(1025), 65535u16);
    let span = u32::from(hi - lo);
    assert!(
        span as usize > n,
        "only {span} ports above the ephemeral range for {n} servers"
    );
    let mut port = lo + (std::process::id() * 7919 % span) as u16;
    let mut found = Vec::with_capacity(n);
    for _ in 0..span {
        port = if port >= hi { lo } else { port + 1 };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            found.push(port);
            if found.len() == n {
                return found;
            }
        }
    }
    panic!("fewer than {n} free ports in {lo}-{hi}");
}

impl Fleet {
    /// Starts every master at once, then every replica at once, and
    /// returns when every replica reports an up link to its master.
    pub fn start(bin: &Path, dir: &Path, groups: usize) -> Fleet {
        let ports = high_ports(3 * groups);
        let mut fleet = Fleet {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            groups: (0..groups)
                .map(|g| Group {
                    name: format!("g{}", g + 1),
                    master: ports[3 * g],
                    replicas: vec![ports[3 * g + 1], ports[3 * g + 2]],
                })
                .collect(),
            children: HashMap::new(),
        };
        let masters: Vec<u16> = fleet.groups.iter().map(|g| g.master).collect();
        for &m in &masters {
            fleet.spawn(m, None);
        }
        wait_answering(&masters, Duration::from_secs(60));
        let pairs: Vec<(u16, u16)> = fleet
            .groups
            .iter()
            .flat_map(|g| g.replicas.iter().map(move |&r| (r, g.master)))
            .collect();
        for (r, m) in pairs {
            fleet.spawn(r, Some(m));
        }
        fleet.wait_healthy(None, Duration::from_secs(120));
        fleet
    }

    fn spawn(&mut self, port: u16, replicaof: Option<u16>) {
        // A directory per server: a replica's synced RDB must not be
        // what another server (a killed master coming back) loads.
        let dir = self.dir.join(format!("n{port}"));
        std::fs::create_dir_all(&dir).expect("create a server's directory");
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("valkey.log"))
            .args(["--maxclients", "10000"])
            .args(["--repl-diskless-sync", "yes"])
            .args(["--repl-diskless-sync-delay", "0"]);
        if let Some(m) = replicaof {
            cmd.args(["--replicaof", "127.0.0.1"]).arg(m.to_string());
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.bin.display()));
        self.children.insert(port, child);
    }

    /// The process id of the server on `port`.
    pub fn pid(&self, port: u16) -> u32 {
        self.children[&port].id()
    }

    /// SIGKILLs the masters of `groups` (indices) back to back, and returns
    /// the instant the first signal went out. The processes are reaped
    /// later, by [`Fleet::bring_back`].
    pub fn kill_masters(&mut self, groups: &[usize]) -> Instant {
        let pids: Vec<i32> = groups
            .iter()
            .map(|&g| self.pid(self.groups[g].master) as i32)
            .collect();
        let start = Instant::now();
        for pid in pids {
            let pid = rustix::process::Pid::from_raw(pid).expect("a child's pid is positive");
            rustix::process::kill_process(pid, rustix::process::Signal::KILL)
                .expect("SIGKILL a master");
        }
        start
    }

    /// After a failover of each of `groups`: asks the survivors which one
    /// is the master now, and starts the killed master again, empty, on its
    /// own port as a replica of it. Returns when those groups are healthy.
    pub fn bring_back(&mut self, groups: &[usize]) {
        for &g in groups {
            let old = self.groups[g].master;
            if let Some(mut c) = self.children.remove(&old) {
                let _ = c.kill();
                let _ = c.wait();
            }
            let promoted = self.groups[g]
                .replicas
                .iter()
                .copied()
                .find(|&r| role(r).as_deref() == Some("master"));
            let Some(now) = promoted else {
                // Not failed over (the report says so): the old master
                // comes back, empty, as master, and its replicas follow
                // it again, so the next system watches a whole group.
                eprintln!(
                    "{}: not failed over; restarting its master",
                    self.groups[g].name
                );
                self.spawn(old, None);
                wait_answering(&[old], Duration::from_secs(30));
                for &r in &self.groups[g].replicas {
                    let port = old.to_string();
                    let _ = try_call(r, &["REPLICAOF", "127.0.0.1", &port]);
                }
                continue;
            };
            let group = &mut self.groups[g];
            group.master = now;
            for r in group.replicas.iter_mut() {
                if *r == now {
                    *r = old;
                }
            }
            self.spawn(old, Some(now));
        }
        self.wait_healthy(Some(groups), Duration::from_secs(60));
    }

    /// Waits until every master of `only` (all groups when `None`) has
    /// both replicas online and each replica an up link to it.
    pub fn wait_healthy(&self, only: Option<&[usize]>, limit: Duration) {
        let all: Vec<usize> = (0..self.groups.len()).collect();
        let mut pending: Vec<usize> = only.unwrap_or(&all).to_vec();
        let deadline = Instant::now() + limit;
        loop {
            pending.retain(|&g| !healthy(&self.groups[g]));
            if pending.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "groups not healthy within {limit:?}: {:?}",
                pending
                    .iter()
                    .take(10)
                    .map(|&g| &self.groups[g].name)
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in self.children.values_mut() {
            let _ = c.kill();
        }
        for c in self.children.values_mut() {
            let _ = c.wait();
        }
    }
}

/// Waits until every port answers `PING`.
fn wait_answering(ports: &[u16], limit: Duration) {
    let deadline = Instant::now() + limit;
    for &p in ports {
        while !matches!(try_call(p, &["PING"]), Ok(Frame::Simple(_))) {
            assert!(Instant::now() < deadline, "port {p} does not answer PING");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `INFO replication` of `port` as fields.
pub fn replication(port: u16) -> Option<HashMap<String, String>> {
    let mut c = Client::connect_timeout(port, Duration::from_secs(2)).ok()?;
    let f = c.call(&["INFO", "replication"]).ok()?;
    let text = String::from_utf8_lossy(f.as_bytes()?).into_owned();
    Some(
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect(),
    )
}

fn role(port: u16) -> Option<String> {
    replication(port)?.get("role").cloned()
}

fn healthy(g: &Group) -> bool {
    let Some(m) = replication(g.master) else {
        return false;
    };
    if m.get("role").map(String::as_str) != Some("master") {
        return false;
    }
    let online = |r: u16| {
        m.iter()
            .any(|(k, v)| k.starts_with("slave") && v.contains(&format!("port={r},state=online")))
    };
    g.replicas.iter().all(|&r| {
        online(r)
            && replication(r).is_some_and(|i| {
                i.get("role").map(String::as_str) == Some("slave")
                    && i.get("master_port") == Some(&g.master.to_string())
                    && i.get("master_link_status").map(String::as_str) == Some("up")
            })
    })
}
