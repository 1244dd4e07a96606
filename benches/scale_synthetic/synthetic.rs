//! The synthetic Valkey's serving side (a child process): binds a
//! shard's groups of three instances on loopback ports, keeps each group's
//! topology in memory, serves every connection on one tokio runtime, and
//! takes `kill <port>` and `stats` orders from the parent on stdin. What
//! an instance answers is in `replies.rs`.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use valkyrie_protocol::{Frame, RequestDecoder};

use crate::replies::{handle, reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub const HELLO: &[u8] = b"__sentinel__:hello";

/// Commands served by this process: PING, INFO, PUBLISH, the rest.
pub static SERVED: [std::sync::atomic::AtomicU64; 4] = [
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
];

/// One synthetic instance.
pub(crate) struct Node {
    pub(crate) port: u16,
    pub(crate) run_id: String,
    pub(crate) replid: String,
    pub(crate) replid2: String,
    /// `None`: a master; `Some(port)`: a replica of that port.
    pub(crate) master: Option<u16>,
    pub(crate) killed_at: Option<Instant>,
    /// Connections subscribed to `__sentinel__:hello`.
    pub(crate) hello_subs: Vec<mpsc::UnboundedSender<Bytes>>,
    pub(crate) kill: CancellationToken,
}

/// A group's instances, whose topology REPLICAOF changes.
pub(crate) struct Group {
    /// `g<K>`, as Valkyrie's configuration names it.
    pub(crate) name: String,
    pub(crate) nodes: Vec<Node>,
    /// Every instance's replication offset (no writes: it stays).
    pub(crate) offset: u64,
    pub(crate) keys: u64,
    pub(crate) started: Instant,
}

pub(crate) type Shared = Arc<Mutex<Group>>;

/// The instances of one process.
pub struct Shard {
    /// port → (group, node index).
    pub(crate) by_port: HashMap<u16, (Shared, usize)>,
    /// Per group, its three ports (master first).
    pub groups: Vec<[u16; 3]>,
}

pub(crate) fn hex_id(seed: u64) -> String {
    // splitmix64: distinct 40-hex-digit ids, like Valkey's run ids.
    let mut x = seed;
    let mut out = String::with_capacity(40);
    while out.len() < 40 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out.push_str(&format!("{z:016x}"));
    }
    out.truncate(40);
    out
}

pub(crate) fn seed(port: u16, salt: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    t ^ (u64::from(port) << 32) ^ salt.wrapping_mul(0x1000_0000_01b3)
}

impl Shard {
    /// Binds `groups` groups of three instances on ports from `lo`
    /// (skipping ports in use, never reaching `hi`) and serves them on
    /// the current runtime.
    pub async fn start(first: usize, groups: usize, lo: u16, hi: u16) -> Shard {
        let mut by_port = HashMap::new();
        let mut all = Vec::with_capacity(groups);
        let mut next = lo;
        let mut bind = || loop {
            assert!(next < hi, "no free port left below {hi}");
            let p = next;
            next += 1;
            let sock = TcpSocket::new_v4().unwrap();
            sock.set_reuseaddr(true).unwrap();
            if sock.bind(([127, 0, 0, 1], p).into()).is_err() {
                continue;
            }
            if let Ok(l) = sock.listen(128) {
                return (p, l);
            }
        };
        for k in first..first + groups {
            let listeners = [bind(), bind(), bind()];
            let ports = [listeners[0].0, listeners[1].0, listeners[2].0];
            let nodes = ports
                .iter()
                .enumerate()
                .map(|(i, &p)| Node {
                    port: p,
                    run_id: hex_id(seed(p, 1)),
                    replid: hex_id(seed(ports[0], 2)),
                    replid2: "0".repeat(40),
                    master: (i > 0).then_some(ports[0]),
                    killed_at: None,
                    hello_subs: Vec::new(),
                    kill: CancellationToken::new(),
                })
                .collect();
            let g: Shared = Arc::new(Mutex::new(Group {
                name: format!("g{k}"),
                nodes,
                offset: 1_000_000 + u64::from(ports[0]),
                keys: 1000,
                started: Instant::now(),
            }));
            for (i, (p, l)) in listeners.into_iter().enumerate() {
                let kill = g.lock().unwrap().nodes[i].kill.clone();
                by_port.insert(p, (g.clone(), i));
                let g = g.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            _ = kill.cancelled() => break,
                            r = l.accept() => {
                                let Ok((s, _)) = r else { continue };
                                let _ = s.set_nodelay(true);
                                tokio::spawn(connection(s, g.clone(), i, kill.clone()));
                            }
                        }
                    }
                    // The listener is dropped here: connects are refused.
                });
            }
            all.push(ports);
        }
        Shard {
            by_port,
            groups: all,
        }
    }

    /// Kills the instance on `port`, as a SIGKILL would: its listener
    /// and connections close, its replicas see their link go down.
    pub fn kill(&self, port: u16) -> bool {
        let Some((g, i)) = self.by_port.get(&port) else {
            return false;
        };
        let mut g = g.lock().unwrap();
        let n = &mut g.nodes[*i];
        n.killed_at = Some(Instant::now());
        n.hello_subs.clear();
        n.kill.cancel();
        true
    }
}

pub(crate) async fn connection(s: TcpStream, g: Shared, i: usize, kill: CancellationToken) {
    let (mut rd, mut wr) = s.into_split();
    let mut dec = RequestDecoder::new();
    let mut buf = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    let (push_tx, mut push_rx) = mpsc::unbounded_channel::<Bytes>();
    let mut subscribed = 0usize;
    loop {
        tokio::select! {
            _ = kill.cancelled() => return,
            r = rd.read_buf(&mut buf) => {
                match r {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let mut quit = false;
                loop {
                    match dec.decode(&mut buf) {
                        Ok(Some(req)) => {
                            let args = &req.args;
                            if args[0].eq_ignore_ascii_case(b"QUIT") {
                                reply(&mut out, Frame::simple("OK"));
                                quit = true;
                                break;
                            }
                            handle(args, &g, i, &push_tx, &mut subscribed, &mut out);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            reply(&mut out, Frame::error(format!("ERR Protocol error: {e}")));
                            quit = true;
                            break;
                        }
                    }
                }
                if !out.is_empty() {
                    if wr.write_all(&out).await.is_err() {
                        return;
                    }
                    out.clear();
                }
                if quit {
                    return;
                }
            }
            Some(m) = push_rx.recv() => {
                if wr.write_all(&m).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Child: serves `groups` groups, named from `g<first>` on, on ports from
/// `lo` (below `hi`), prints
/// `group <m> <r1> <r2>` per group then `ready`, and kills the instance of
/// every `kill <port>` line read on stdin (answering `killed <port>`).
pub(crate) fn serve(spec: &str) {
    let f: Vec<usize> = spec
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    let (first, groups, lo, hi) = (f[0], f[1], f[2] as u16, f[3] as u16);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let shard = rt.block_on(Shard::start(first, groups, lo, hi));
    let mut out = std::io::stdout().lock();
    for [m, r1, r2] in &shard.groups {
        writeln!(out, "group {m} {r1} {r2}").unwrap();
    }
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    for l in std::io::stdin().lock().lines() {
        let Ok(l) = l else { break };
        if let Some(p) = l.strip_prefix("kill ") {
            let port: u16 = p.trim().parse().unwrap();
            let ok = shard.kill(port);
            writeln!(out, "{} {port}", if ok { "killed" } else { "unknown" }).unwrap();
            out.flush().unwrap();
        } else if l == "stats" {
            let n: Vec<String> = SERVED
                .iter()
                .map(|c| c.load(Ordering::Relaxed).to_string())
                .collect();
            writeln!(out, "stats {}", n.join(" ")).unwrap();
            out.flush().unwrap();
        }
    }
    rt.shutdown_timeout(Duration::from_millis(200));
}
