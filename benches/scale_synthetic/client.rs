//! A blocking RESP2 client for Valkyrie's Sentinel port, and the event
//! watcher (`PSUBSCRIBE *` on a thread, every event kept with when it was
//! read).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

/// A blocking RESP2 client.
pub(crate) struct Client {
    pub(crate) stream: std::net::TcpStream,
    pub(crate) dec: FrameDecoder,
    pub(crate) buf: BytesMut,
}

impl Client {
    pub(crate) fn connect(port: u16, timeout: Duration) -> Result<Client, String> {
        let stream =
            std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(timeout)).unwrap();
        let _ = stream.set_nodelay(true);
        Ok(Client {
            stream,
            dec: FrameDecoder::with_limits(valkyrie_protocol::Limits {
                max_aggregate: 10_000_000,
                max_frame: 1 << 30,
                ..valkyrie_protocol::Limits::DEFAULT
            }),
            buf: BytesMut::new(),
        })
    }

    pub(crate) fn call(&mut self, args: &[&str]) -> Result<Frame, String> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out).map_err(|e| e.to_string())?;
        self.read()
    }

    pub(crate) fn read(&mut self) -> Result<Frame, String> {
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).map_err(|e| e.to_string())? {
                return Ok(f);
            }
            let mut chunk = [0u8; 65536];
            let n = match self.stream.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => r,
            };
            let n = n.map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    "timeout".to_string()
                }
                _ => e.to_string(),
            })?;
            if n == 0 {
                return Err("closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

pub(crate) fn text(f: &Frame) -> String {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// The fields of a RESP2 flat map (or a RESP3 map).
pub(crate) fn fields(f: &Frame) -> HashMap<String, String> {
    match f {
        Frame::Array(kv) => kv
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        Frame::Map(kv) => kv.iter().map(|(k, v)| (text(k), text(v))).collect(),
        _ => HashMap::new(),
    }
}

/// Every event a Sentinel port publishes (`PSUBSCRIBE *`), with when it
/// was read.
pub(crate) type Seen = Arc<Mutex<Vec<(Instant, String, String)>>>;

pub(crate) struct Events {
    pub(crate) seen: Seen,
    /// How often the subscription was lost (and made again).
    pub(crate) lost: Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) running: Arc<AtomicBool>,
    pub(crate) thread: Option<std::thread::JoinHandle<()>>,
}

impl Events {
    pub(crate) fn subscribe(port: u16) -> Result<Client, String> {
        let mut sub = Client::connect(port, Duration::from_millis(100))?;
        let mut out = BytesMut::new();
        encode_command(&["PSUBSCRIBE", "*"], &mut out);
        sub.stream.write_all(&out).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match sub.read() {
                Ok(Frame::Array(_)) => return Ok(sub),
                Ok(other) => return Err(format!("PSUBSCRIBE answered {other:?}")),
                Err(e) if e == "timeout" && Instant::now() < deadline => {}
                Err(e) => return Err(format!("PSUBSCRIBE not confirmed: {e}")),
            }
        }
    }

    pub(crate) fn watch(port: u16) -> Events {
        let mut sub = Events::subscribe(port).unwrap();
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicBool::new(true));
        let lost = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let thread = {
            let (seen, running, lost) = (seen.clone(), running.clone(), lost.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    match sub.read() {
                        Ok(Frame::Array(parts)) if parts.len() == 4 => {
                            seen.lock().unwrap().push((
                                Instant::now(),
                                text(&parts[2]),
                                text(&parts[3]),
                            ));
                        }
                        Ok(_) => {}
                        Err(e) if e == "timeout" => {}
                        Err(e) => {
                            // Closed (a slow subscriber is disconnected):
                            // subscribe again; events in between are lost.
                            eprintln!("  event subscription lost: {e}");
                            lost.fetch_add(1, Ordering::Relaxed);
                            loop {
                                if !running.load(Ordering::Relaxed) {
                                    return;
                                }
                                if let Ok(s) = Events::subscribe(port) {
                                    sub = s;
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                }
            })
        };
        Events {
            seen,
            lost,
            running,
            thread: Some(thread),
        }
    }

    pub(crate) fn count_between(&self, channel: &str, from: Instant, to: Instant) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, c, _)| c == channel && *t >= from && *t <= to)
            .count()
    }

    pub(crate) fn count(&self, channel: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, c, _)| c == channel)
            .count()
    }

    /// When `channel` was first seen after `from` with a payload starting
    /// with `prefix`.
    pub(crate) fn first(&self, channel: &str, prefix: &str, from: Instant) -> Option<Instant> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .find(|(t, c, p)| *t >= from && c == channel && p.starts_with(prefix))
            .map(|(t, _, _)| *t)
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
