//! Ports that never die: the real daemon binary under a 64-descriptor
//! limit (`prlimit --nofile=64:64`) meets a flood of clients: the
//! descriptor budget (`listen::budget`: of 64, 32 are kept as Valkey keeps
//! them and 16 for the admin port, so 16 clients) refuses the excess with
//! each port's own refusal, `/healthz` answers throughout, no accept ever fails,
//! and every listener answers again once the connections are gone;
//! `maxclients` is clamped to fit (Valkey's rule: limit - 32); the listen
//! backlog is Valkey's 511. A flood of index subscribers and Sentinel
//! clients under a 256-descriptor limit stops no failover and no state
//! write. And 64 slow ("slowloris") admin clients do not starve `/healthz`
//! probes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::wire::*;
use support::*;
use valkyrie::daemon::Daemon;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The daemon binary on `conf` under an open-file limit of `nofile`
/// (`prlimit`), with its index and admin ports, logging to `log`.
fn limited(nofile: u32, conf: &std::path::Path, ip: u16, ap: u16, log: &std::path::Path) -> Killed {
    let log = std::fs::File::create(log).unwrap();
    Killed(
        Command::new("prlimit")
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(env!("CARGO_BIN_EXE_valkyrie"))
            .arg(conf)
            .args(["--index-port", &ip.to_string()])
            .args(["--admin-port", &ap.to_string()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// Sends `req` on a fresh connection and returns what arrived within
/// `wait` (until EOF).
fn exchange(port: u16, req: &[u8], wait: Duration) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.write_all(req);
    let _ = s.set_read_timeout(Some(wait));
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn healthz(port: u16, wait: Duration) -> bool {
    exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", wait).starts_with("HTTP/1.1 200")
}

fn sentinel_pong(port: u16, wait: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"PING\r\n");
    let _ = s.set_read_timeout(Some(wait));
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(n) if &buf[..n] == b"+PONG\r\n")
}

fn index_greets(port: u16, wait: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(wait));
    let mut buf = [0u8; 256];
    matches!(s.read(&mut buf), Ok(n) if n > 0)
}

/// The listen queue of a port (Send-Q of its listening socket in `ss`).
fn backlog(port: u16) -> Option<u32> {
    let out = Command::new("ss")
        .args(["-ltnH"])
        .arg(format!("( sport = :{port} )"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace().nth(2)?.parse().ok()
}

#[test]
fn listeners_survive_running_out_of_descriptors() {
    assert!(
        Command::new("prlimit").arg("--version").output().is_ok(),
        "prlimit (util-linux) is missing: install util-linux"
    );
    let tmp = TempDir::new("nofile");
    let (sp, ip, ap) = (free_port(), free_port(), free_port());
    let conf = tmp.0.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!("port {sp}\nbind 127.0.0.1\ndir {}\n", tmp.0.display()),
    )
    .unwrap();
    let child = limited(64, &conf, ip, ap, &tmp.0.join("daemon.log"));
    let fast = Duration::from_millis(500);
    wait_until(Duration::from_secs(10), || sentinel_pong(sp, fast));
    let logged = || std::fs::read_to_string(tmp.0.join("daemon.log")).unwrap_or_default();

    // A flood: 100 index subscribers (the kernel queues what the daemon
    // has not accepted yet). They take the client budget, and the
    // Sentinel port refuses its clients as at maxclients ...
    let flood: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", ip)).ok())
        .collect();
    assert!(flood.len() > 64);
    let mut starved = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !starved && Instant::now() < deadline {
        starved = exchange(sp, b"PING\r\n", Duration::from_millis(300))
            == "-ERR max number of clients reached\r\n";
    }
    assert!(starved, "the budget was not reached");
    // ... while the admin port, kept out of the budget, answers.
    for _ in 0..5 {
        assert!(healthz(ap, fast), "/healthz during the flood");
    }
    drop(flood);

    // Every port accepts and answers again.
    wait_until(Duration::from_secs(10), || sentinel_pong(sp, fast));
    wait_until(Duration::from_secs(10), || index_greets(ip, fast));
    wait_until(Duration::from_secs(10), || healthz(ap, fast));
    let metrics = exchange(ap, b"GET /metrics HTTP/1.1\r\n\r\n", Duration::from_secs(2));
    let errors: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("valkyrie_accept_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(errors == 0.0, "the descriptors never ran out:\n{metrics}");
    assert!(!logged().contains("accept failed"));

    // Valkey's rule: the limit cannot be raised, so maxclients = 64 - 32.
    let mut c = Raw::connect(sp);
    let info = c.ask(&cmd(&["INFO", "clients"]));
    assert!(info.contains("maxclients:32\r\n"), "{info}");
    drop(c);
    assert!(logged().contains("maxclients lowered from 10000 to 32"));

    // Valkey's listen backlog (capped by somaxconn).
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(511);
    assert_eq!(backlog(sp), Some(511.min(somaxconn)), "Sentinel port");
    assert_eq!(backlog(ap), Some(511.min(somaxconn)), "admin port");

    // Past maxclients: Valkey's error, then closed. First, until only
    // this client is connected (earlier probes have been seen to leave).
    let mut c = Raw::connect(sp);
    wait_until(Duration::from_secs(10), || {
        c.ask(&cmd(&["INFO", "clients"]))
            .contains("connected_clients:1\r\n")
    });
    let mut clients: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", sp)).unwrap();
            s.write_all(b"PING\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            s
        })
        .collect();
    // Every client stays open until all are read: one closed early would
    // free its slot for a later one the daemon has not accepted yet.
    let (mut pong, mut refused) = (0, 0);
    for s in clients.iter_mut() {
        let mut got = Vec::new();
        let mut buf = [0u8; 128];
        while !got.ends_with(b"\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        match got.as_slice() {
            b"+PONG\r\n" => pong += 1,
            b"-ERR max number of clients reached\r\n" => refused += 1,
            other => panic!("{:?}", String::from_utf8_lossy(other)),
        }
    }
    assert_eq!(
        (pong, refused),
        (15, 25),
        "16 clients at most: the client budget under 64 descriptors"
    );
    drop(clients);
    drop(c);
    // Once the daemon has seen them go, the port answers again.
    wait_until(Duration::from_secs(10), || sentinel_pong(sp, fast));
    drop(child);
}

/// 64 clients sending their request one byte per second hold every admin
/// slot; 75 `/healthz` probes still all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_admin_clients_do_not_starve_probes() {
    let tmp = TempDir::new("slowloris");
    let mut cfg = daemon_config(&tmp.0, vec![]);
    cfg.admin_port = free_port();
    let d = Daemon::start(cfg).await.unwrap();
    let ap = d.admin_addrs[0].port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut slow = Vec::new();
    for _ in 0..64 {
        let stop = stop.clone();
        let connected = connected.clone();
        slow.push(std::thread::spawn(move || {
            let head = b"GET /healthz HTTP/1.1\r\nHost: slow\r\n\r\n";
            let mut first = true;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Reconnect whenever the server closes the connection.
                let Ok(mut s) = TcpStream::connect(("127.0.0.1", ap)) else {
                    continue;
                };
                for b in head.iter().take(head.len() - 1) {
                    if s.write_all(&[*b]).is_err() {
                        break;
                    }
                    if first {
                        first = false;
                        connected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    // The attack's pace: one byte a second.
                    std::thread::sleep(Duration::from_secs(1));
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                }
            }
        }));
    }
    let probes = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            connected.load(std::sync::atomic::Ordering::Relaxed) == 64
        });
        let mut ok = 0;
        let started = Instant::now();
        for _ in 0..75 {
            let t = Instant::now();
            if healthz(ap, Duration::from_secs(1)) {
                ok += 1;
            }
            // One probe every 40 ms, over 3 s: through the slow clients'
            // 2 s deadline and their reconnections.
            std::thread::sleep(Duration::from_millis(40).saturating_sub(t.elapsed()));
        }
        (ok, started.elapsed())
    })
    .await
    .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, took) = probes;
    assert_eq!(ok, 75, "every probe succeeded (in {took:?})");
    for t in slow {
        let _ = t.join();
    }
    d.stop().await.unwrap();
}

/// Under a 256-descriptor limit, 300 index subscribers and 300 Sentinel
/// clients hold what the budget lets them; the master is then killed:
/// the failover happens, its state is written, and `/healthz` answers.
/// (Without the budget, such a flood took every descriptor: the state
/// file could not be written and the master was not failed over.)
#[test]
fn a_flood_of_clients_stops_no_failover() {
    let bin = valkey_server();
    let tmp = TempDir::new("nofile-failover");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let (sp, ip, ap) = (free_port(), free_port(), free_port());
    let conf = tmp.0.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sp}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n",
            tmp.0.display(),
            master.port
        ),
    )
    .unwrap();
    let child = limited(256, &conf, ip, ap, &tmp.0.join("daemon.log"));
    let fast = Duration::from_millis(500);
    wait_until(Duration::from_secs(10), || sentinel_pong(sp, fast));
    // One client of our own, before the flood, to ask what is advertised.
    let mut ours = Raw::connect(sp);
    wait_until(Duration::from_secs(15), || {
        ours.ask(&cmd(&["SENTINEL", "MASTER", "mymaster"]))
            .contains("num-slaves\r\n$1\r\n2")
    });
    let flood: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", ip)).ok())
        .chain((0..300).filter_map(|_| TcpStream::connect(("127.0.0.1", sp)).ok()))
        .collect();
    assert!(flood.len() > 256, "the flood exceeds the limit");
    wait_until(Duration::from_secs(10), || {
        exchange(sp, b"PING\r\n", Duration::from_millis(300))
            == "-ERR max number of clients reached\r\n"
    });
    assert!(healthz(ap, fast), "/healthz during the flood");

    master.kill();
    let moved = |reply: &str| {
        [r1.port, r2.port]
            .iter()
            .any(|p| reply.contains(&format!("\r\n{p}\r\n")))
    };
    wait_until(Duration::from_secs(20), || {
        moved(&ours.ask(&cmd(&["SENTINEL", "get-master-addr-by-name", "mymaster"])))
    });
    let state = std::fs::read_to_string(tmp.0.join("valkyrie-state.json")).unwrap();
    assert!(
        [r1.port, r2.port]
            .iter()
            .any(|p| state.contains(&format!("\"master\": \"127.0.0.1:{p}\""))),
        "the new master is saved: {state}"
    );
    assert!(healthz(ap, fast), "/healthz after the failover");
    drop(flood);
    drop(child);
}
