//! Slow subscribers and limits on the index port: one that stops reading
//! neither blocks the others nor makes the server hold more than the
//! newest snapshot for it (memory measured), it is coalesced to the newest
//! state when it reads again, and one whose socket does not drain within
//! the allowed lag is disconnected; idle subscribers get heartbeats; past
//! the subscriber limit a connection gets `ERR busy` and is closed, and
//! so past the per-address limit, which other addresses do not feel.
//!
//! These drive the real index server (`valkyrie::index::serve`) with a
//! topology channel of the runtime's own type, because a thousand changes
//! of 180 KB snapshots cannot be produced by failing over real servers in
//! a test's time. The failover path from real servers to subscribers is
//! covered by `tests/index/real_servers.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;
use valkyrie::core::Addr;
use valkyrie::index::{self, Limits, Stats};
use valkyrie::topology::{GroupView, InstanceView, Topology};

/// The tests of this file run one at a time: one measures the process's
/// RSS, which the others' snapshots would inflate.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn instance(host: &str, port: u16) -> InstanceView {
    InstanceView {
        offset: 123_456_789,
        ..InstanceView::new(Addr::new(host, port))
    }
}

/// Group `big` after `step` failovers, with `replicas` replicas.
fn topology(step: u64, replicas: u16) -> Arc<Topology> {
    let master = instance("10.0.0.1", 10_000 + (step % 2) as u16);
    let g = GroupView {
        // Every step moves the master: a new revision.
        revision: step + 1,
        config_epoch: step,
        master: master.addr.clone(),
        master_down: false,
        failover_in_progress: false,
        replicas: (0..replicas)
            .map(|i| instance("10.0.0.2", 20_000 + i))
            .collect(),
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
        master_details: master,
    };
    Arc::new(Topology {
        peer_links: 0,
        tilt: false,
        tilt_since: None,
        groups: [("big".to_string(), Arc::new(g))].into_iter().collect(),
        readiness: Default::default(),
    })
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

struct Setup {
    tx: watch::Sender<Arc<Topology>>,
    port: u16,
    stats: Arc<Stats>,
    /// Highest version the reading subscriber has received.
    seen: Arc<AtomicU64>,
    reader: tokio::task::JoinHandle<()>,
}

async fn setup(limits: Limits) -> Setup {
    let (tx, rx) = watch::channel(topology(0, 3000));
    let listener = index::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let stats = Arc::new(Stats::default());
    tokio::spawn(index::serve(listener, rx, "test", limits, stats.clone()));
    // A subscriber that reads everything, recording versions.
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (r, mut w) = stream.into_split();
    w.write_all(b"WATCH big\n").await.unwrap();
    let seen = Arc::new(AtomicU64::new(0));
    let seen2 = seen.clone();
    let reader = tokio::spawn(async move {
        let _w = w;
        let mut lines = tokio::io::BufReader::new(r).lines();
        while let Some(l) = lines.next_line().await.unwrap() {
            if let Some(v) = l.strip_prefix("SNAPSHOT big ").and_then(|a| {
                a.split(' ')
                    .find_map(|kv| kv.strip_prefix("version="))
                    .map(|v| v.parse::<u64>().unwrap())
            }) {
                seen2.store(v, Ordering::SeqCst);
            }
        }
    });
    // Versions count from the topology the server's publisher first
    // reads, when the spawned `serve` first runs: a change sent before
    // that (a loaded machine can delay it) would be version 1, and
    // `change` would wait for a version that never comes. The reader's
    // first snapshot shows the server started on `topology(0)`.
    wait_for_version(&seen, 1).await;
    Setup {
        tx,
        port,
        stats,
        seen,
        reader,
    }
}

/// Waits until the reading subscriber has received version `want`.
async fn wait_for_version(seen: &AtomicU64, want: u64) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while seen.load(Ordering::SeqCst) < want {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "reader did not get version {want} (it has {}): others are blocked",
            seen.load(Ordering::SeqCst)
        )
    });
}

/// A subscriber that watches `big` and then reads nothing.
fn stalled(port: u16) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"WATCH big\n").unwrap();
    s
}

/// Publishes change `step` and waits until the reading subscriber has it.
async fn change(s: &Setup, step: u64) {
    s.tx.send(topology(step, 3000)).unwrap();
    wait_for_version(&s.seen, step + 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_subscriber_is_coalesced_and_memory_stays_bounded() {
    let _serial = SERIAL.lock().await;
    let s = setup(Limits {
        max_lag: Duration::from_secs(300),
        ..Limits::default()
    })
    .await;
    let slow = stalled(s.port);
    change(&s, 1).await;
    let before = rss_kib();
    const STEPS: u64 = 1000;
    let mut bytes = 0usize;
    for step in 2..=STEPS {
        change(&s, step).await;
        bytes += 3000 * 60;
    }
    let grown = rss_kib().saturating_sub(before);
    eprintln!(
        "pushed ~{} MiB to a stalled subscriber; RSS grew by {} KiB",
        bytes >> 20,
        grown
    );
    assert_eq!(s.stats.subscribers.load(Ordering::SeqCst), 2);
    assert_eq!(s.stats.slow_disconnects.load(Ordering::SeqCst), 0);
    // Queuing would hold ~170 MiB; the server holds one snapshot for it.
    assert!(grown < 48 * 1024, "RSS grew by {grown} KiB");

    // When it reads again it gets what the socket buffers held, then the
    // newest state — not the thousand changes in between.
    let counted = tokio::task::spawn_blocking(move || {
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut r = BufReader::new(slow);
        let mut snapshots = 0u64;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "closed");
            if let Some(rest) = line.strip_prefix("SNAPSHOT big ") {
                snapshots += 1;
                if rest.contains(&format!("version={}", STEPS + 1)) {
                    return snapshots;
                }
            }
        }
    })
    .await
    .unwrap();
    eprintln!("the stalled subscriber received {counted} of {STEPS} snapshots");
    assert!(counted < STEPS / 5, "{counted} snapshots: not coalesced");
    s.reader.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_that_does_not_drain_is_disconnected() {
    let _serial = SERIAL.lock().await;
    // The stalled subscriber lags forever; the reader, which reads as
    // soon as it runs, must never lag this long, even on a loaded machine.
    let s = setup(Limits {
        max_lag: Duration::from_secs(1),
        ..Limits::default()
    })
    .await;
    let slow = stalled(s.port);
    let mut step = 1;
    // Its socket buffers fill within a few dozen changes, and it is
    // disconnected one lag later.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while s.stats.slow_disconnects.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "never disconnected ({step} changes)"
        );
        change(&s, step).await;
        step += 1;
        if step % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    eprintln!("the stalled subscriber was disconnected after {step} changes");
    // The reader kept up throughout (`change` waited for it every step).
    // The disconnect is counted before the subscriber count drops: wait
    // for both, with a bound.
    tokio::time::timeout(Duration::from_secs(5), async {
        while s.stats.subscribers.load(Ordering::SeqCst) != 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} subscribers left",
            s.stats.subscribers.load(Ordering::SeqCst)
        )
    });
    change(&s, step).await;
    // The stalled one finds the end of the stream once it drains.
    tokio::task::spawn_blocking(move || {
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut r = BufReader::new(slow);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .unwrap();
    s.reader.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_when_idle_and_busy_past_the_subscriber_limit() {
    let _serial = SERIAL.lock().await;
    let (_tx, rx) = watch::channel(topology(0, 1));
    let listener = index::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let limits = Limits {
        max_subscribers: 1,
        heartbeat: Duration::from_millis(200),
        ..Limits::default()
    };
    tokio::spawn(index::serve(listener, rx, "test", limits, Arc::default()));
    tokio::task::spawn_blocking(move || {
        let first = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut r = BufReader::new(first);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.ends_with(" heartbeat=200\n"), "{line}");
        // Idle: heartbeats, spaced by the period.
        let start = std::time::Instant::now();
        for _ in 0..2 {
            line.clear();
            r.read_line(&mut line).unwrap();
            assert_eq!(line, "HEARTBEAT\n");
        }
        assert!(start.elapsed() >= Duration::from_millis(350));
        // A second subscriber is one too many.
        let second = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        second
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut r2 = BufReader::new(second);
        line.clear();
        r2.read_line(&mut line).unwrap();
        assert_eq!(line, "ERR busy too many subscribers\n");
        line.clear();
        assert_eq!(r2.read_line(&mut line).unwrap(), 0, "not closed");
    })
    .await
    .unwrap();
}

/// A subscriber from `from`; returns its first line.
fn subscribe_from(from: [u8; 4], port: u16) -> (BufReader<std::net::TcpStream>, String) {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&std::net::SocketAddr::from((from, 0)).into())
        .unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let s: std::net::TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    (r, line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_its_share_of_subscribers() {
    let _serial = SERIAL.lock().await;
    let (_tx, rx) = watch::channel(topology(0, 1));
    let listener = index::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let limits = Limits {
        max_per_address: 3,
        ..Limits::default()
    };
    let stats = Arc::new(Stats::default());
    tokio::spawn(index::serve(listener, rx, "test", limits, stats.clone()));
    tokio::task::spawn_blocking(move || {
        let mut held: Vec<_> = (0..3)
            .map(|_| {
                let (r, line) = subscribe_from([127, 0, 0, 2], port);
                assert!(line.starts_with("VALKYRIE-INDEX "), "{line}");
                r
            })
            .collect();
        // The fourth from the same address is turned away and closed.
        let (mut r, line) = subscribe_from([127, 0, 0, 2], port);
        assert_eq!(line, "ERR busy too many subscribers from this address\n");
        let mut rest = String::new();
        assert_eq!(r.read_line(&mut rest).unwrap(), 0, "not closed");
        // Another address is served.
        let (_other, line) = subscribe_from([127, 0, 0, 3], port);
        assert!(line.starts_with("VALKYRIE-INDEX "), "{line}");
        // A closed subscriber gives its place back.
        drop(held.pop());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (_r, line) = subscribe_from([127, 0, 0, 2], port);
            if line.starts_with("VALKYRIE-INDEX ") {
                break;
            }
            assert_eq!(line, "ERR busy too many subscribers from this address\n");
            assert!(
                std::time::Instant::now() < deadline,
                "the place never came back"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
}
