//! The deployment itself: the data nodes, the sentinel processes and the
//! observers started together, the data nodes' controls, and the teardown
//! (records written out when a test fails).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use valkyrie_protocol::Frame;

use super::conn::Conn;
use super::cuts::Rules;
use super::records::{Log, Recorder};
use super::sentinels::{Kind, Sentinel, Spec, next_uid};
use super::taps::{event_session, hello_session, slowlog_on, slowlog_session, tap};
use super::{GROUP, poll};
use crate::support::cut::require_root;
use crate::support::sentinel::valkey_sentinel;
use crate::support::{Server, TempDir, free_port, info_field, start_trio, try_call, valkey_server};

/// A master, two replicas and N sentinel processes, with observers.
pub struct Deployment {
    /// Data nodes: `nodes[0]` is the first master, the others its replicas.
    pub nodes: Vec<Server>,
    pub sentinels: Vec<Sentinel>,
    pub(super) rec: Recorder,
    running: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub(super) event_gen: Vec<Arc<AtomicU64>>,
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
            marks.mark_connections_of(uid);
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

    pub(super) fn wait_tap(&self, i: usize, after: u64) {
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

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
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
