//! The admin HTTP port (default 9126):
//!
//! - `GET /metrics`: Prometheus text format, rendered by
//!   `metrics-exporter-prometheus` (see [`crate::metrics`]);
//! - `GET /healthz`: 200 while the process serves requests and its
//!   runtime runs (liveness), with the body `ok`, or `degraded: state file
//!   not writable: …` while decisions wait for the state file (a restart
//!   would not free the disk: the metric `valkyrie_state_file_writable`
//!   is what to alert on); 503 once the runtime has stopped (the process
//!   then exits, see `daemon.rs`);
//! - `GET /readyz`: 200 once the readiness latch is released —
//!   configuration loaded, state restored, every configured instance
//!   probed once (`runtime::Handle::ready`) — while the runtime runs; 503
//!   otherwise.
//!
//! `HEAD` works on the same paths. This module owns the listener, a small
//! HTTP/1.1 responder and the recorder's upkeep task. The responder reads
//! one request head (bounded in size and time), answers, and closes the
//! connection: probes and scrapers need nothing more, and no HTTP stack is
//! pulled in for three read-only paths.
//!
//! Slow clients cannot starve health probes: each connection is served by
//! its own task; the whole request head must arrive within
//! [`Limits::read_timeout`] (2 s); and past [`Limits::max_connections`]
//! (counted by a [`ConnectionLimit`], as on the other ports) a new
//! connection is not refused but takes the place, and the permit, of the
//! oldest one (preferably one still sending its head), which is closed at
//! once. A
//! probe sends its head at once and is answered in microseconds, so a
//! flood of slow connections only ever evicts itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::tls::Stream;
use tokio::sync::{Notify, watch};

use crate::listen::{ConnectionLimit, Permit};

/// Bounds on what one admin client may cost.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head (request line and headers) read.
    pub max_head: usize,
    /// Time allowed to send the whole request head.
    pub read_timeout: Duration,
    /// Time allowed to take the response.
    pub write_timeout: Duration,
    /// Connections served at once; a new one past it evicts the oldest.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 8 * 1024,
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(10),
            max_connections: 64,
        }
    }
}

/// What the admin port serves from.
#[derive(Clone, Debug)]
pub struct AdminState {
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The readiness latch; its sender lives as long as the runtime.
    pub ready: watch::Receiver<bool>,
    /// Trouble the runtime reports without stopping.
    pub health: watch::Receiver<crate::runtime::Health>,
    /// `admin-tls yes`: every connection is HTTPS, the handshake bounded
    /// by the read timeout.
    pub tls: Option<Arc<crate::tls::TlsContext>>,
}

/// Why a request could not be answered normally.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The head did not fit in [`Limits::max_head`].
    #[error("request head larger than {0} bytes")]
    TooLarge(usize),
    /// The client did not send a whole head in time.
    #[error("request head not received in time")]
    Timeout,
    /// The request line is not `METHOD SP TARGET SP HTTP/1.x`.
    #[error("malformed request line")]
    Malformed,
    /// The connection closed before a whole head arrived.
    #[error("connection closed before the request was complete")]
    Closed,
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Binds the admin port, with Valkey's listen backlog (511).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::listen::bind(addr)
}

/// One connection being served.
#[derive(Debug, Default)]
struct Slot {
    /// Closes it.
    evict: Notify,
    /// Still sending its request head.
    reading: std::sync::atomic::AtomicBool,
}

/// The connections being served, oldest first, each with its permit of
/// the port's [`ConnectionLimit`].
#[derive(Debug)]
struct Slots {
    limit: Arc<ConnectionLimit>,
    live: std::sync::Mutex<std::collections::BTreeMap<u64, (Arc<Slot>, Permit)>>,
}

impl Slots {
    fn new(max: usize) -> Slots {
        Slots {
            limit: ConnectionLimit::new(max.max(1)),
            live: std::sync::Mutex::default(),
        }
    }

    fn live(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u64, (Arc<Slot>, Permit)>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a slot for connection `id`; when every permit is out, the
    /// oldest connection still sending its head (else the oldest) is
    /// evicted and its permit goes to the new one. `None` only if no
    /// permit is free and none is held by a connection (not expected).
    fn take(&self, id: u64) -> Option<Arc<Slot>> {
        let mut live = self.live();
        let permit = match self.limit.try_acquire() {
            Some(permit) => permit,
            None => {
                let reading = live
                    .iter()
                    .find(|(_, (s, _))| s.reading.load(std::sync::atomic::Ordering::Relaxed))
                    .map(|(k, _)| *k);
                let victim = reading.or_else(|| live.keys().next().copied())?;
                let (evicted, permit) = live.remove(&victim)?;
                evicted.evict.notify_one();
                permit
            }
        };
        let slot = Arc::new(Slot {
            evict: Notify::new(),
            reading: std::sync::atomic::AtomicBool::new(true),
        });
        live.insert(id, (slot.clone(), permit));
        Some(slot)
    }
}

/// Accepts admin connections until the task is dropped; an accept error
/// is retried after a back-off ([`crate::listen`]), never the listener's
/// end.
pub async fn serve(listener: TcpListener, state: AdminState, limits: Limits) {
    let slots = Arc::new(Slots::new(limits.max_connections));
    let mut acceptor = crate::listen::Acceptor::new(listener, "admin");
    let mut next: u64 = 0;
    loop {
        let (stream, _) = acceptor.accept().await;
        next += 1;
        let id = next;
        let Some(slot) = slots.take(id) else {
            continue;
        };
        let state = state.clone();
        let slots = slots.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = answer(stream, &state, limits, &slot) => if let Err(e) = r {
                    tracing::debug!("admin request: {e}");
                },
                () = slot.evict.notified() => {
                    tracing::debug!("admin connection evicted by a newer one");
                }
            }
            slots.live().remove(&id);
        });
    }
}

/// Runs the recorder's upkeep every [`crate::metrics::UPKEEP_PERIOD`]
/// until dropped, so histograms are drained between scrapes.
pub async fn upkeep(handle: PrometheusHandle) {
    let mut every = tokio::time::interval(crate::metrics::UPKEEP_PERIOD);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        handle.run_upkeep();
    }
}

/// A parsed request line.
#[derive(Debug, PartialEq, Eq)]
struct Request<'a> {
    method: &'a str,
    path: &'a str,
}

/// Reads one request head and answers it.
async fn answer(
    stream: TcpStream,
    state: &AdminState,
    limits: Limits,
    slot: &Slot,
) -> Result<(), RequestError> {
    let started = tokio::time::Instant::now();
    let mut stream = match &state.tls {
        None => Stream::Plain(stream),
        Some(tls) => {
            let accepted = tokio::time::timeout(
                limits.read_timeout,
                crate::tls::accept(tls, stream, "admin"),
            );
            match accepted.await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(RequestError::Io(std::io::Error::other(e))),
                Err(_) => return Err(RequestError::Timeout),
            }
        }
    };
    // The handshake and the head share the read timeout.
    let head = tokio::time::timeout_at(
        started + limits.read_timeout,
        read_head(&mut stream, limits),
    )
    .await;
    slot.reading
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let head = match head {
        Ok(Ok(head)) => head,
        Ok(Err(RequestError::TooLarge(n))) => {
            let r = response(
                431,
                "Request Header Fields Too Large",
                "text/plain",
                "too large\n",
            );
            write(&mut stream, &r, false, limits).await?;
            drain(&mut stream).await;
            return Err(RequestError::TooLarge(n));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let r = response(408, "Request Timeout", "text/plain", "timeout\n");
            // Best effort: a slow client may not read it either.
            let _ = write(&mut stream, &r, false, limits).await;
            return Err(RequestError::Timeout);
        }
    };
    let request = match parse_request_line(&head) {
        Ok(r) => r,
        Err(e) => {
            let r = response(400, "Bad Request", "text/plain", "bad request\n");
            write(&mut stream, &r, false, limits).await?;
            drain(&mut stream).await;
            return Err(e);
        }
    };
    let head_only = request.method == "HEAD";
    let reply = if request.method != "GET" && !head_only {
        let mut r = response(
            405,
            "Method Not Allowed",
            "text/plain",
            "GET or HEAD only\n",
        );
        r.insert_str(r.find("\r\n").map_or(0, |i| i + 2), "Allow: GET, HEAD\r\n");
        r
    } else {
        route(request.path, state)
    };
    write(&mut stream, &reply, head_only, limits).await?;
    if !matches!(request.method, "GET" | "HEAD") {
        drain(&mut stream).await;
    }
    Ok(())
}

/// After an error answer, reads (and drops) what the client still sends,
/// briefly and boundedly: closing a socket with unread input resets the
/// connection, and the reset can destroy the answer before the client
/// reads it.
async fn drain(stream: &mut Stream) {
    const MAX: usize = 256 * 1024;
    let mut chunk = [0u8; 4096];
    let mut total = 0;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while total < MAX {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
}

fn route(path: &str, state: &AdminState) -> String {
    match path {
        "/metrics" => response(
            200,
            "OK",
            "text/plain; version=0.0.4; charset=utf-8",
            &crate::metrics::render(&state.metrics),
        ),
        _ if matches!(path, "/healthz" | "/readyz") && !runtime_alive(state) => response(
            503,
            "Service Unavailable",
            "text/plain",
            "runtime stopped\n",
        ),
        "/healthz" => match &state.health.borrow().state_error {
            Some(e) => response(
                200,
                "OK",
                "text/plain",
                &format!(
                    "degraded: state file not writable: {}\n",
                    e.replace(['\r', '\n'], " ")
                ),
            ),
            None => response(200, "OK", "text/plain", "ok\n"),
        },
        "/readyz" if *state.ready.borrow() => response(200, "OK", "text/plain", "ready\n"),
        "/readyz" => response(503, "Service Unavailable", "text/plain", "not ready\n"),
        _ => response(404, "Not Found", "text/plain", "not found\n"),
    }
}

/// The runtime holds the latch's sender until it stops.
fn runtime_alive(state: &AdminState) -> bool {
    state.ready.has_changed().is_ok()
}

/// Reads until the blank line that ends the head; refuses heads larger
/// than the limit before buffering more.
async fn read_head(stream: &mut Stream, limits: Limits) -> Result<Vec<u8>, RequestError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(RequestError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            buf.truncate(end);
            return Ok(buf);
        }
        if buf.len() > limits.max_head {
            return Err(RequestError::TooLarge(limits.max_head));
        }
    }
}

/// Where the head ends (after `\r\n\r\n`, or a bare `\n\n` as lenient
/// servers accept).
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn parse_request_line(head: &[u8]) -> Result<Request<'_>, RequestError> {
    let line_end = head
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(RequestError::Malformed)?;
    let line = std::str::from_utf8(&head[..line_end])
        .map_err(|_| RequestError::Malformed)?
        .trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RequestError::Malformed);
    };
    if method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !target.starts_with('/')
        || !version.starts_with("HTTP/1.")
    {
        return Err(RequestError::Malformed);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    Ok(Request { method, path })
}

fn response(code: u16, reason: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn write(
    stream: &mut Stream,
    response: &str,
    head_only: bool,
    limits: Limits,
) -> Result<(), RequestError> {
    let bytes = if head_only {
        let end = response.find("\r\n\r\n").map_or(response.len(), |i| i + 4);
        &response.as_bytes()[..end]
    } else {
        response.as_bytes()
    };
    let send = async {
        stream.write_all(bytes).await?;
        stream.shutdown().await
    };
    match tokio::time::timeout(limits.write_timeout, send).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(RequestError::Timeout),
    }
}

#[cfg(test)]
mod tests;
