//! The writer that runs through the whole migration: it asks the monitors
//! in turn where `mymaster` is, writes `mig:<i>` = `<i>` there with `i`
//! always increasing, and records a write as acknowledged once `WAIT`
//! reports both replicas have it. A write `SET` alone acknowledged can be
//! lost to any SIGKILL of the master (replication is asynchronous, with
//! Sentinel as with Valkyrie); one both replicas hold survives any
//! promotion, so losing it is a failover's fault.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use valkyrie_protocol::Frame;

use crate::support::peers::{poll, text};
use crate::support::{Client, advertised_master};

/// One acknowledged write: its index and the master that took it.
pub type Ack = (u64, u16);

pub struct Writer {
    acked: Arc<Mutex<Vec<Ack>>>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts writing through the monitors at `monitor_ports`.
    pub fn start(monitor_ports: Vec<u16>) -> Writer {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (acked, running) = (acked.clone(), running.clone());
            std::thread::spawn(move || write_loop(&monitor_ports, &acked, &running))
        };
        Writer {
            acked,
            running,
            thread: Some(thread),
        }
    }

    /// The acknowledged writes so far.
    pub fn acked(&self) -> Vec<Ack> {
        self.acked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until `master` has acknowledged `n` more writes than it had
    /// when called.
    pub fn progress_on(&self, master: u16, n: usize, limit: Duration) -> Result<(), String> {
        let on = |w: &Writer| w.acked().iter().filter(|a| a.1 == master).count();
        let start = on(self);
        poll(limit, || {
            let now = on(self);
            if now >= start + n {
                Ok(())
            } else {
                Err(format!(
                    "{} writes acknowledged on {master} (wanted {n}); last ones: {:?}",
                    now - start,
                    self.acked().iter().rev().take(3).collect::<Vec<_>>()
                ))
            }
        })
    }

    /// Stops writing; every acknowledged write.
    pub fn stop(mut self) -> Vec<Ack> {
        self.halt();
        self.acked()
    }

    fn halt(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn write_loop(monitors: &[u16], acked: &Mutex<Vec<Ack>>, running: &AtomicBool) {
    let mut conn: Option<(u16, Client)> = None;
    let mut ask = 0usize;
    let mut i = 0u64;
    let limit = Duration::from_millis(1500);
    while running.load(Ordering::Relaxed) {
        let Some((master, c)) = conn.as_mut() else {
            let monitor = monitors[ask % monitors.len()];
            ask += 1;
            conn = advertised_master(monitor)
                .and_then(|p| Client::connect_timeout(p, limit).ok().map(|c| (p, c)));
            if conn.is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            continue;
        };
        let (key, value) = (format!("mig:{i}"), i.to_string());
        let ok = matches!(c.call(&["SET", &key, &value]), Ok(Frame::Simple(_)))
            && matches!(c.call(&["WAIT", "2", "1000"]), Ok(Frame::Integer(n)) if n >= 2);
        if ok {
            acked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((i, *master));
            std::thread::sleep(Duration::from_millis(20));
        } else {
            // Ask again: the master may have moved.
            conn = None;
            std::thread::sleep(Duration::from_millis(50));
        }
        i += 1;
    }
}

/// The acknowledged writes whose key does not hold its value on `port`.
pub fn missing(port: u16, acked: &[Ack]) -> Result<Vec<u64>, String> {
    let mut c = Client::connect_timeout(port, Duration::from_secs(5))?;
    let mut lost = Vec::new();
    for chunk in acked.chunks(500) {
        let keys: Vec<String> = chunk.iter().map(|a| format!("mig:{}", a.0)).collect();
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(String::as_str));
        match c.call(&args)? {
            Frame::Array(v) if v.len() == chunk.len() => {
                for (a, f) in chunk.iter().zip(v) {
                    if text(&f) != a.0.to_string() {
                        lost.push(a.0);
                    }
                }
            }
            other => return Err(format!("MGET on {port}: {other:?}")),
        }
    }
    Ok(lost)
}
