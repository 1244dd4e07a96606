//! Benchmark: TLS on the Sentinel port, Valkyrie against a real
//! valkey-sentinel, side by side in one run with the same certificate and
//! key.
//!
//! ```sh
//! source scripts/deps.sh && valkyrie_deps   # VALKEY_SERVER, VALKEY_SENTINEL, VALKEY_BENCHMARK
//! VALKYRIE_BENCH_TRIALS=3 cargo test --release --test tls bench:: -- --ignored --nocapture
//! ```
//!
//! `--release`: what is compared is CPU time per handshake and per
//! request against an optimized C daemon, so Valkyrie (and the rustls
//! client here) must be optimized too; a dev build prints a warning.
//!
//! One valkey-server master (plain port: the monitored link is not what
//! is measured), one Valkyrie and one valkey-sentinel monitoring it, both
//! with `port 0` and a `tls-port` only, the same certificate and key (the
//! support module's PKI: ECDSA P-256). Measured on each, in turn (which
//! one goes first alternates between trials), with the same client for
//! both:
//!
//! 1. the TLS handshake rate: full handshakes (session resumption off in
//!    the client) by a rustls client in this process, each followed by one
//!    `SENTINEL get-master-addr-by-name mymaster`, its reply, a
//!    `close_notify` and the close; with 1 and 8 concurrent connectors,
//!    with `tls-auth-clients no`, then again with `tls-auth-clients yes`
//!    (the client presents a certificate, the server verifies it);
//! 2. `SENTINEL get-master-addr-by-name mymaster` throughput over TLS:
//!    `valkey-benchmark --tls -c 50` at `-P 1` and `-P 16`
//!    (`tls-auth-clients no`).
//!
//! Next to each rate, the server's CPU time (user + system from
//! `/proc/<pid>/stat`) per handshake or per request. Nothing is pinned:
//! the client runs on the same cores as the server and competes with it,
//! so the CPU cost is the figure that compares the two servers even where
//! the client is the bound. The CPU per request includes the 50
//! benchmark connections' own handshakes (2–5 % of it, the most at
//! `-P 16`).
//!
//! Knobs: `VALKYRIE_BENCH_TRIALS` (3; the tables give the median),
//! `VALKYRIE_BENCH_HANDSHAKES` (4,000 per cell), `VALKYRIE_BENCH_REQUESTS`
//! (100,000 per cell at `-P 1`, five times as many at `-P 16`),
//! `VALKYRIE_BENCH_SYSTEMS` (`valkyrie,valkey-sentinel`; one of them alone
//! measures only that one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rustls::pki_types::ServerName;
use support::tls::{DaemonProc, Pki, Who};
use support::{Server, TempDir, free_port, valkey_server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

const SYSTEMS: [&str; 2] = ["valkyrie", "valkey-sentinel"];
const CONNECTORS: [usize; 2] = [1, 8];
const PIPELINES: [usize; 2] = [1, 16];
const QUERY: [&str; 3] = ["SENTINEL", "get-master-addr-by-name", "mymaster"];

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A daemon (Valkyrie or valkey-sentinel) with only a TLS port, killed by
/// PID on drop.
struct Daemon {
    name: &'static str,
    port: u16,
    proc: DaemonProc,
}

impl Daemon {
    fn start(name: &'static str, dir: &Path, pki: &Pki, auth_clients: &str, master: u16) -> Daemon {
        let dir = dir.join(format!("{name}-{auth_clients}"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let mut conf = format!("port 0\nbind 127.0.0.1\ndir {}\n", dir.display());
        conf.push_str(&pki.server_directives(port, auth_clients));
        conf.push_str(&format!("sentinel monitor mymaster 127.0.0.1 {master} 1\n"));
        let bin = if name == "valkyrie" {
            conf.push_str("admin-port 0\nindex-port 0\n");
            PathBuf::from(env!("CARGO_BIN_EXE_valkyrie"))
        } else {
            support::sentinel::valkey_sentinel()
        };
        let conf_file = dir.join("sentinel.conf");
        std::fs::write(&conf_file, conf).unwrap();
        Daemon {
            name,
            port,
            proc: DaemonProc::start(&bin, &conf_file, &dir.join("daemon.log")),
        }
    }

    /// User + system CPU time so far (`/proc/<pid>/stat`, fields 14 and 15).
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.proc.pid())).unwrap();
        // The command name may hold spaces; count fields from after it.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.proc.pid())).unwrap();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kib / 1024.0
    }
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    })
}

/// The support module's rustls client (trusts the test CA; presents the
/// client certificate when `client_auth`), never resuming a session.
fn connector(pki: &Pki, client_auth: bool) -> TlsConnector {
    let who = if client_auth {
        Who::Client
    } else {
        Who::Anonymous
    };
    let mut config = (*pki.client_config(who)).clone();
    config.resumption = rustls::client::Resumption::disabled();
    TlsConnector::from(Arc::new(config))
}

/// What one connection negotiated, for the record.
struct Negotiated {
    version: String,
    suite: String,
    group: String,
}

/// One connection: TCP connect, full handshake, `QUERY`, its reply,
/// `close_notify`, close. The reply must name the master.
async fn one(connector: &TlsConnector, port: u16) -> Result<Negotiated, String> {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let mut req = BytesMut::new();
    encode_command(&QUERY, &mut req);
    tls.write_all(&req).await.map_err(|e| e.to_string())?;
    let (mut dec, mut buf) = (FrameDecoder::new(), BytesMut::with_capacity(256));
    let reply = loop {
        if let Some(f) = dec.decode(&mut buf).map_err(|e| e.to_string())? {
            break f;
        }
        if tls.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("closed before the reply".into());
        }
    };
    if !matches!(&reply, Frame::Array(v) if v.len() == 2) {
        return Err(format!("unexpected reply {reply:?}"));
    }
    let (_, conn) = tls.get_ref();
    let negotiated = Negotiated {
        version: format!("{:?}", conn.protocol_version().unwrap()),
        suite: format!("{:?}", conn.negotiated_cipher_suite().unwrap().suite()),
        group: conn
            .negotiated_key_exchange_group()
            .map(|g| format!("{:?}", g.name()))
            .unwrap_or_default(),
    };
    tls.shutdown().await.map_err(|e| e.to_string())?;
    Ok(negotiated)
}

/// A measured cell: the rate and the server's CPU per operation.
#[derive(Clone, Copy)]
struct Cell {
    rate: f64,
    cpu_us: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// `n` handshakes by `connectors` concurrent connectors.
async fn handshakes(d: &Daemon, tls: &TlsConnector, n: usize, connectors: usize) -> Cell {
    let per = n / connectors;
    let cpu0 = d.cpu();
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..connectors)
        .map(|_| {
            let (tls, port) = (tls.clone(), d.port);
            tokio::spawn(async move {
                for _ in 0..per {
                    one(&tls, port).await?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            panic!("{}: {e}", d.name);
        }
    }
    let wall = t0.elapsed();
    let cpu = d.cpu() - cpu0;
    let done = (per * connectors) as f64;
    Cell {
        rate: done / wall.as_secs_f64(),
        cpu_us: cpu.as_secs_f64() * 1e6 / done,
        p50_ms: f64::NAN,
        p99_ms: f64::NAN,
    }
}

/// `valkey-benchmark --tls -c 50 -n n -P pipeline QUERY`.
async fn benchmark(d: &Daemon, pki: &Pki, n: usize, pipeline: usize) -> Cell {
    let bin = std::env::var("VALKEY_BENCHMARK").unwrap_or_else(|_| "valkey-benchmark".into());
    let cpu0 = d.cpu();
    let out = tokio::process::Command::new(&bin)
        .args(["-h", "127.0.0.1", "-p", &d.port.to_string(), "--tls"])
        .arg("--cacert")
        .arg(pki.ca_file())
        .args(["-c", "50", "-n", &n.to_string()])
        .args(["-P", &pipeline.to_string(), "--csv"])
        .args(QUERY)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap_or_else(|e| panic!("{bin}: {e} (source scripts/deps.sh && valkyrie_deps)"));
    let cpu = d.cpu() - cpu0;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    let row: Vec<f64> = text
        .lines()
        .last()
        .unwrap_or_default()
        .split(',')
        .skip(1)
        .filter_map(|f| f.trim_matches('"').parse().ok())
        .collect();
    assert!(
        out.status.success() && row.len() >= 6,
        "{bin} against {}: {text}\n{}",
        d.name,
        String::from_utf8_lossy(&out.stderr),
    );
    Cell {
        rate: row[0],
        cpu_us: cpu.as_secs_f64() * 1e6 / n as f64,
        p50_ms: row[3],
        p99_ms: row[5],
    }
}

/// Requests per `valkey-benchmark` run: five times as many when
/// pipelined, so that the 50 connections' handshakes stay a small part of
/// the server's CPU time there too.
fn requests(n: usize, pipeline: usize) -> usize {
    if pipeline > 1 { 5 * n } else { n }
}

/// Waits until `d` answers over TLS with the master's address.
async fn ready(d: &mut Daemon, tls: &TlsConnector) -> Negotiated {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match one(tls, d.port).await {
            Ok(n) => return n,
            Err(e) => {
                assert!(d.proc.running(), "{} exited", d.name);
                assert!(
                    Instant::now() < deadline,
                    "{} not answering over TLS on {}: {e}",
                    d.name,
                    d.port,
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Medians of the trials of one cell, per system, as table rows with the
/// ratios to valkey-sentinel's.
fn rows(key: &str, by_system: &BTreeMap<&str, Vec<Cell>>, latency: bool) -> Vec<String> {
    let med = |s: &str, f: fn(&Cell) -> f64| median(by_system[s].iter().map(f).collect());
    let base = by_system.contains_key("valkey-sentinel").then(|| {
        (
            med("valkey-sentinel", |c| c.rate),
            med("valkey-sentinel", |c| c.cpu_us),
        )
    });
    SYSTEMS
        .iter()
        .filter(|s| by_system.contains_key(*s))
        .map(|&s| {
            let (rate, cpu) = (med(s, |c| c.rate), med(s, |c| c.cpu_us));
            let runs: Vec<String> = by_system[s].iter().map(|c| thousands(c.rate)).collect();
            let (r, e) = match base {
                Some((br, bc)) if s == "valkyrie" => {
                    (format!("{:.2}×", rate / br), format!("{:.2}", bc / cpu))
                }
                _ => (String::new(), String::new()),
            };
            let lat = if latency {
                format!(
                    " {:.3} | {:.3} |",
                    med(s, |c| c.p50_ms),
                    med(s, |c| c.p99_ms)
                )
            } else {
                String::new()
            };
            format!(
                "| {key} | {s} | {} | {} |{lat} {cpu:.1} | {r} | {e} |",
                thousands(rate),
                runs.join(" / ")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: about two minutes; run with --ignored --nocapture"]
async fn tls_handshakes_and_throughput_against_valkey_sentinel() {
    let trials = knob("VALKYRIE_BENCH_TRIALS", 3).max(1);
    let n_handshakes = knob("VALKYRIE_BENCH_HANDSHAKES", 4000);
    let n_requests = knob("VALKYRIE_BENCH_REQUESTS", 100_000);
    let systems: Vec<&'static str> = match std::env::var("VALKYRIE_BENCH_SYSTEMS") {
        Ok(list) => SYSTEMS
            .into_iter()
            .filter(|s| list.split(',').any(|x| x.trim() == *s))
            .collect(),
        Err(_) => SYSTEMS.to_vec(),
    };
    assert!(
        !systems.is_empty(),
        "VALKYRIE_BENCH_SYSTEMS names no system"
    );

    if cfg!(debug_assertions) {
        eprintln!(
            "WARNING: a dev build: Valkyrie and the client are unoptimized; \
             measure with cargo test --release"
        );
    }
    let tmp = TempDir::new("tls-bench");
    let pki = Pki::new(&tmp.0.join("pki"));
    let master = Server::start(&valkey_server(), &tmp.0, free_port(), None);

    // (client certificate, connectors) -> system -> trials
    let mut hs: BTreeMap<(&str, usize), BTreeMap<&str, Vec<Cell>>> = BTreeMap::new();
    let mut tput: BTreeMap<usize, BTreeMap<&str, Vec<Cell>>> = BTreeMap::new();
    let mut notes = Vec::new();
    for (auth, client_auth) in [("no", false), ("yes", true)] {
        let tls = connector(&pki, client_auth);
        let mut daemons: Vec<Daemon> = systems
            .iter()
            .map(|s| Daemon::start(s, &tmp.0, &pki, auth, master.port))
            .collect();
        for d in &mut daemons {
            let n = ready(d, &tls).await;
            notes.push(format!(
                "{} (tls-auth-clients {auth}): {}, {}, {}; RSS {:.1} MiB idle",
                d.name,
                n.version,
                n.suite,
                n.group,
                d.rss_mib()
            ));
        }
        let label = if client_auth {
            "yes (mutual TLS)"
        } else {
            "no"
        };
        for trial in 0..trials {
            // Which system goes first alternates between trials.
            let order: Vec<&Daemon> = if trial % 2 == 0 {
                daemons.iter().collect()
            } else {
                daemons.iter().rev().collect()
            };
            for &c in &CONNECTORS {
                for &d in &order {
                    let cell = handshakes(d, &tls, n_handshakes, c).await;
                    eprintln!(
                        "trial {trial}, tls-auth-clients {auth}, {c} connectors, {}: {:.0} handshakes/s, {:.1} µs CPU each",
                        d.name, cell.rate, cell.cpu_us
                    );
                    hs.entry((label, c))
                        .or_default()
                        .entry(d.name)
                        .or_default()
                        .push(cell);
                }
            }
            if client_auth {
                continue;
            }
            for &p in &PIPELINES {
                for &d in &order {
                    let cell = benchmark(d, &pki, requests(n_requests, p), p).await;
                    eprintln!(
                        "trial {trial}, -P {p}, {}: {:.0} requests/s, {:.2} µs CPU each",
                        d.name, cell.rate, cell.cpu_us
                    );
                    tput.entry(p)
                        .or_default()
                        .entry(d.name)
                        .or_default()
                        .push(cell);
                }
            }
        }
        for d in &daemons {
            notes.push(format!(
                "{} (tls-auth-clients {auth}): RSS {:.1} MiB after",
                d.name,
                d.rss_mib()
            ));
        }
    }

    println!(
        "\nTLS handshakes on the Sentinel port: {n_handshakes} full handshakes per cell \
         (no resumption), each with one `SENTINEL get-master-addr-by-name` and a close; \
         median of {trials} trials\n"
    );
    println!(
        "| client certificate | connectors | system | handshakes/s (median) | all runs | server CPU µs/handshake | rate ÷ Sentinel | Sentinel CPU ÷ Valkyrie's |"
    );
    println!("|---|---:|---|---:|---|---:|---:|---:|");
    for ((auth, c), by_system) in &hs {
        for r in rows(&format!("{auth} | {c}"), by_system, false) {
            println!("{r}");
        }
    }
    println!(
        "\n`valkey-benchmark --tls -c 50 -n {} -P 1` and `-n {} -P 16` SENTINEL \
         get-master-addr-by-name mymaster (tls-auth-clients no); median of {trials} trials\n",
        requests(n_requests, 1),
        requests(n_requests, 16)
    );
    println!(
        "| pipeline | system | requests/s (median) | all runs | p50 ms | p99 ms | server CPU µs/request | rps ÷ Sentinel | Sentinel CPU ÷ Valkyrie's |"
    );
    println!("|---:|---|---:|---|---:|---:|---:|---:|---:|");
    for (p, by_system) in &tput {
        for r in rows(&p.to_string(), by_system, true) {
            println!("{r}");
        }
    }
    println!(
        "\n{} CPUs, nothing pinned; {} build",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if cfg!(debug_assertions) {
            "dev (unoptimized)"
        } else {
            "release"
        }
    );
    for n in notes {
        println!("{n}");
    }
}
