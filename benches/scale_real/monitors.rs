//! The monitors under test, as processes: one Valkyrie (the bench build of
//! this crate's binary) or three real valkey-sentinels (quorum 2), both
//! watching every group of the fleet with the same `down-after`; their
//! readiness; and a recorder of every event their Sentinel ports publish,
//! with the instant each arrived.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::fleet::Group;
use crate::support::sentinel::RealSentinel;
use crate::support::{Client, free_port, try_call};
use valkyrie_protocol::Frame;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    Valkyrie,
    Sentinels,
}

impl System {
    pub fn label(self) -> &'static str {
        match self {
            System::Valkyrie => "Valkyrie",
            System::Sentinels => "3 × valkey-sentinel",
        }
    }
}

/// One Valkyrie process, killed by PID on drop.
struct ValkyrieProcess {
    child: Child,
}

impl Drop for ValkyrieProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The running monitor processes of one system.
pub struct Monitors {
    pub system: System,
    /// Sentinel ports, one per process.
    pub ports: Vec<u16>,
    pub pids: Vec<u32>,
    _valkyrie: Option<ValkyrieProcess>,
    _sentinels: Vec<RealSentinel>,
}

/// The `sentinel monitor` lines of every group, with `quorum`.
fn monitor_lines(groups: &[Group], quorum: u32, down_after_ms: u64) -> String {
    groups
        .iter()
        .map(|g| {
            format!(
                "sentinel monitor {n} 127.0.0.1 {m} {quorum}\n\
                 sentinel down-after-milliseconds {n} {down_after_ms}\n",
                n = g.name,
                m = g.master
            )
        })
        .collect()
}

impl Monitors {
    /// Starts `system` on the fleet's current masters in `dir`.
    pub fn start(system: System, dir: &Path, groups: &[Group], down_after_ms: u64) -> Monitors {
        match system {
            System::Valkyrie => {
                let own = dir.join("valkyrie");
                std::fs::create_dir_all(&own).expect("create valkyrie's directory");
                // The state file alone in its directory: Valkyrie warns
                // about a state directory holding other files.
                let state = own.join("state");
                std::fs::create_dir_all(&state).expect("create valkyrie's state directory");
                let port = free_port();
                let conf = own.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {}\nindex-port 0\nadmin-port 0\n{}",
                        state.display(),
                        monitor_lines(groups, 1, down_after_ms)
                    ),
                )
                .expect("write valkyrie's configuration");
                let log = std::fs::File::create(own.join("valkyrie.log")).expect("create log");
                let child = Command::new(valkyrie_bin())
                    .arg(&conf)
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("start valkyrie");
                let pid = child.id();
                let process = ValkyrieProcess { child };
                wait_port(port);
                Monitors {
                    system,
                    ports: vec![port],
                    pids: vec![pid],
                    _valkyrie: Some(process),
                    _sentinels: Vec::new(),
                }
            }
            System::Sentinels => {
                let sentinels: Vec<RealSentinel> = (0..3)
                    .map(|i| {
                        let own = dir.join(format!("sentinel-{i}"));
                        std::fs::create_dir_all(&own).expect("create a sentinel's directory");
                        RealSentinel::start(
                            &own,
                            &format!(
                                "logfile {}\n{}",
                                own.join("sentinel.log").display(),
                                monitor_lines(groups, 2, down_after_ms)
                            ),
                        )
                    })
                    .collect();
                Monitors {
                    system,
                    ports: sentinels.iter().map(|s| s.port).collect(),
                    pids: sentinels.iter().map(RealSentinel::pid).collect(),
                    _valkyrie: None,
                    _sentinels: sentinels,
                }
            }
        }
    }

    /// Waits until every process lists every group with two replicas, the
    /// other processes as peers, and no group down or failing over.
    pub fn wait_ready(&self, groups: usize, limit: Duration) {
        let others = self.ports.len() - 1;
        let deadline = Instant::now() + limit;
        for &p in &self.ports {
            while !ready(p, groups, others) {
                assert!(
                    Instant::now() < deadline,
                    "{} on port {p} did not discover every group within {limit:?}",
                    self.system.label()
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

/// The daemon under test: `VALKYRIE_BIN` (a copy pinned for a long run),
/// else this build's own binary.
pub fn valkyrie_bin() -> std::path::PathBuf {
    std::env::var_os("VALKYRIE_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_valkyrie").into(),
        std::path::PathBuf::from,
    )
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(try_call(port, &["PING"]), Ok(Frame::Simple(_))) {
        assert!(
            Instant::now() < deadline,
            "monitor port {port} does not answer"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn text(f: &Frame) -> String {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

fn ready(port: u16, groups: usize, others: usize) -> bool {
    crate::support::sentinel::masters_settled(port, groups, 2, others)
}

/// One published event: when it arrived, from which process (index into
/// [`Monitors::ports`]), its channel and payload.
#[derive(Clone, Debug)]
pub struct Event {
    pub at: Instant,
    pub process: usize,
    pub channel: String,
    pub payload: String,
}

impl Event {
    /// The group the event is about: `<name>` of `master <name> …`, of
    /// `… @ <name> …`, or the first word (`+switch-master <name> …`).
    pub fn group(&self) -> Option<&str> {
        let words: Vec<&str> = self.payload.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "@") {
            return words.get(i + 1).copied();
        }
        match words.first() {
            Some(&"master") => words.get(1).copied(),
            Some(w) if !w.starts_with('#') => Some(w),
            _ => None,
        }
    }
}

/// Every event of every process of a system (`PSUBSCRIBE *`), until
/// dropped.
pub struct Recorder {
    seen: Arc<Mutex<Vec<Event>>>,
    running: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Recorder {
    pub fn start(ports: &[u16]) -> Recorder {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let threads = ports
            .iter()
            .enumerate()
            .map(|(process, &port)| {
                let mut sub = Client::connect_timeout(port, Duration::from_millis(200))
                    .expect("connect to a monitor's Sentinel port");
                // The confirmation is the first frame: subscribed before
                // this returns, so nothing after it is missed.
                sub.call(&["PSUBSCRIBE", "*"]).expect("PSUBSCRIBE *");
                let (seen, running) = (seen.clone(), running.clone());
                std::thread::spawn(move || {
                    while running.load(Ordering::Relaxed) {
                        let Ok(Frame::Array(parts)) = sub.read() else {
                            continue;
                        };
                        if parts.len() == 4 {
                            let event = Event {
                                at: Instant::now(),
                                process,
                                channel: text(&parts[2]),
                                payload: text(&parts[3]),
                            };
                            seen.lock().expect("events lock").push(event);
                        }
                    }
                })
            })
            .collect();
        Recorder {
            seen,
            running,
            threads,
        }
    }

    /// Every event since `since`.
    pub fn since(&self, since: Instant) -> Vec<Event> {
        self.seen
            .lock()
            .expect("events lock")
            .iter()
            .filter(|e| e.at >= since)
            .cloned()
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The port `port` (a monitor) advertises as `group`'s master.
pub fn advertised(client: &mut Client, group: &str) -> Option<u16> {
    match client
        .call(&["SENTINEL", "get-master-addr-by-name", group])
        .ok()?
    {
        Frame::Array(v) if v.len() == 2 => text(&v[1]).parse().ok(),
        _ => None,
    }
}
