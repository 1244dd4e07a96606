//! The route of a managed group moved ahead of its switchover
//! (`src/runtime/route.rs`), on loopback with real valkey-servers.
//!
//! kube-proxy's place is taken by a TCP forwarder: a connection goes to
//! the target set when it was accepted and stays there, as kube-proxy
//! never moves an established connection. The role hook sets the target
//! [`PROGRAMMED_AFTER`] after it is asked, as kube-proxy programs a
//! Service's change some time after it is written. The real chain
//! (API server, EndpointSlice controller, kube-proxy) runs in the node
//! tests (`tests/node/operations.rs`).
//!
//! A writer keeps one connection through the forwarder, writes every few
//! milliseconds, and reconnects after any failure. With the route moved
//! ahead (`route_wait` set), no connection made after the writer's first
//! failure in a switchover may reach the old master. Moved after the
//! promotion (`route_wait` 0, as before), the writer is sent back to the
//! demoted master: the same test's second half shows that it is, so the
//! check can fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::*;
use valkyrie::config::GroupOwner;
use valkyrie::core::Addr;
use valkyrie::runtime::{HookFuture, MasterSwitch, RoleHook, RouteFuture, RouteTo};
use valkyrie_protocol::Frame;

/// How long after a move the forwarder leads to its new target.
const PROGRAMMED_AFTER: Duration = Duration::from_millis(400);
/// Switchovers per half.
const SWITCHOVERS: usize = 2;

/// kube-proxy's stand-in: each accepted connection is forwarded to the
/// target of the moment, for its whole life.
struct Forwarder {
    port: u16,
    target: Arc<AtomicU16>,
    /// Each accepted connection: when, and where it was sent.
    accepted: Arc<Mutex<Vec<(Instant, u16)>>>,
}

impl Forwarder {
    fn start(target: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Arc::new(AtomicU16::new(target));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let (t, log) = (target.clone(), accepted.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let to = t.load(Ordering::SeqCst);
                log.lock().unwrap().push((Instant::now(), to));
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Forwarder {
            port,
            target,
            accepted,
        }
    }
}

/// Copies `from` to `to` on a thread until either ends.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// The role hook: moves the forwarder's target, [`PROGRAMMED_AFTER`]
/// later, to the route's instance or the new master.
#[derive(Debug)]
struct Hook {
    port: u16,
    target: Arc<AtomicU16>,
}

impl Hook {
    fn program(&self, to: u16) {
        let target = self.target.clone();
        std::thread::spawn(move || {
            std::thread::sleep(PROGRAMMED_AFTER);
            target.store(to, Ordering::SeqCst);
        });
    }
}

impl RoleHook for Hook {
    fn route(&self, route: RouteTo) -> RouteFuture {
        self.program(route.to.port);
        let at = Addr::new("127.0.0.1", self.port);
        Box::pin(async move { Ok(Some(at)) })
    }

    fn master_switched(&self, switch: MasterSwitch) -> HookFuture {
        self.program(switch.new.port);
        Box::pin(async { Ok(()) })
    }
}

/// What the writer saw.
#[derive(Default)]
struct Heard {
    acked: Vec<u64>,
    /// When each write failed (an error reply or a broken connection).
    failed: Vec<Instant>,
}

fn writer(port: u16, heard: Arc<Mutex<Heard>>, stop: Arc<AtomicBool>) {
    let mut next = 0u64;
    let mut conn: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Client::connect_timeout(port, Duration::from_secs(2)) {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
            },
        };
        next += 1;
        match c.call(&["RPUSH", "route", &next.to_string()]) {
            Ok(Frame::Integer(_)) => {
                heard.lock().unwrap().acked.push(next);
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                heard.lock().unwrap().failed.push(Instant::now());
                conn = None;
            }
        }
    }
}

/// Runs [`SWITCHOVERS`] switchovers of a managed group whose route waits
/// `route_wait`; for each, the connections made after the writer's first
/// failure that reached the old master.
async fn sent_back(tag: &str, route_wait: Duration) -> Vec<usize> {
    let tmp = TempDir::new(tag);
    let (master, r1, r2) = start_trio(&valkey_server(), &tmp.0);
    let forwarder = Forwarder::start(master.port);
    let state = tmp.0.join("v");
    std::fs::create_dir_all(&state).unwrap();
    let d = valkyrie::daemon::Daemon::start(daemon_config(&state, Vec::new()))
        .await
        .unwrap();
    let mut g = fast_group(master.port);
    g.route_wait = route_wait;
    g.owner = GroupOwner::Kubernetes {
        namespace: "shop".into(),
        name: "cache".into(),
        labels: Default::default(),
    };
    d.handle.apply_managed(g).await.unwrap();
    let hook = Hook {
        port: forwarder.port,
        target: forwarder.target.clone(),
    };
    d.handle.set_role_hook(Arc::new(hook)).await.unwrap();
    replicas_known(&d.handle, 2).await;

    let heard: Arc<Mutex<Heard>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (h, s, p) = (heard.clone(), stop.clone(), forwarder.port);
        std::thread::spawn(move || writer(p, h, s))
    };
    let acked = || heard.lock().unwrap().acked.len();
    let mut counts = Vec::new();
    for _ in 0..SWITCHOVERS {
        let view = d.handle.topology.borrow().groups["mymaster"].clone();
        let old = view.master.clone();
        let before = acked();
        let h = heard.clone();
        tokio::task::spawn_blocking(move || {
            wait_until(Duration::from_secs(10), || {
                h.lock().unwrap().acked.len() > before + 100
            })
        })
        .await
        .unwrap();
        let asked = Instant::now();
        d.handle
            .switch_over("mymaster".into(), old.clone())
            .await
            .unwrap();
        // Moved, its replicas following, and the forwarder programmed.
        let (handle, target) = (d.handle.clone(), forwarder.target.clone());
        let old_port = old.port;
        tokio::task::spawn_blocking(move || {
            wait_until(Duration::from_secs(20), || {
                let g = handle.topology.borrow().groups["mymaster"].clone();
                g.master.port != old_port
                    && !g.failover_in_progress
                    && target.load(Ordering::SeqCst) == g.master.port
                    && upstream(old_port) == Some(g.master.port)
            })
        })
        .await
        .unwrap();
        let h = heard.clone();
        let after = acked();
        tokio::task::spawn_blocking(move || {
            wait_until(Duration::from_secs(10), || {
                h.lock().unwrap().acked.len() > after + 50
            })
        })
        .await
        .unwrap();
        let first_failure = heard
            .lock()
            .unwrap()
            .failed
            .iter()
            .copied()
            .find(|t| *t > asked)
            .expect("the switchover cut the writer off the old master once");
        let back = forwarder
            .accepted
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, to)| *t > first_failure && *to == old.port)
            .count();
        eprintln!("{tag}: after the first failure, {back} connection(s) reached the old master");
        counts.push(back);
    }
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();

    // Nothing acknowledged was lost.
    let port = d.handle.topology.borrow().groups["mymaster"].master.port;
    let stored = match call(port, &["LRANGE", "route", "0", "-1"]) {
        Frame::Array(items) => items.len(),
        other => panic!("{other:?}"),
    };
    let acked = heard.lock().unwrap().acked.len();
    assert!(
        stored >= acked,
        "{tag}: {acked} acknowledged, {stored} stored"
    );
    d.stop().await.unwrap();
    drop((master, r1, r2));
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_moved_ahead_never_sends_the_writer_back_to_the_old_master() {
    let ahead = sent_back("route-ahead", Duration::from_millis(2000)).await;
    assert!(
        ahead.iter().all(|&n| n == 0),
        "moved ahead, the route led back to the old master: {ahead:?}"
    );
    // The route moved after the promotion, as before: the same check
    // finds the writer sent back to the demoted master.
    let after = sent_back("route-after", Duration::ZERO).await;
    assert!(
        after.iter().any(|&n| n > 0),
        "moved after the promotion, the writer was never sent back: the check cannot fail ({after:?})"
    );
}
