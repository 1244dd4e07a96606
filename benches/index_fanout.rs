//! Index-port fan-out: N subscribers on loopback, time from a topology
//! change to the *last* subscriber receiving the new snapshot.
//!
//! The server is Valkyrie's index server (`valkyrie::index::serve`) in a
//! child process (this binary re-executed), so that server and
//! subscribers each stay under the open-file limit; its topology channel
//! is driven by the parent over a pipe: a line `<step>` publishes a
//! failover (new master, epoch `step`). The subscribers are the real Rust
//! client (`IndexClient`) on a tokio runtime in this process. A trial
//! starts when the parent writes the line and ends when the last of the N
//! subscribers has decoded the new snapshot, so the figure includes the
//! pipe, publication, N socket writes and N client-side decodes, all on
//! the same machine.
//!
//! Run: `cargo bench --bench index_fanout`. Knobs:
//! `VALKYRIE_FANOUT_SUBSCRIBERS` (comma list, default `100,1000,10000`),
//! `VALKYRIE_FANOUT_TRIALS` (default 200), `VALKYRIE_FANOUT_STALLED`
//! (default 0: subscribers opened first, from 127.0.0.2, that send
//! `WATCH bench` and never read; the figures stay those of the N reading
//! ones), `VALKYRIE_FANOUT_PER_ADDRESS` (the server's per-address limit:
//! the default limit with stalled subscribers, else 0, none, since all
//! readers share 127.0.0.1), `VALKYRIE_FANOUT_GAP_MS` (the pause before
//! each change, default 20). The open-file limit is raised
//! to the hard limit with `prlimit` (util-linux) on this process before
//! the child is started, which inherits it. Prints a markdown table for
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../tests/support/procstat.rs"]
#[allow(dead_code)]
mod procstat;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, mpsc, watch};
use valkyrie::core::Addr;
use valkyrie::index::{self, Limits, Stats};
use valkyrie::topology::{GroupView, InstanceView, Topology};
use valkyrie_protocol::index::{IndexClient, Update};

const SERVE_ENV: &str = "VALKYRIE_FANOUT_SERVE";
const PER_ADDRESS_ENV: &str = "VALKYRIE_FANOUT_PER_ADDRESS";

fn instance(port: u16) -> InstanceView {
    InstanceView {
        offset: 1_000_000,
        ..InstanceView::new(Addr::new("127.0.0.1", port))
    }
}

/// The group after `step` failovers: the master alternates between two
/// ports, the epoch is the step.
fn topology(step: u64) -> Arc<Topology> {
    let (m, r) = if step.is_multiple_of(2) {
        (7000, 7001)
    } else {
        (7001, 7000)
    };
    let g = GroupView {
        // Every step moves the master: a new revision.
        revision: step + 1,
        config_epoch: step,
        master: Addr::new("127.0.0.1", m),
        master_down: false,
        failover_in_progress: false,
        replicas: vec![instance(r), instance(7002)],
        quorum: 1,
        down_after: 1000,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        odown: false,
        failover_state: None,
        masterless: false,
        at_risk: Vec::new(),
        fence: None,
        fence_sent: None,
        paused: false,
        managed: false,
        labels: Default::default(),
        master_details: instance(m),
    };
    Arc::new(Topology {
        peer_links: 0,
        tilt: false,
        tilt_since: None,
        groups: [("bench".to_string(), Arc::new(g))].into_iter().collect(),
        readiness: Default::default(),
    })
}

/// Child: serve, publish one change per stdin line.
fn serve() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = watch::channel(topology(0));
    let listener = rt
        .block_on(index::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    let stats = Arc::new(Stats::default());
    let limits = Limits {
        max_per_address: std::env::var(PER_ADDRESS_ENV).unwrap().parse().unwrap(),
        ..Limits::default()
    };
    rt.spawn(async move { index::serve(listener, rx, "fanout-bench", limits, stats).await });
    // The watch sender needs no runtime: publish from this thread.
    for l in std::io::stdin().lock().lines() {
        let step: u64 = l.unwrap().trim().parse().unwrap();
        tx.send(topology(step)).unwrap();
    }
}

/// Bytes of one raw push: about the size of the `bench` snapshot.
const RAW_LEN: usize = 232;

fn raw_payload(step: u64) -> [u8; RAW_LEN] {
    let mut p = [b'.'; RAW_LEN];
    p[..8].copy_from_slice(&step.to_le_bytes());
    p
}

/// Child, floor mode: no protocol, no tasks per subscriber — one thread
/// writes the same bytes to every socket in turn. What remains is the
/// kernel's loopback path and the subscribers' runtime.
fn serve_raw() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(index::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    let conns = Arc::new(std::sync::Mutex::new(Vec::<std::net::TcpStream>::new()));
    let conns2 = conns.clone();
    rt.spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let mut s = s.into_std().unwrap();
            s.set_nonblocking(false).unwrap();
            s.set_nodelay(true).unwrap();
            s.write_all(&raw_payload(0)).unwrap();
            conns2.lock().unwrap().push(s);
        }
    });
    for l in std::io::stdin().lock().lines() {
        let step: u64 = l.unwrap().trim().parse().unwrap();
        let p = raw_payload(step);
        for mut s in conns.lock().unwrap().iter() {
            s.write_all(&p).unwrap();
        }
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

struct Row {
    n: usize,
    /// Stalled subscribers the server kept.
    kept: usize,
    trials: usize,
    last: Vec<Duration>,
    each_p50: Duration,
    rss: u64,
}

/// Opens `count` subscribers from 127.0.0.2 that watch the bench group
/// and never read a push, as a stuck or hostile host does; they live as
/// long as the returned sockets. Also returns how many the server kept
/// (the others were answered `ERR busy`).
fn stalled(port: u16, count: usize) -> (Vec<std::net::TcpStream>, usize) {
    let server: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let from: std::net::SocketAddr = ([127, 0, 0, 2], 0).into();
    let mut kept = 0;
    let socks = (0..count)
        .map(|_| {
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.bind(&from.into()).unwrap();
            sock.connect(&server.into()).unwrap();
            let mut s: std::net::TcpStream = sock.into();
            s.write_all(b"WATCH bench\n").unwrap();
            // Peek at the first line only: refused or greeted.
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut head = [0u8; 8];
            let n = s.peek(&mut head).unwrap();
            if !head[..n].starts_with(b"ERR busy") {
                kept += 1;
            }
            s
        })
        .collect();
    (socks, kept)
}

fn run(n: usize, trials: usize, raw: bool, stalled_count: usize, per_address: usize) -> Row {
    let gap = Duration::from_millis(
        std::env::var("VALKYRIE_FANOUT_GAP_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20),
    );
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .env(SERVE_ENV, if raw { "raw" } else { "index" })
        .env(PER_ADDRESS_ENV, per_address.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let port: u16 = port.trim().parse().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (_stalled, kept) = stalled(port, stalled_count);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // Per subscriber: the epoch it last received and when (ns after
    // `base`); a count of receipts of the current change, and a wake-up
    // for the main thread when the last one arrives.
    let base = Instant::now();
    let arrivals: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..n)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let count = Arc::new(AtomicUsize::new(0));
    let all_in = Arc::new(Notify::new());
    // Connect in batches: the listen backlog is finite.
    rt.block_on(async {
        let mut started = 0;
        while started < n {
            let batch = (n - started).min(250);
            let (ready_tx, mut ready_rx) = mpsc::channel::<()>(batch);
            for i in started..started + batch {
                let ready = ready_tx.clone();
                let (arrivals, count, all_in) = (arrivals.clone(), count.clone(), all_in.clone());
                let record = move |epoch: u64| {
                    let at = base.elapsed().as_nanos() as u64;
                    arrivals[i].1.store(at, Ordering::Relaxed);
                    arrivals[i].0.store(epoch, Ordering::Release);
                    if count.fetch_add(1, Ordering::AcqRel) + 1 == n {
                        all_in.notify_one();
                    }
                };
                if raw {
                    tokio::spawn(async move {
                        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                            .await
                            .unwrap();
                        let mut buf = [0u8; RAW_LEN];
                        s.read_exact(&mut buf).await.unwrap();
                        ready.send(()).await.unwrap();
                        drop(ready);
                        while s.read_exact(&mut buf).await.is_ok() {
                            let mut step = [0u8; 8];
                            step.copy_from_slice(&buf[..8]);
                            record(u64::from_le_bytes(step));
                        }
                    });
                    continue;
                }
                tokio::spawn(async move {
                    let mut c = IndexClient::connect(("127.0.0.1", port)).await.unwrap();
                    c.watch(&["bench"]).await.unwrap();
                    match c.next().await.unwrap() {
                        Update::Snapshot(_) => {}
                        other => panic!("{other:?}"),
                    }
                    ready.send(()).await.unwrap();
                    drop(ready);
                    while let Ok(u) = c.next().await {
                        if let Update::Snapshot(s) = u {
                            record(s.epoch);
                        }
                    }
                });
            }
            drop(ready_tx);
            for _ in 0..batch {
                ready_rx.recv().await.unwrap();
            }
            started += batch;
            if std::env::var_os("VALKYRIE_FANOUT_VERBOSE").is_some() {
                eprintln!("{started} subscribers connected");
            }
        }
    });

    let mut last = Vec::with_capacity(trials);
    let mut each = Vec::with_capacity(trials * n.min(1000));
    let stride = (n / 1000).max(1);
    for step in 1..=trials as u64 {
        std::thread::sleep(gap);
        count.store(0, Ordering::SeqCst);
        let t0 = base.elapsed().as_nanos() as u64;
        writeln!(stdin, "{step}").unwrap();
        stdin.flush().unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), all_in.notified())
                .await
                .expect("a subscriber missed a change");
        });
        let mut latest = 0;
        for (i, (epoch, at)) in arrivals.iter().enumerate() {
            assert_eq!(
                epoch.load(Ordering::Acquire),
                step,
                "one snapshot per change, in order"
            );
            let at = at.load(Ordering::Relaxed);
            latest = latest.max(at);
            if i % stride == 0 {
                each.push(Duration::from_nanos(at - t0));
            }
        }
        last.push(Duration::from_nanos(latest - t0));
    }
    let rss = procstat::rss_kib(child.id());
    drop(stdin);
    let _ = child.wait();
    rt.shutdown_timeout(Duration::from_secs(1));
    last.sort_unstable();
    each.sort_unstable();
    Row {
        n,
        kept,
        trials,
        last,
        each_p50: pct(&each, 0.5),
        rss,
    }
}

fn main() {
    match std::env::var(SERVE_ENV).as_deref() {
        Ok("index") => return serve(),
        Ok("raw") => return serve_raw(),
        _ => {}
    }
    // `cargo test --benches` runs bench binaries without `--bench`.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    // As high as the hard limit allows.
    let limit = procstat::raise_nofile(u64::MAX);
    let sizes: Vec<usize> = std::env::var("VALKYRIE_FANOUT_SUBSCRIBERS")
        .unwrap_or_else(|_| "100,1000,10000".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let trials: usize = std::env::var("VALKYRIE_FANOUT_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    eprintln!("open-file limit {limit}");
    let raw = std::env::var_os("VALKYRIE_FANOUT_RAW").is_some();
    let stalled_count: usize = std::env::var("VALKYRIE_FANOUT_STALLED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let per_address: usize = std::env::var(PER_ADDRESS_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if stalled_count > 0 {
            index::DEFAULT_MAX_PER_ADDRESS
        } else {
            0
        });
    println!(
        "| server | subscribers | changes | p50 last-received (ms) | p99 last-received (ms) | max (ms) | median per subscriber (ms) | server RSS (MiB) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        if (n + stalled_count) as u64 + 64 > limit {
            eprintln!("skipping {n}: open-file limit {limit}");
            continue;
        }
        let r = run(n, trials, raw, stalled_count, per_address);
        let server = match (raw, stalled_count) {
            (true, 0) => "raw floor".to_string(),
            (true, k) => format!("raw floor, {k} stalled"),
            (false, 0) => "index".to_string(),
            (false, k) => format!(
                "index, {k} stalled, per-address limit {per_address} ({} kept)",
                r.kept
            ),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            server,
            r.n,
            r.trials,
            ms(pct(&r.last, 0.5)),
            ms(pct(&r.last, 0.99)),
            ms(*r.last.last().unwrap()),
            ms(r.each_p50),
            r.rss as f64 / 1024.0
        );
    }
}
