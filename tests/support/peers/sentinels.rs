//! The sentinel processes: their specifications, each one's uid,
//! directory and process (started as its uid, killed by PID), the
//! deployment's queries and actions on them, and the tripwire that kills
//! one on an event.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use valkyrie_protocol::Frame;

use super::conn::{Conn, ConnErr, kv, text};
use super::records::Sent;
use super::{Deployment, GROUP, poll};
use crate::support::{free_port, try_call};

/// Which implementation a sentinel process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// This repository's daemon.
    Valkyrie,
    /// valkey-sentinel.
    Real,
}

/// One sentinel process's settings for `mymaster`.
#[derive(Clone, Debug)]
pub struct Spec {
    pub kind: Kind,
    pub quorum: u32,
    pub down_after_ms: u64,
    pub failover_timeout_ms: u64,
}

impl Spec {
    /// A Valkyrie: quorum 2, down-after 1000, failover-timeout 6000.
    pub fn valkyrie() -> Spec {
        Spec {
            kind: Kind::Valkyrie,
            quorum: 2,
            down_after_ms: 1000,
            failover_timeout_ms: 6000,
        }
    }

    /// A real sentinel with the same defaults.
    pub fn real() -> Spec {
        Spec {
            kind: Kind::Real,
            ..Spec::valkyrie()
        }
    }

    pub fn quorum(mut self, q: u32) -> Spec {
        self.quorum = q;
        self
    }

    pub fn down_after(mut self, ms: u64) -> Spec {
        self.down_after_ms = ms;
        self
    }

    pub fn failover_timeout(mut self, ms: u64) -> Spec {
        self.failover_timeout_ms = ms;
        self
    }
}

static NEXT_UID: AtomicU32 = AtomicU32::new(0);

/// A uid (also used as the connection mark) for one sentinel process,
/// distinct across the deployments of this test process and unlikely to
/// collide with another test process's.
pub(super) fn next_uid() -> u32 {
    300_000 + (std::process::id() % 20_000) * 64 + NEXT_UID.fetch_add(1, Ordering::Relaxed) % 64
}

/// One sentinel process of the deployment.
#[derive(Debug)]
pub struct Sentinel {
    pub idx: usize,
    pub spec: Spec,
    pub port: u16,
    /// Its uid and connection mark.
    pub uid: u32,
    pub dir: PathBuf,
    pub conf: PathBuf,
    /// Its stdout/stderr (RUST_LOG=info for a Valkyrie).
    pub log: PathBuf,
    pub(super) bin: PathBuf,
    pub(super) child: Option<Child>,
    /// Its run id (`SENTINEL MYID`), known once started.
    pub myid: String,
}

impl Sentinel {
    pub fn is_valkyrie(&self) -> bool {
        self.spec.kind == Kind::Valkyrie
    }

    pub fn alive(&self) -> bool {
        self.child.is_some()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The first 8 characters of its id, as in its connection names.
    pub fn short(&self) -> &str {
        &self.myid[..self.myid.len().min(8)]
    }

    /// `valkyrie#0` / `sentinel#1` with its port, for messages.
    pub fn label(&self) -> String {
        let k = if self.is_valkyrie() {
            "valkyrie"
        } else {
            "sentinel"
        };
        format!("{k}#{}:{}", self.idx, self.port)
    }

    pub(super) fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the log");
        let mut cmd = Command::new(&self.bin);
        cmd.arg(&self.conf)
            .current_dir(&self.dir)
            .uid(self.uid)
            .gid(self.uid)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log);
        self.child = Some(cmd.spawn().expect("start the sentinel"));
        let port = self.port;
        let id = poll(Duration::from_secs(15), || {
            match try_call(port, &["SENTINEL", "MYID"]) {
                Ok(f) if text(&f).len() == 40 => Ok(text(&f)),
                other => Err(format!("SENTINEL MYID: {other:?}")),
            }
        });
        match id {
            Ok(id) => self.myid = id,
            Err(e) => panic!(
                "{} did not start: {e}\n--- log tail ---\n{}",
                self.label(),
                tail(&self.log, 30)
            ),
        }
    }

    /// SIGKILL by PID, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Deployment {
    /// SIGKILL sentinel `i`.
    pub fn kill_sentinel(&mut self, i: usize) {
        self.sentinels[i].kill();
    }

    /// Starts sentinel `i` again from its directory (same configuration
    /// and state); returns its id once it answers and its tap is back.
    pub fn start_sentinel(&mut self, i: usize) -> String {
        let before = self.event_gen[i].load(Ordering::SeqCst);
        self.sentinels[i].spawn();
        self.wait_tap(i, before);
        self.sentinels[i].myid.clone()
    }

    /// Moves sentinel `i` to a new port: SIGKILL, its configuration's
    /// `port` line rewritten (its id and state stay), started again.
    /// Returns the new port. Its event tap stays on the old port.
    pub fn move_sentinel(&mut self, i: usize) -> u16 {
        self.sentinels[i].kill();
        let port = free_port();
        let conf = std::fs::read_to_string(&self.sentinels[i].conf).unwrap();
        let moved: Vec<String> = conf
            .lines()
            .map(|l| {
                if l.starts_with("port ") {
                    format!("port {port}")
                } else {
                    l.to_string()
                }
            })
            .collect();
        std::fs::write(&self.sentinels[i].conf, moved.join("\n") + "\n").unwrap();
        self.sentinels[i].port = port;
        self.sentinels[i].spawn();
        port
    }

    /// The index of the sentinel whose id starts with `prefix` (8+ chars).
    pub fn sentinel_by_id(&self, prefix: &str) -> Option<usize> {
        if prefix.len() < 8 {
            return None;
        }
        self.sentinels
            .iter()
            .position(|s| !s.myid.is_empty() && s.myid.starts_with(prefix))
    }

    /// The sentinel a replication command came from, by its client name
    /// `sentinel-<8>-cmd`.
    pub fn sender(&self, s: &Sent) -> Option<usize> {
        let short = s.name.strip_prefix("sentinel-")?.split('-').next()?;
        self.sentinel_by_id(short)
    }

    /// The master port sentinel `i` advertises.
    pub fn advertised(&self, i: usize) -> Option<u16> {
        crate::support::advertised_master(self.sentinels[i].port)
    }

    /// Field `name` of `SENTINEL MASTER mymaster` on sentinel `i`.
    pub fn master_field(&self, i: usize, name: &str) -> Option<String> {
        crate::support::master_field(self.sentinels[i].port, name)
    }

    /// Sentinel `i`'s `config-epoch`.
    pub fn config_epoch(&self, i: usize) -> Option<u64> {
        self.master_field(i, "config-epoch")
            .and_then(|v| v.parse().ok())
    }

    /// `SENTINEL sentinels mymaster` on sentinel `i`, one map per peer.
    pub fn peers_of(&self, i: usize) -> Result<Vec<BTreeMap<String, String>>, String> {
        match try_call(self.sentinels[i].port, &["SENTINEL", "SENTINELS", GROUP]) {
            Ok(Frame::Array(v)) => Ok(v.iter().map(kv).collect()),
            other => Err(format!(
                "{}: SENTINEL sentinels: {other:?}",
                self.sentinels[i].label()
            )),
        }
    }

    /// The live sentinels' indices.
    pub fn live(&self) -> Vec<usize> {
        self.sentinels
            .iter()
            .filter(|s| s.alive())
            .map(|s| s.idx)
            .collect()
    }

    /// Arms a tripwire: the first sentinel of `among` to publish an event
    /// on `channel` is sent SIGKILL at once, from the watching thread (no
    /// polling delay). Returns once every watcher is subscribed. The test
    /// reaps the process afterwards with [`Deployment::kill_sentinel`].
    pub fn kill_on_event(&self, among: &[usize], channel: &str) -> Tripwire {
        let fired: Arc<Mutex<Option<(usize, Duration)>>> = Arc::new(Mutex::new(None));
        let running = Arc::new(AtomicBool::new(true));
        let ready = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for &i in among {
            let s = &self.sentinels[i];
            let pid = s.pid().expect("a live sentinel");
            let (port, channel) = (s.port, channel.to_string());
            let (fired, running, ready, rec) = (
                fired.clone(),
                running.clone(),
                ready.clone(),
                self.rec.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut c = Conn::connect(port, Duration::from_millis(20)).expect("sentinel port");
                c.send(&["SUBSCRIBE", &channel]).expect("SUBSCRIBE");
                while running.load(Ordering::Relaxed) {
                    match c.read() {
                        Ok(Frame::Array(p)) if p.len() == 3 && text(&p[0]) == "subscribe" => {
                            ready.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(Frame::Array(p)) if p.len() == 3 && text(&p[0]) == "message" => {
                            let mut f = fired.lock().unwrap_or_else(|e| e.into_inner());
                            if f.is_none() {
                                let pid = rustix::process::Pid::from_raw(pid as i32)
                                    .expect("a process id");
                                let _ = rustix::process::kill_process(
                                    pid,
                                    rustix::process::Signal::KILL,
                                );
                                *f = Some((i, rec.now()));
                            }
                            return;
                        }
                        Ok(_) | Err(ConnErr::Timeout) => {}
                        Err(ConnErr::Closed) => return,
                    }
                }
            }));
        }
        let n = among.len() as u64;
        if let Err(e) = poll(Duration::from_secs(5), || {
            if ready.load(Ordering::SeqCst) >= n {
                Ok(())
            } else {
                Err(format!("tripwire on {channel}: watchers not subscribed"))
            }
        }) {
            panic!("{e}");
        }
        Tripwire {
            fired,
            running,
            threads,
        }
    }

    /// The tail of sentinel `i`'s log.
    pub fn log_tail(&self, i: usize, n: usize) -> String {
        tail(&self.sentinels[i].log, n)
    }
}

/// See [`Deployment::kill_on_event`].
#[derive(Debug)]
pub struct Tripwire {
    fired: Arc<Mutex<Option<(usize, Duration)>>>,
    running: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Tripwire {
    /// Waits until it fired: which sentinel it killed, and when.
    pub fn wait(&self, limit: Duration) -> Result<(usize, Duration), String> {
        poll(limit, || {
            self.fired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .ok_or_else(|| "the tripwire did not fire".to_string())
        })
    }
}

impl Drop for Tripwire {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
