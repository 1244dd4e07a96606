//! A deployment of several sentinel processes — Valkyries and/or real
//! valkey-sentinel 8.0.1 — monitoring one master and two replicas
//! (valkey-server, `--save ''`), observed from outside as the peering
//! specification's test plan asks (docs: sentinel-peering.md §11).
//!
//! Every sentinel process has its own directory, configuration file and
//! log, and runs as a uid of its own so that one of them can be cut off
//! the network (see "Cuts" below). The observers, all recorded with the
//! time since the deployment started:
//!
//! 1. an event tap on every sentinel (`PSUBSCRIBE *`, reconnecting across
//!    restarts);
//! 2. a hello tap on every data node (`SUBSCRIBE __sentinel__:hello`):
//!    run id, current epoch, advertised master, config epoch of every hello;
//! 3. the replication commands every data node executed (`REPLICAOF` /
//!    `SLAVEOF`, inside `MULTI` too), with the client's address and name.
//!    `MONITOR` cannot give these: Valkey leaves admin commands (REPLICAOF,
//!    SLAVEOF, CONFIG) out of its output. The slow log with a threshold of
//!    0 records every command with the client's name, so it is polled
//!    (every ~30 ms, by id) instead. A sentinel's commands are attributed to
//!    it through the name `sentinel-<first 8 of its id>-cmd`;
//! 4. pollers on demand (`SENTINEL get-master-addr-by-name`, `SENTINEL
//!    master`, `SENTINEL sentinels`, `CKQUORUM`, `INFO replication`).
//!
//! Invariant checks (§11.2) return `Result<(), String>` with a readable
//! message: I1 (one master address per configuration epoch in all hellos),
//! I2 (one vote per sentinel and epoch), I3 (one leader per epoch, every
//! promotion sent by a sentinel elected in an epoch, at most one target per
//! epoch), I5 (one master in the data), I6 (hello epochs never decrease per
//! run id), I7 (every sentinel lists the others, `CKQUORUM` OK), I8 (no
//! `WAIT`-acknowledged write lost, with [`AckWriter`]).
//!
//! Cuts: every sentinel's connections are marked (`CONNMARK`, in the
//! mangle table) with its uid when it opens them. Isolating sentinel `i`
//! drops every packet of a connection `i` opened (both directions: its
//! requests and what the data nodes push to its pub/sub links) and every
//! packet of the connections the other sentinels opened to `i`'s port. The
//! test's own connections (taps, pollers) are untouched, so `i`'s events
//! stay visible during the cut. Rules are removed when the [`Rules`] guard
//! is dropped (the path heals).
//!
//! Needs root (iptables, setuid); a missing piece fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

use super::cut::{iptables_bin, require_root};
use super::sentinel::valkey_sentinel;
use super::{Server, TempDir, free_port, info_field, start_trio, try_call, valkey_server};

/// The monitored group's name.
pub const GROUP: &str = "mymaster";

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the deployments of one test binary: each is a handful of
/// processes whose timers matter, and CI machines have few cores.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Polls `f` every 20 ms until it returns `Ok`; after `limit`, the last
/// error, prefixed with how long was waited.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let start = Instant::now();
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if start.elapsed() >= limit => {
                return Err(format!("not within {limit:?}: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

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

// ---------------------------------------------------------------------
// A connection that tells a read timeout from a closed connection.

/// Why a read returned no frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnErr {
    /// Nothing complete arrived within the read timeout.
    Timeout,
    /// Closed, reset or undecodable.
    Closed,
}

/// A RESP connection (client or server side) with a short read timeout.
#[derive(Debug)]
pub struct Conn {
    pub stream: TcpStream,
    dec: FrameDecoder,
    buf: BytesMut,
}

impl Conn {
    /// Connects to `127.0.0.1:port`.
    pub fn connect(port: u16, read_timeout: Duration) -> Option<Conn> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
        Conn::from_stream(stream, read_timeout)
    }

    /// Wraps an accepted or connected socket.
    pub fn from_stream(stream: TcpStream, read_timeout: Duration) -> Option<Conn> {
        stream.set_read_timeout(Some(read_timeout)).ok()?;
        let _ = stream.set_nodelay(true);
        Some(Conn {
            stream,
            dec: FrameDecoder::new(),
            buf: BytesMut::new(),
        })
    }

    /// Writes `args` as a command.
    pub fn send(&mut self, args: &[&str]) -> Result<(), ConnErr> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.write_raw(&out)
    }

    /// Writes bytes as they are.
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ConnErr> {
        self.stream.write_all(bytes).map_err(|_| ConnErr::Closed)
    }

    /// The next frame, or why none came within the read timeout.
    pub fn read(&mut self) -> Result<Frame, ConnErr> {
        loop {
            match self.dec.decode(&mut self.buf) {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(_) => return Err(ConnErr::Closed),
            }
            let mut chunk = [0u8; 16384];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ConnErr::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ConnErr::Timeout);
                }
                Err(_) => return Err(ConnErr::Closed),
            }
        }
    }

    /// Sends `args` and waits up to `limit` for the reply.
    pub fn call(&mut self, args: &[&str], limit: Duration) -> Result<Frame, ConnErr> {
        self.send(args)?;
        let deadline = Instant::now() + limit;
        loop {
            match self.read() {
                Err(ConnErr::Timeout) if Instant::now() < deadline => {}
                r => return r,
            }
        }
    }
}

/// The text of a string-like frame.
pub fn text(f: &Frame) -> String {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// A flat key/value array as a map (`SENTINEL master`, one entry of
/// `SENTINEL sentinels`).
pub fn kv(f: &Frame) -> BTreeMap<String, String> {
    match f {
        Frame::Array(v) => v
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        _ => BTreeMap::new(),
    }
}

// ---------------------------------------------------------------------
// Records.

/// One event a sentinel published.
#[derive(Clone, Debug)]
pub struct Event {
    /// When the tap received it, since the deployment started.
    pub at: Duration,
    /// The sentinel's index in the deployment.
    pub sentinel: usize,
    pub channel: String,
    pub payload: String,
}

impl Event {
    /// The payload's space-separated words.
    pub fn words(&self) -> Vec<&str> {
        self.payload.split(' ').collect()
    }
}

/// One hello seen on a data node's `__sentinel__:hello` channel.
#[derive(Clone, Debug)]
pub struct Hello {
    pub at: Duration,
    /// The data node's port it was published on.
    pub node: u16,
    pub raw: String,
    pub ip: String,
    pub port: u16,
    pub runid: String,
    pub current_epoch: u64,
    pub master: String,
    pub master_ip: String,
    pub master_port: u16,
    pub config_epoch: u64,
}

impl Hello {
    /// Parses a hello payload (exactly 8 comma-separated fields).
    pub fn parse(at: Duration, node: u16, raw: &str) -> Option<Hello> {
        let f: Vec<&str> = raw.split(',').collect();
        if f.len() != 8 {
            return None;
        }
        Some(Hello {
            at,
            node,
            raw: raw.to_string(),
            ip: f[0].to_string(),
            port: f[1].parse().ok()?,
            runid: f[2].to_string(),
            current_epoch: f[3].parse().ok()?,
            master: f[4].to_string(),
            master_ip: f[5].to_string(),
            master_port: f[6].parse().ok()?,
            config_epoch: f[7].parse().ok()?,
        })
    }
}

/// A replication command (`REPLICAOF`/`SLAVEOF`) a data node executed.
#[derive(Clone, Debug)]
pub struct Sent {
    /// When the slow-log poller first saw it (≤ ~50 ms after it ran).
    pub at: Duration,
    /// The data node's port.
    pub node: u16,
    /// The client's `ip:port`.
    pub client: String,
    /// The client's name (`CLIENT SETNAME`), empty when unnamed.
    pub name: String,
    pub args: Vec<String>,
}

impl Sent {
    /// `REPLICAOF NO ONE` / `SLAVEOF NO ONE`.
    pub fn is_promotion(&self) -> bool {
        self.args.len() == 3
            && self.args[1].eq_ignore_ascii_case("no")
            && self.args[2].eq_ignore_ascii_case("one")
    }
}

#[derive(Debug, Default)]
struct Log {
    events: Vec<Event>,
    hellos: Vec<Hello>,
    sent: Vec<Sent>,
    /// Hellos that did not parse, and slow-log gaps: observer trouble.
    trouble: Vec<String>,
}

#[derive(Clone, Debug)]
struct Recorder {
    start: Instant,
    log: Arc<Mutex<Log>>,
}

impl Recorder {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An election a sentinel won: `+elected-leader`, with the epoch of the
/// failover attempt it belongs to (its self-vote after `+try-failover`,
/// else the `+new-epoch` just before `+try-failover`).
#[derive(Clone, Debug)]
pub struct Election {
    pub sentinel: usize,
    pub epoch: Option<u64>,
    pub at: Duration,
}

// ---------------------------------------------------------------------
// Taps.

type Session = Box<dyn FnMut(&mut Conn, &AtomicBool) + Send>;

/// Runs `session` on a connection to `port` until `running` is cleared,
/// reconnecting whenever the connection fails (restarts, kills).
fn tap(running: Arc<AtomicBool>, port: u16, mut session: Session) -> JoinHandle<()> {
    std::thread::spawn(move || {
        while running.load(Ordering::Relaxed) {
            match Conn::connect(port, Duration::from_millis(100)) {
                Some(mut c) => session(&mut c, &running),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}

/// `PSUBSCRIBE *` on sentinel `idx`; `ready` counts confirmed subscriptions.
fn event_session(rec: Recorder, idx: usize, ready: Arc<AtomicU64>) -> Session {
    Box::new(move |c, running| {
        if c.send(&["PSUBSCRIBE", "*"]).is_err() {
            return;
        }
        loop {
            match c.read() {
                Ok(Frame::Array(p)) if p.len() == 4 && text(&p[0]) == "pmessage" => {
                    let e = Event {
                        at: rec.now(),
                        sentinel: idx,
                        channel: text(&p[2]),
                        payload: text(&p[3]),
                    };
                    rec.log().events.push(e);
                }
                Ok(Frame::Array(p)) if !p.is_empty() && text(&p[0]) == "psubscribe" => {
                    ready.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(ConnErr::Timeout) => {
                    if !running.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(ConnErr::Closed) => {
                    std::thread::sleep(Duration::from_millis(20));
                    return;
                }
            }
        }
    })
}

/// `SUBSCRIBE __sentinel__:hello` on a data node.
fn hello_session(rec: Recorder, node: u16, ready: Arc<AtomicU64>) -> Session {
    Box::new(move |c, running| {
        if c.send(&["SUBSCRIBE", "__sentinel__:hello"]).is_err() {
            return;
        }
        loop {
            match c.read() {
                Ok(Frame::Array(p)) if p.len() == 3 && text(&p[0]) == "message" => {
                    let raw = text(&p[2]);
                    let at = rec.now();
                    let mut log = rec.log();
                    match Hello::parse(at, node, &raw) {
                        Some(h) => log.hellos.push(h),
                        None => log
                            .trouble
                            .push(format!("{at:?} node {node}: unparsable hello {raw:?}")),
                    }
                }
                Ok(Frame::Array(p)) if !p.is_empty() && text(&p[0]) == "subscribe" => {
                    ready.fetch_add(1, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(ConnErr::Timeout) => {
                    if !running.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(ConnErr::Closed) => {
                    std::thread::sleep(Duration::from_millis(20));
                    return;
                }
            }
        }
    })
}

/// Sets the slow log to record every command.
fn slowlog_on(c: &mut Conn) -> bool {
    matches!(
        c.call(
            &[
                "CONFIG",
                "SET",
                "slowlog-log-slower-than",
                "0",
                "slowlog-max-len",
                "100000"
            ],
            Duration::from_secs(2)
        ),
        Ok(Frame::Simple(_))
    )
}

/// Polls a data node's slow log and records its replication commands.
/// Entries are read by id, per server run id (a restarted server starts
/// its ids again).
fn slowlog_session(rec: Recorder, node: u16, ready: Arc<AtomicU64>) -> Session {
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    Box::new(move |c, running| {
        if !slowlog_on(c) {
            return;
        }
        let Ok(info) = c.call(&["INFO", "server"], Duration::from_secs(2)) else {
            return;
        };
        let run_id = text(&info)
            .lines()
            .find_map(|l| l.strip_prefix("run_id:").map(|v| v.trim().to_string()))
            .unwrap_or_default();
        ready.fetch_add(1, Ordering::SeqCst);
        let mut count = 64usize;
        while running.load(Ordering::Relaxed) {
            let Ok(Frame::Array(entries)) = c.call(
                &["SLOWLOG", "GET", &count.to_string()],
                Duration::from_secs(2),
            ) else {
                return;
            };
            let seen = last.get(&run_id).copied().unwrap_or(-1);
            let mut fresh: Vec<(i64, Vec<String>, String, String)> = Vec::new();
            let mut oldest = i64::MAX;
            for e in &entries {
                let Frame::Array(f) = e else { continue };
                if f.len() < 6 {
                    continue;
                }
                let Frame::Integer(id) = f[0] else { continue };
                oldest = oldest.min(id);
                if id <= seen {
                    continue;
                }
                let args = match &f[3] {
                    Frame::Array(a) => a.iter().map(text).collect(),
                    _ => Vec::new(),
                };
                fresh.push((id, args, text(&f[4]), text(&f[5])));
            }
            if entries.len() >= count && oldest > seen + 1 && count < 100_000 {
                // More came in than one read holds: read more at once.
                count = (count * 4).min(100_000);
                continue;
            }
            if entries.len() >= count && oldest > seen + 1 && seen >= 0 {
                rec.log().trouble.push(format!(
                    "node {node}: slow log entries {}..{} lost",
                    seen + 1,
                    oldest
                ));
            }
            fresh.sort_by_key(|x| x.0);
            if let Some(top) = fresh.last() {
                last.insert(run_id.clone(), top.0);
            }
            let at = rec.now();
            let mut log = rec.log();
            for (_, args, client, name) in fresh {
                let cmd = args
                    .first()
                    .map(|a| a.to_ascii_lowercase())
                    .unwrap_or_default();
                if cmd == "replicaof" || cmd == "slaveof" {
                    log.sent.push(Sent {
                        at,
                        node,
                        client,
                        name,
                        args,
                    });
                }
            }
            drop(log);
            count = (count / 2).max(64);
            std::thread::sleep(Duration::from_millis(30));
        }
    })
}

// ---------------------------------------------------------------------
// iptables rules.

/// iptables rules, deleted on drop.
#[derive(Debug)]
pub struct Rules {
    /// (table, chain and rule specification).
    rules: Vec<(&'static str, Vec<String>)>,
}

impl Rules {
    fn new() -> Rules {
        Rules { rules: Vec::new() }
    }

    /// Inserts `spec` (chain first) into `table`, tagged with a comment
    /// naming this test process (for cleaning up after a killed run).
    fn insert(&mut self, table: &'static str, mut spec: Vec<String>) {
        let tag = format!("valkyrie-peers-{}", std::process::id());
        spec.splice(1..1, strings(&["-m", "comment", "--comment", &tag]));
        let status = Command::new(iptables_bin())
            .args(["-w", "-t", table, "-I"])
            .args(&spec)
            .status()
            .expect("run iptables");
        assert!(status.success(), "iptables -t {table} -I {spec:?} failed");
        self.rules.push((table, spec));
    }

    /// Deletes the rules now (the path heals).
    pub fn heal(mut self) {
        self.remove();
    }

    fn remove(&mut self) {
        for (table, spec) in self.rules.drain(..).rev() {
            let _ = Command::new(iptables_bin())
                .args(["-w", "-t", table, "-D"])
                .args(&spec)
                .status();
        }
    }
}

impl Drop for Rules {
    fn drop(&mut self) {
        self.remove();
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

static NEXT_UID: AtomicU32 = AtomicU32::new(0);

/// A uid (also used as the connection mark) for one sentinel process,
/// distinct across the deployments of this test process and unlikely to
/// collide with another test process's.
fn next_uid() -> u32 {
    300_000 + (std::process::id() % 20_000) * 64 + NEXT_UID.fetch_add(1, Ordering::Relaxed) % 64
}

// ---------------------------------------------------------------------
// Sentinel processes.

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
    bin: PathBuf,
    child: Option<Child>,
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

    fn spawn(&mut self) {
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

fn chown(path: &Path, uid: u32) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{uid}"))
        .arg(path)
        .status()
        .expect("run chown");
    assert!(status.success(), "chown {} failed", path.display());
}

// ---------------------------------------------------------------------
// The deployment.

/// A master, two replicas and N sentinel processes, with observers.
pub struct Deployment {
    /// Data nodes: `nodes[0]` is the first master, the others its replicas.
    pub nodes: Vec<Server>,
    pub sentinels: Vec<Sentinel>,
    rec: Recorder,
    running: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    event_gen: Vec<Arc<AtomicU64>>,
    /// The connection-marking rules (mangle table).
    _marks: Rules,
    /// Last, so the processes are gone before their directories.
    pub tmp: TempDir,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("nodes", &self.node_ports())
            .field("sentinels", &self.sentinels)
            .field("dir", &self.tmp.0)
            .finish()
    }
}

impl Deployment {
    /// Starts the data nodes, the hello and slow-log observers, the
    /// sentinels (in `specs` order) and their event taps. Returns once
    /// every sentinel answers `SENTINEL MYID` and every tap is subscribed;
    /// discovery is the test's to wait for ([`Deployment::check_i7`]).
    pub fn start(tag: &str, specs: &[Spec]) -> Deployment {
        require_root();
        let tmp = TempDir::new(tag);
        set_mode(&tmp.0, 0o755);
        let (m, r1, r2) = start_trio(&valkey_server(), &tmp.0);
        let nodes = vec![m, r1, r2];
        let rec = Recorder {
            start: Instant::now(),
            log: Arc::new(Mutex::new(Log::default())),
        };
        let running = Arc::new(AtomicBool::new(true));
        let mut threads = Vec::new();
        let mut node_gens = Vec::new();
        for n in &nodes {
            let mut c = Conn::connect(n.port, Duration::from_secs(2)).expect("data node");
            assert!(slowlog_on(&mut c), "CONFIG SET slowlog on {}", n.port);
            for session in [hello_session, slowlog_session] {
                let ready = Arc::new(AtomicU64::new(0));
                threads.push(tap(
                    running.clone(),
                    n.port,
                    session(rec.clone(), n.port, ready.clone()),
                ));
                node_gens.push(ready);
            }
        }
        if let Err(e) = poll(Duration::from_secs(10), || {
            if node_gens.iter().all(|g| g.load(Ordering::SeqCst) > 0) {
                Ok(())
            } else {
                Err("data-node observers not subscribed".into())
            }
        }) {
            panic!("{e}");
        }

        // One binary every uid can read (the build directory may be under
        // a home directory they cannot enter).
        let bindir = tmp.0.join("bin");
        std::fs::create_dir_all(&bindir).unwrap();
        set_mode(&bindir, 0o755);
        let valkyrie = bindir.join("valkyrie");
        if specs.iter().any(|s| s.kind == Kind::Valkyrie) {
            let src = Path::new(env!("CARGO_BIN_EXE_valkyrie"));
            if std::fs::hard_link(src, &valkyrie).is_err() {
                std::fs::copy(src, &valkyrie).expect("copy the valkyrie binary");
            }
            set_mode(&valkyrie, 0o755);
        }

        let master = nodes[0].port;
        let mut marks = Rules::new();
        let mut sentinels = Vec::new();
        for (idx, spec) in specs.iter().enumerate() {
            let port = free_port();
            let uid = next_uid();
            let dir = tmp.0.join(format!("s{idx}-{port}"));
            std::fs::create_dir_all(&dir).unwrap();
            let conf = dir.join("sentinel.conf");
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {GROUP} 127.0.0.1 {master} {}\n\
                 sentinel down-after-milliseconds {GROUP} {}\n\
                 sentinel failover-timeout {GROUP} {}\n",
                dir.display(),
                spec.quorum,
                spec.down_after_ms,
                spec.failover_timeout_ms,
            );
            let (bin, log) = match spec.kind {
                Kind::Valkyrie => {
                    text.push_str("index-port 0\nadmin-port 0\n");
                    (valkyrie.clone(), dir.join("valkyrie.log"))
                }
                Kind::Real => (valkey_sentinel(), dir.join("sentinel.log")),
            };
            std::fs::write(&conf, text).unwrap();
            chown(&dir, uid);
            // Mark every connection this uid opens with its uid.
            marks.insert(
                "mangle",
                strings(&[
                    "OUTPUT",
                    "-m",
                    "owner",
                    "--uid-owner",
                    &uid.to_string(),
                    "-m",
                    "connmark",
                    "--mark",
                    "0",
                    "-j",
                    "CONNMARK",
                    "--set-mark",
                    &uid.to_string(),
                ]),
            );
            sentinels.push(Sentinel {
                idx,
                spec: spec.clone(),
                port,
                uid,
                dir,
                conf,
                log,
                bin,
                child: None,
                myid: String::new(),
            });
        }
        for s in &mut sentinels {
            s.spawn();
        }
        let mut event_gen = Vec::new();
        for s in &sentinels {
            let ready = Arc::new(AtomicU64::new(0));
            threads.push(tap(
                running.clone(),
                s.port,
                event_session(rec.clone(), s.idx, ready.clone()),
            ));
            event_gen.push(ready);
        }
        let d = Deployment {
            nodes,
            sentinels,
            rec,
            running,
            threads,
            event_gen,
            _marks: marks,
            tmp,
        };
        for i in 0..d.sentinels.len() {
            d.wait_tap(i, 0);
        }
        d
    }

    fn wait_tap(&self, i: usize, after: u64) {
        let ready = self.event_gen[i].clone();
        if let Err(e) = poll(Duration::from_secs(10), || {
            if ready.load(Ordering::SeqCst) > after {
                Ok(())
            } else {
                Err(format!(
                    "event tap of {} not subscribed",
                    self.sentinels[i].label()
                ))
            }
        }) {
            panic!("{e}");
        }
    }

    /// Time since the deployment started (the records' clock).
    pub fn now(&self) -> Duration {
        self.rec.now()
    }

    // ----- data nodes

    pub fn node_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    pub fn node_alive(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// The index of the node with `port`.
    pub fn node_index(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port == port)
    }

    /// SIGKILL data node `i`.
    pub fn kill_node(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Starts data node `i` again on its port, empty, as a master, its
    /// slow log recording every command from its first one (a sentinel
    /// may reconfigure it within milliseconds).
    pub fn restart_node(&mut self, i: usize) {
        let s = &mut self.nodes[i];
        s.kill();
        s.replicaof = None;
        let dir = s.dir.join(format!("n{}", s.port));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(&s.bin)
            .arg("--port")
            .arg(s.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("valkey.log"))
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
                "--slowlog-log-slower-than",
                "0",
                "--slowlog-max-len",
                "100000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start valkey-server");
        s.child = Some(child);
        let port = s.port;
        if let Err(e) = poll(Duration::from_secs(10), || {
            match try_call(port, &["PING"]) {
                Ok(Frame::Simple(_)) => Ok(()),
                other => Err(format!("PING {port}: {other:?}")),
            }
        }) {
            panic!("restarted data node: {e}");
        }
    }

    /// `role` of a data node's `INFO replication`.
    pub fn role(port: u16) -> Option<String> {
        info_field(port, "role")
    }

    /// The live data nodes' roles, for messages.
    pub fn roles(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| {
                let role = info_field(n.port, "role").unwrap_or_else(|| "?".into());
                match info_field(n.port, "master_port") {
                    Some(up) => {
                        let link = info_field(n.port, "master_link_status").unwrap_or_default();
                        format!("{}={role}->{up}({link})", n.port)
                    }
                    None => format!("{}={role}", n.port),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The single live data node reporting `role:master`, if exactly one.
    pub fn data_master(&self) -> Option<u16> {
        let masters: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| n.child.is_some())
            .filter(|n| info_field(n.port, "role").as_deref() == Some("master"))
            .map(|n| n.port)
            .collect();
        (masters.len() == 1).then(|| masters[0])
    }

    // ----- sentinels

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
        super::advertised_master(self.sentinels[i].port)
    }

    /// Field `name` of `SENTINEL MASTER mymaster` on sentinel `i`.
    pub fn master_field(&self, i: usize, name: &str) -> Option<String> {
        super::master_field(self.sentinels[i].port, name)
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

    /// Every live sentinel in `among` advertises the same master with the
    /// same config epoch, and that node reports `role:master` (I4).
    pub fn converged_among(&self, among: &[usize], limit: Duration) -> Result<(u16, u64), String> {
        poll(limit, || {
            let mut views = Vec::new();
            for &i in among {
                views.push((i, self.advertised(i), self.config_epoch(i)));
            }
            let first = views.first().map(|v| (v.1, v.2));
            let same = views.iter().all(|v| Some((v.1, v.2)) == first);
            match first {
                Some((Some(p), Some(e))) if same => {
                    if info_field(p, "role").as_deref() == Some("master") {
                        Ok((p, e))
                    } else {
                        Err(format!(
                            "all advertise {p} (epoch {e}) but it is not a master: {}",
                            self.roles()
                        ))
                    }
                }
                _ => Err(format!(
                    "sentinels disagree: {}; data: {}",
                    views
                        .iter()
                        .map(|(i, p, e)| format!(
                            "{} -> {p:?} epoch {e:?}",
                            self.sentinels[*i].label()
                        ))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.roles()
                )),
            }
        })
    }

    /// [`Deployment::converged`], and no live sentinel reports a failover
    /// in progress (`flags` of `SENTINEL master`): a leader that has not
    /// finished its failover still names the promoted replica, and may
    /// still switch to it.
    pub fn settled(&self, limit: Duration) -> Result<(u16, u64), String> {
        poll(limit, || {
            for i in self.live() {
                let flags = self.master_field(i, "flags").unwrap_or_default();
                if flags.contains("failover") {
                    return Err(format!("{}: flags {flags}", self.sentinels[i].label()));
                }
            }
            self.converged(Duration::ZERO)
        })
    }

    /// [`Deployment::converged_among`] over every live sentinel.
    pub fn converged(&self, limit: Duration) -> Result<(u16, u64), String> {
        self.converged_among(&self.live(), limit)
    }

    // ----- records

    pub fn events(&self) -> Vec<Event> {
        self.rec.log().events.clone()
    }

    /// Sentinel `i`'s events, in order.
    pub fn events_of(&self, i: usize) -> Vec<Event> {
        self.rec
            .log()
            .events
            .iter()
            .filter(|e| e.sentinel == i)
            .cloned()
            .collect()
    }

    /// Sentinel `i`'s events on `channel` whose payload starts with `prefix`.
    pub fn find(&self, i: usize, channel: &str, prefix: &str) -> Vec<Event> {
        self.rec
            .log()
            .events
            .iter()
            .filter(|e| e.sentinel == i && e.channel == channel && e.payload.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits for an event of sentinel `i` on `channel` starting with `prefix`.
    pub fn wait_event(
        &self,
        i: usize,
        channel: &str,
        prefix: &str,
        limit: Duration,
    ) -> Result<Event, String> {
        poll(limit, || {
            self.find(i, channel, prefix)
                .into_iter()
                .next()
                .ok_or_else(|| {
                    format!(
                        "no `{channel} {prefix}…` from {}",
                        self.sentinels[i].label()
                    )
                })
        })
    }

    pub fn hellos(&self) -> Vec<Hello> {
        self.rec.log().hellos.clone()
    }

    /// Every replication command the data nodes executed.
    pub fn sent(&self) -> Vec<Sent> {
        self.rec.log().sent.clone()
    }

    /// The replication commands from sentinel `i`'s connections.
    pub fn sent_by(&self, i: usize) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| self.sender(s) == Some(i))
            .collect()
    }

    /// Every `+elected-leader`, with its epoch.
    pub fn elections(&self) -> Vec<Election> {
        let mut out = Vec::new();
        for s in &self.sentinels {
            let mut new_epoch: Option<u64> = None;
            let mut try_epoch: Option<u64> = None;
            let mut self_vote: Option<u64> = None;
            for e in self.events_of(s.idx) {
                let w = e.words();
                match e.channel.as_str() {
                    "+new-epoch" => new_epoch = w.first().and_then(|v| v.parse().ok()),
                    "+try-failover" => {
                        try_epoch = new_epoch;
                        self_vote = None;
                    }
                    "+vote-for-leader" if w.len() >= 2 && w[0] == s.myid => {
                        self_vote = w[1].parse().ok();
                    }
                    "+elected-leader" => out.push(Election {
                        sentinel: s.idx,
                        epoch: self_vote.or(try_epoch),
                        at: e.at,
                    }),
                    _ => {}
                }
            }
        }
        out.sort_by_key(|e| e.at);
        out
    }

    // ----- invariants

    /// I1: for every (master name, config epoch) in any hello, one address.
    pub fn check_i1(&self) -> Result<(), String> {
        // (name, config epoch) -> address -> who advertised it, when.
        type Seen = BTreeMap<(String, u64), BTreeMap<(String, u16), Vec<String>>>;
        let mut seen = Seen::new();
        for h in self.hellos() {
            seen.entry((h.master.clone(), h.config_epoch))
                .or_default()
                .entry((h.master_ip.clone(), h.master_port))
                .or_default()
                .push(format!(
                    "{}@{}ms",
                    &h.runid[..h.runid.len().min(8)],
                    h.at.as_millis()
                ));
        }
        let bad: Vec<String> = seen
            .iter()
            .filter(|(_, addrs)| addrs.len() > 1)
            .map(|((m, e), addrs)| {
                let list: Vec<String> = addrs
                    .iter()
                    .map(|((ip, p), who)| {
                        format!(
                            "{ip}:{p} by {}",
                            who.iter().take(3).cloned().collect::<Vec<_>>().join(",")
                        )
                    })
                    .collect();
                format!("{m} config epoch {e}: {}", list.join(" / "))
            })
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I1 (one configuration per epoch) violated: {}",
                bad.join("; ")
            ))
        }
    }

    /// I2: per sentinel and epoch, at most one `+vote-for-leader` run id.
    pub fn check_i2(&self) -> Result<(), String> {
        let mut votes: BTreeMap<(usize, u64), BTreeSet<String>> = BTreeMap::new();
        for e in self.events() {
            if e.channel != "+vote-for-leader" {
                continue;
            }
            let w = e.words();
            match (w.first(), w.get(1).and_then(|v| v.parse::<u64>().ok())) {
                (Some(id), Some(ep)) => {
                    votes
                        .entry((e.sentinel, ep))
                        .or_default()
                        .insert(id.to_string());
                }
                _ => return Err(format!("I2: malformed +vote-for-leader {:?}", e.payload)),
            }
        }
        let bad: Vec<String> = votes
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|((s, ep), ids)| {
                format!(
                    "{} voted for {ids:?} in epoch {ep}",
                    self.sentinels[*s].label()
                )
            })
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I2 (one vote per voter per epoch) violated: {}",
                bad.join("; ")
            ))
        }
    }

    /// I3: at most one `+elected-leader` per epoch; every promotion
    /// (`REPLICAOF|SLAVEOF NO ONE`) comes from a sentinel's command link
    /// after it was elected (1 s of observer skew allowed) and is counted
    /// in the epoch of its latest election; at most one target per epoch.
    pub fn check_i3(&self) -> Result<(), String> {
        let elections = self.elections();
        let mut errors = Vec::new();
        let mut leaders: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
        for e in &elections {
            match e.epoch {
                Some(ep) => {
                    leaders.entry(ep).or_default().insert(e.sentinel);
                }
                None => errors.push(format!(
                    "+elected-leader of {} at {}ms without a failover epoch (+try-failover/+new-epoch)",
                    self.sentinels[e.sentinel].label(),
                    e.at.as_millis()
                )),
            }
        }
        for (ep, who) in &leaders {
            if who.len() > 1 {
                let names: Vec<String> = who.iter().map(|i| self.sentinels[*i].label()).collect();
                errors.push(format!(
                    "epoch {ep} has several leaders: {}",
                    names.join(", ")
                ));
            }
        }
        let mut targets: BTreeMap<u64, BTreeSet<u16>> = BTreeMap::new();
        for p in self.sent().iter().filter(|s| s.is_promotion()) {
            let Some(i) = self.sender(p) else {
                errors.push(format!(
                    "promotion {:?} on {} at {}ms from an unattributed client {} named {:?}",
                    p.args,
                    p.node,
                    p.at.as_millis(),
                    p.client,
                    p.name
                ));
                continue;
            };
            let elected = elections
                .iter()
                .rfind(|e| e.sentinel == i && e.at <= p.at + Duration::from_secs(1));
            match elected.and_then(|e| e.epoch) {
                Some(ep) => {
                    targets.entry(ep).or_default().insert(p.node);
                }
                None => errors.push(format!(
                    "{} sent {:?} to {} at {}ms without having been elected",
                    self.sentinels[i].label(),
                    p.args,
                    p.node,
                    p.at.as_millis()
                )),
            }
        }
        for (ep, t) in &targets {
            if t.len() > 1 {
                errors.push(format!("epoch {ep} promoted several replicas: {t:?}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I3 (one leader, one promotion per epoch) violated: {}",
                errors.join("; ")
            ))
        }
    }

    /// I5: within `limit`, exactly one live data node reports
    /// `role:master`, and every other live node replicates it with an up
    /// link. Returns the master's port.
    pub fn check_i5(&self, limit: Duration) -> Result<u16, String> {
        poll(limit, || {
            let Some(m) = self.data_master() else {
                return Err(format!("I5: not exactly one master: {}", self.roles()));
            };
            for n in self
                .nodes
                .iter()
                .filter(|n| n.child.is_some() && n.port != m)
            {
                let up = info_field(n.port, "master_port").and_then(|p| p.parse::<u16>().ok());
                let link = info_field(n.port, "master_link_status");
                if up != Some(m) || link.as_deref() != Some("up") {
                    return Err(format!(
                        "I5: {} does not replicate {m}: {}",
                        n.port,
                        self.roles()
                    ));
                }
            }
            Ok(m)
        })
    }

    /// I6: per run id and data node, hello epochs never decrease.
    pub fn check_i6(&self) -> Result<(), String> {
        let mut last: BTreeMap<(String, u16), (u64, u64, Duration)> = BTreeMap::new();
        let mut errors = Vec::new();
        for h in self.hellos() {
            let key = (h.runid.clone(), h.node);
            if let Some((ce, fe, at)) = last.get(&key)
                && (h.current_epoch < *ce || h.config_epoch < *fe)
            {
                errors.push(format!(
                    "{} on {}: epochs ({ce}, {fe}) at {}ms then ({}, {}) at {}ms",
                    &h.runid[..h.runid.len().min(8)],
                    h.node,
                    at.as_millis(),
                    h.current_epoch,
                    h.config_epoch,
                    h.at.as_millis()
                ));
            }
            last.insert(key, (h.current_epoch, h.config_epoch, h.at));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I6 (monotonic epochs) violated: {}",
                errors.join("; ")
            ))
        }
    }

    /// I7 for the sentinels in `among`: within `limit`, each lists exactly
    /// the other sentinels of the deployment (ids and ports, no
    /// duplicates), reports `num-other-sentinels` = N-1 and `CKQUORUM` OK.
    pub fn check_i7_among(&self, among: &[usize], limit: Duration) -> Result<(), String> {
        let n = self.sentinels.len();
        poll(limit, || {
            for &i in among {
                let label = self.sentinels[i].label();
                let peers = self.peers_of(i)?;
                let mut got: Vec<(String, String)> = peers
                    .iter()
                    .map(|p| {
                        (
                            p.get("runid").cloned().unwrap_or_default(),
                            p.get("port").cloned().unwrap_or_default(),
                        )
                    })
                    .collect();
                got.sort();
                let mut want: Vec<(String, String)> = self
                    .sentinels
                    .iter()
                    .filter(|s| s.idx != i)
                    .map(|s| (s.myid.clone(), s.port.to_string()))
                    .collect();
                want.sort();
                if got != want {
                    return Err(format!("I7: {label} lists {got:?}, expected {want:?}"));
                }
                let others = self.master_field(i, "num-other-sentinels");
                if others != Some((n - 1).to_string()) {
                    return Err(format!(
                        "I7: {label} num-other-sentinels {others:?}, expected {}",
                        n - 1
                    ));
                }
                match try_call(self.sentinels[i].port, &["SENTINEL", "CKQUORUM", GROUP]) {
                    Ok(Frame::Simple(s)) if s.starts_with(b"OK") => {}
                    other => return Err(format!("I7: {label} CKQUORUM: {other:?}")),
                }
            }
            Ok(())
        })
    }

    /// [`Deployment::check_i7_among`] over every live sentinel.
    pub fn check_i7(&self, limit: Duration) -> Result<(), String> {
        self.check_i7_among(&self.live(), limit)
    }

    /// I1, I2, I3 and I6 over everything recorded so far, plus observer
    /// trouble (unparsable hellos, lost slow-log entries).
    pub fn check_records(&self) -> Result<(), String> {
        let mut errors: Vec<String> = [
            self.check_i1(),
            self.check_i2(),
            self.check_i3(),
            self.check_i6(),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect();
        let trouble = self.rec.log().trouble.clone();
        if !trouble.is_empty() {
            errors.push(format!("observers: {}", trouble.join("; ")));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    // ----- cuts

    /// Cuts sentinel `i` from the data nodes on `data_ports` and from the
    /// sentinels `others`, both directions. Heals when the guard drops.
    pub fn cut(&self, i: usize, data_ports: &[u16], others: &[usize]) -> Rules {
        let me = &self.sentinels[i];
        let mut rules = Rules::new();
        let mut drop_rule = |mark: u32, dir: &str, port: u16| {
            rules.insert(
                "filter",
                strings(&[
                    "OUTPUT",
                    "-p",
                    "tcp",
                    "-m",
                    "connmark",
                    "--mark",
                    &mark.to_string(),
                    dir,
                    &port.to_string(),
                    "-j",
                    "DROP",
                ]),
            );
        };
        for &p in data_ports {
            drop_rule(me.uid, "--dport", p);
            drop_rule(me.uid, "--sport", p);
        }
        for &j in others {
            let other = &self.sentinels[j];
            // What `i` opened to `j`, and what `j` opened to `i`.
            drop_rule(me.uid, "--dport", other.port);
            drop_rule(me.uid, "--sport", other.port);
            drop_rule(other.uid, "--dport", me.port);
            drop_rule(other.uid, "--sport", me.port);
        }
        rules
    }

    /// Cuts sentinel `i` from every data node and every other sentinel.
    pub fn isolate(&self, i: usize) -> Rules {
        let others: Vec<usize> = (0..self.sentinels.len()).filter(|&j| j != i).collect();
        self.cut(i, &self.node_ports(), &others)
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

    // ----- artefacts

    /// A readable dump of every record.
    pub fn dump(&self) -> String {
        let log = self.rec.log();
        let mut out = String::new();
        for s in &self.sentinels {
            out.push_str(&format!(
                "# {} id {} uid {} dir {}\n",
                s.label(),
                s.myid,
                s.uid,
                s.dir.display()
            ));
        }
        out.push_str(&format!("# data nodes {:?}\n", self.node_ports()));
        for e in &log.events {
            out.push_str(&format!(
                "{:>7} ev   {} {} {}\n",
                e.at.as_millis(),
                self.sentinels[e.sentinel].label(),
                e.channel,
                e.payload
            ));
        }
        for s in &log.sent {
            out.push_str(&format!(
                "{:>7} cmd  on {} from {} {:?}: {}\n",
                s.at.as_millis(),
                s.node,
                s.client,
                s.name,
                s.args.join(" ")
            ));
        }
        for h in &log.hellos {
            out.push_str(&format!(
                "{:>7} hello on {}: {}\n",
                h.at.as_millis(),
                h.node,
                h.raw
            ));
        }
        for t in &log.trouble {
            out.push_str(&format!("trouble: {t}\n"));
        }
        out
    }

    /// The tail of sentinel `i`'s log.
    pub fn log_tail(&self, i: usize, n: usize) -> String {
        tail(&self.sentinels[i].log, n)
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if std::env::var_os("PEERS_DUMP").is_some() {
            eprintln!("{}", self.dump());
        }
        if std::thread::panicking() {
            let path = self.tmp.0.join("records.log");
            let _ = std::fs::write(&path, self.dump());
            eprintln!("records in {}", path.display());
            for s in &self.sentinels {
                eprintln!("log of {}: {}", s.label(), s.log.display());
            }
        }
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

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

// ---------------------------------------------------------------------
// I8: a writer whose writes count once `WAIT` confirms them.

/// Writes `pw:<i>` = `<i>` to the master the sentinels advertise, then
/// `WAIT <replicas> 1000`; a write is acknowledged when `WAIT` reports at
/// least `replicas` replicas. Reconnects (asking the next sentinel) when
/// anything fails.
pub struct AckWriter {
    acked: Arc<Mutex<Vec<u64>>>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AckWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AckWriter({} acked)", self.acked())
    }
}

impl AckWriter {
    pub fn start(sentinel_ports: Vec<u16>, replicas: u32) -> AckWriter {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (acked, running) = (acked.clone(), running.clone());
            std::thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                let mut ask = 0usize;
                let mut i = 0u64;
                let limit = Duration::from_millis(1500);
                while running.load(Ordering::Relaxed) {
                    if conn.is_none() {
                        let port = sentinel_ports[ask % sentinel_ports.len()];
                        ask += 1;
                        conn = Conn::connect(port, Duration::from_millis(100))
                            .and_then(|mut s| {
                                s.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", GROUP], limit)
                                    .ok()
                            })
                            .and_then(|f| match f {
                                Frame::Array(v) if v.len() == 2 => text(&v[1]).parse::<u16>().ok(),
                                _ => None,
                            })
                            .and_then(|p| Conn::connect(p, Duration::from_millis(100)));
                        if conn.is_none() {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    }
                    let c = conn.as_mut().unwrap();
                    let (key, value) = (format!("pw:{i}"), i.to_string());
                    let ok = matches!(c.call(&["SET", &key, &value], limit), Ok(Frame::Simple(_)))
                        && matches!(
                            c.call(&["WAIT", &replicas.to_string(), "1000"], limit),
                            Ok(Frame::Integer(n)) if n >= i64::from(replicas)
                        );
                    if ok {
                        acked.lock().unwrap_or_else(|e| e.into_inner()).push(i);
                        std::thread::sleep(Duration::from_millis(40));
                    } else {
                        conn = None;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    i += 1;
                }
            })
        };
        AckWriter {
            acked,
            running,
            thread: Some(thread),
        }
    }

    /// How many writes were acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// I8: every write acknowledged so far is readable on `master`.
    pub fn check_i8(&self, master: u16) -> Result<(), String> {
        let acked = self.acked.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut c = Conn::connect(master, Duration::from_secs(2))
            .ok_or(format!("I8: cannot reach {master}"))?;
        let mut lost = Vec::new();
        for chunk in acked.chunks(500) {
            let keys: Vec<String> = chunk.iter().map(|i| format!("pw:{i}")).collect();
            let mut args = vec!["MGET"];
            args.extend(keys.iter().map(String::as_str));
            match c.call(&args, Duration::from_secs(5)) {
                Ok(Frame::Array(v)) if v.len() == chunk.len() => {
                    for (i, f) in chunk.iter().zip(v) {
                        if text(&f) != i.to_string() {
                            lost.push(*i);
                        }
                    }
                }
                other => return Err(format!("I8: MGET on {master}: {other:?}")),
            }
        }
        if lost.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "I8: {} of {} acknowledged writes missing on {master}: {:?}",
                lost.len(),
                acked.len(),
                &lost[..lost.len().min(20)]
            ))
        }
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AckWriter {
    fn drop(&mut self) {
        self.halt();
    }
}
