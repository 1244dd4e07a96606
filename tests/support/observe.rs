//! Watching a failover from outside: every event a Sentinel port
//! publishes, and a writer whose acknowledged writes can be checked later.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use valkyrie_protocol::Frame;

use super::Client;

/// Every `(channel, payload)` published on a Sentinel port (`PSUBSCRIBE
/// *`), collected by a thread until dropped.
pub struct Events {
    seen: Arc<Mutex<Vec<(String, String)>>>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Events {
    /// Subscribes on `port` and returns once the subscription is confirmed.
    pub fn watch(port: u16) -> Events {
        let mut sub = Client::connect_timeout(port, Duration::from_millis(100)).unwrap();
        let mut out = bytes::BytesMut::new();
        valkyrie_protocol::encode_command(&["PSUBSCRIBE", "*"], &mut out);
        std::io::Write::write_all(&mut sub.stream, &out).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match sub.read() {
                Ok(Frame::Array(_)) => break,
                Ok(other) => panic!("PSUBSCRIBE answered {other:?}"),
                Err(_) => assert!(Instant::now() < deadline, "PSUBSCRIBE not confirmed"),
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (seen, running) = (seen.clone(), running.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    let Ok(Frame::Array(parts)) = sub.read() else {
                        continue;
                    };
                    // pmessage <pattern> <channel> <payload>
                    let text = |f: &Frame| {
                        f.as_bytes()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_default()
                    };
                    if parts.len() == 4 {
                        seen.lock()
                            .unwrap()
                            .push((text(&parts[2]), text(&parts[3])));
                    }
                }
            })
        };
        Events {
            seen,
            running,
            thread: Some(thread),
        }
    }

    /// Every event so far.
    pub fn all(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }

    /// Whether `channel` was published with a payload starting with
    /// `prefix`.
    pub fn saw(&self, channel: &str, prefix: &str) -> bool {
        self.all()
            .iter()
            .any(|(c, p)| c == channel && p.starts_with(prefix))
    }

    /// How many times `channel` was published.
    pub fn count(&self, channel: &str) -> usize {
        self.all().iter().filter(|(c, _)| c == channel).count()
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A client that keeps writing `SET w<i> <i>` to whatever `master()`
/// returns, reconnecting when a write fails, and records each write the
/// server acknowledged with `+OK` (no `WAIT`: a write a master accepted is
/// a write its clients rely on), with the port and the time it was
/// acknowledged. [`Writer::start_replicated`] also waits for a replica.
pub struct Writer {
    acked: Arc<Mutex<Vec<(u64, u16, Instant)>>>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts writing every `pause`; `master` names the port to write to.
    pub fn start(pause: Duration, master: impl Fn() -> Option<u16> + Send + 'static) -> Writer {
        Writer::spawn(pause, None, Duration::from_millis(5), master)
    }

    /// Writes back to back, each acknowledged only once `WAIT 1 100` says
    /// a replica has it; after a failure it asks `master()` again after
    /// `retry`. A new connection gets 250 ms, so a hung master costs the
    /// writer little and a benchmark measures the failover.
    pub fn start_replicated(
        retry: Duration,
        master: impl Fn() -> Option<u16> + Send + 'static,
    ) -> Writer {
        Writer::spawn(Duration::ZERO, Some(1), retry, master)
    }

    fn spawn(
        pause: Duration,
        wait_replicas: Option<i64>,
        retry: Duration,
        master: impl Fn() -> Option<u16> + Send + 'static,
    ) -> Writer {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (acked, running) = (acked.clone(), running.clone());
            std::thread::spawn(move || {
                let mut conn: Option<(u16, Client)> = None;
                let mut i = 0u64;
                while running.load(Ordering::Relaxed) {
                    if conn.is_none() {
                        conn = master().and_then(|p| {
                            Client::connect_timeout(p, Duration::from_millis(250))
                                .ok()
                                .map(|c| (p, c))
                        });
                        if conn.is_none() {
                            std::thread::sleep(retry);
                            continue;
                        }
                    }
                    let (port, c) = conn.as_mut().unwrap();
                    let key = format!("w{i}");
                    let value = i.to_string();
                    i += 1;
                    let ok = matches!(c.call(&["SET", &key, &value]), Ok(Frame::Simple(_)))
                        && wait_replicas.is_none_or(|n| {
                            matches!(c.call(&["WAIT", &n.to_string(), "100"]), Ok(Frame::Integer(got)) if got >= n)
                        });
                    if ok {
                        acked.lock().unwrap().push((i - 1, *port, Instant::now()));
                        std::thread::sleep(pause);
                    } else {
                        conn = None;
                        std::thread::sleep(retry);
                    }
                }
            })
        };
        Writer {
            acked,
            running,
            thread: Some(thread),
        }
    }

    /// How many writes were acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// How many writes `port` acknowledged so far.
    pub fn acked_on(&self, port: u16) -> usize {
        self.acked
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, p, _)| *p == port)
            .count()
    }

    /// When the first write after `since` that a port other than `old`
    /// acknowledged was acknowledged.
    pub fn first_elsewhere(&self, old: u16, since: Instant) -> Option<Instant> {
        self.acked
            .lock()
            .unwrap()
            .iter()
            .find(|(_, p, at)| *p != old && *at > since)
            .map(|(_, _, at)| *at)
    }

    /// Stops writing; returns every acknowledged write `(i, port)`.
    pub fn stop(self) -> Vec<(u64, u16)> {
        self.stop_timed()
            .into_iter()
            .map(|(i, port, _)| (i, port))
            .collect()
    }

    /// Stops writing; returns every acknowledged write `(i, port, when)`.
    pub fn stop_timed(mut self) -> Vec<(u64, u16, Instant)> {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.acked.lock().unwrap().clone()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The gap between the last write the old master acknowledged and the
/// first the new one did (a switchover's stall), and the longest gap
/// between two acknowledged writes of the whole run, from
/// [`Writer::stop_timed`]'s writes.
pub fn stalls(acked: &[(u64, u16, Instant)]) -> (Duration, Duration) {
    let gap = |w: &[(u64, u16, Instant)]| w[1].2.duration_since(w[0].2);
    let at_switch = acked
        .windows(2)
        .filter(|w| w[0].1 != w[1].1)
        .map(gap)
        .max()
        .unwrap_or_default();
    let longest = acked.windows(2).map(gap).max().unwrap_or_default();
    (at_switch, longest)
}

/// The acknowledged writes `final_master` does not hold.
pub fn lost_writes(acked: &[(u64, u16)], final_master: u16) -> usize {
    let mut c = Client::connect(final_master).unwrap();
    acked
        .iter()
        .filter(|(i, _)| c.call(&["GET", &format!("w{i}")]).unwrap() != Frame::bulk(i.to_string()))
        .count()
}

/// Writes `SET probe <i>` to each of `ports` every 10 ms on its own
/// connection, recording when each node acknowledged one: which nodes
/// took writes, and when.
pub struct Probe {
    oks: Arc<Mutex<Vec<(u16, Instant)>>>,
    running: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Probe {
    /// Starts probing `ports`.
    pub fn start(ports: &[u16]) -> Probe {
        let oks = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let threads = ports
            .iter()
            .map(|&port| {
                let (oks, running) = (oks.clone(), running.clone());
                std::thread::spawn(move || {
                    let mut conn = None;
                    let mut i = 0u64;
                    while running.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                        if conn.is_none() {
                            conn = Client::connect_timeout(port, Duration::from_millis(200)).ok();
                        }
                        let Some(c) = conn.as_mut() else { continue };
                        i += 1;
                        match c.call(&["SET", &format!("probe{port}"), &i.to_string()]) {
                            Ok(Frame::Simple(_)) => {
                                oks.lock().unwrap().push((port, Instant::now()))
                            }
                            Ok(_) => {}
                            Err(_) => conn = None,
                        }
                    }
                })
            })
            .collect();
        Probe {
            oks,
            running,
            threads,
        }
    }

    /// Stops probing; returns every acknowledged probe `(port, when)`.
    pub fn stop(mut self) -> Vec<(u16, Instant)> {
        self.running.store(false, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.oks.lock().unwrap().clone()
    }
}
