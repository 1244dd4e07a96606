//! A writer like an application's on the cluster, on a thread of the
//! test's inside the node's netns: it finds the master by a route (the
//! `-master` Service's name, or the Sentinel port's Service), `RPUSH`es
//! the next number of its own list, and on any error or timeout drops the
//! connection and finds the master again. Every acknowledged number is
//! logged with its time, so that a fault's recovery and its lost writes
//! are read from the log and the list afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use valkyrie_protocol::Frame;

use crate::support::Client;
use crate::support::cluster::netns::Dialer;

/// How long one request may take before the writer gives up on the
/// connection (a pod that is gone answers nothing, not even a reset).
const TIMEOUT: Duration = Duration::from_secs(1);
/// The pause after a second failure in a row.
const BACKOFF: Duration = Duration::from_millis(50);
/// The pause between writes.
const PACE: Duration = Duration::from_millis(5);

/// How the writer finds the master.
#[derive(Clone, Debug)]
pub enum Route {
    /// A Service's DNS name, port 6379 (the `-master` Service).
    Service(String),
    /// Ask the Sentinel port's Service (`host`, port 26379) for `master`'s
    /// address, resolve it, and check `ROLE` there, as Sentinel clients do.
    Sentinel { host: String, master: String },
}

/// What the writer saw.
#[derive(Default)]
pub struct Log {
    /// Each acknowledged number, with when its reply came.
    pub acked: Vec<(u64, Instant)>,
    /// When each failure happened, and what it was.
    pub failed: Vec<(Instant, String)>,
}

pub struct Writer {
    pub key: String,
    /// How many of the log's acknowledgements a fault's count has judged.
    pub checked: AtomicUsize,
    pub route: Route,
    password: String,
    dialer: Dialer,
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts writing to list `key` of the master `route` leads to.
    pub fn start(dialer: Dialer, route: Route, key: &str, password: &str) -> Writer {
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (dialer, route, key, password) = (
                dialer.clone(),
                route.clone(),
                key.to_string(),
                password.to_string(),
            );
            let (log, stop) = (log.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("writer-{key}"))
                .spawn(move || run(&dialer, &route, &key, &password, &log, &stop))
                .unwrap()
        };
        Writer {
            key: key.to_string(),
            checked: AtomicUsize::new(0),
            route,
            password: password.to_string(),
            dialer,
            log,
            stop,
            thread: Some(thread),
        }
    }

    /// Runs `f` on the log so far.
    pub fn read<T>(&self, f: impl FnOnce(&Log) -> T) -> T {
        f(&self.log.lock().unwrap())
    }

    /// The numbers the master's list holds now (read through the route).
    pub fn stored(&self) -> Result<Vec<u64>, String> {
        let mut c = master(&self.dialer, &self.route, &self.password)?;
        let reply = c.call(&["LRANGE", &self.key, "0", "-1"])?;
        let Frame::Array(items) = reply else {
            return Err(format!("LRANGE: {reply:?}"));
        };
        items
            .iter()
            .map(|f| {
                let text = std::str::from_utf8(f.as_bytes().ok_or("not a string")?)
                    .map_err(|e| e.to_string())?;
                text.parse().map_err(|e| format!("{text}: {e}"))
            })
            .collect()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    dialer: &Dialer,
    route: &Route,
    key: &str,
    password: &str,
    log: &Mutex<Log>,
    stop: &AtomicBool,
) {
    // The first failure after a success is retried at once (a client
    // told `-READONLY`, or whose connection was closed, asks again); the
    // ones after it wait.
    let failing = std::cell::Cell::new(false);
    let failed = |e: String| {
        log.lock().unwrap().failed.push((Instant::now(), e));
        if failing.replace(true) {
            std::thread::sleep(BACKOFF);
        }
    };
    let mut next = 0u64;
    let mut conn: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match master(dialer, route, password) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    failed(e);
                    continue;
                }
            },
        };
        next += 1;
        match c.call(&["RPUSH", key, &next.to_string()]) {
            Ok(Frame::Integer(_)) => {
                failing.set(false);
                log.lock().unwrap().acked.push((next, Instant::now()));
                std::thread::sleep(PACE);
            }
            other => {
                conn = None;
                failed(format!("RPUSH: {other:?}"));
            }
        }
    }
}

/// A connection to the master `route` leads to, authenticated.
fn master(dialer: &Dialer, route: &Route, password: &str) -> Result<Client, String> {
    let addr: SocketAddr = match route {
        Route::Service(name) => format!("{}:6379", dialer.resolve(name)?).parse().unwrap(),
        Route::Sentinel { host, master } => {
            let at: SocketAddr = format!("{}:26379", dialer.resolve(host)?).parse().unwrap();
            let mut s = connect(dialer, at)?;
            let reply = s.call(&["SENTINEL", "get-master-addr-by-name", master])?;
            let Frame::Array(parts) = &reply else {
                return Err(format!("get-master-addr-by-name: {reply:?}"));
            };
            let text = |i: usize| {
                parts
                    .get(i)
                    .and_then(|f| f.as_bytes())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .ok_or_else(|| format!("get-master-addr-by-name: {reply:?}"))
            };
            let (host, port) = (text(0)?, text(1)?);
            let ip = match host.parse::<std::net::Ipv4Addr>() {
                Ok(ip) => ip,
                Err(_) => dialer.resolve(&host)?,
            };
            format!("{ip}:{port}").parse().map_err(|e| format!("{e}"))?
        }
    };
    let mut c = connect(dialer, addr)?;
    let auth = c.call(&["AUTH", password])?;
    if auth.is_error() {
        return Err(format!("AUTH: {auth:?}"));
    }
    if let Route::Sentinel { .. } = route {
        let role = c.call(&["ROLE"])?;
        let is_master = matches!(&role, Frame::Array(r) if r.first().and_then(|f| f.as_bytes()).is_some_and(|b| b.as_ref() == b"master"));
        if !is_master {
            return Err(format!("ROLE at {addr}: not a master"));
        }
    }
    Ok(c)
}

fn connect(dialer: &Dialer, addr: SocketAddr) -> Result<Client, String> {
    let s = dialer
        .connect(addr, TIMEOUT)
        .map_err(|e| format!("{addr}: {e}"))?;
    Client::over(s, TIMEOUT)
}
