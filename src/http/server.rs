//! The admin port's listener and connections: the accept loop, the
//! connection slots (eviction past the limit), and each connection's
//! request head, read and checked here — bounded in size and time, with
//! the same 400, 405, 408 and 431 answers as ever — before the head and
//! whatever followed it are handed to hyper, which runs axum's router on
//! them ([`super::probes`] and the status routes).
//!
//! Reading the head first keeps the bounds exact and independent of the
//! HTTP stack, and tells which path is asked for: every answer but the
//! event stream must be written within [`Limits::write_timeout`]. A
//! connection serves one request and is closed, as probes and scrapers
//! expect; the event stream holds its connection until the client leaves.

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::state::{AdminState, Limits, RequestError};
use crate::listen::{ConnectionLimit, Permit};
use crate::tls::Stream;

/// One connection being served.
#[derive(Debug, Default)]
pub(super) struct Slot {
    /// Closes it.
    evict: Notify,
    /// Still sending its request head.
    pub(super) reading: AtomicBool,
}

type Live = BTreeMap<u64, (Arc<Slot>, Permit)>;

/// The connections being served, oldest first, each with its permit of
/// the port's [`ConnectionLimit`].
#[derive(Debug)]
pub(super) struct Slots {
    pub(super) limit: Arc<ConnectionLimit>,
    live: Mutex<Live>,
}

impl Slots {
    pub(super) fn new(max: usize) -> Slots {
        Slots {
            limit: ConnectionLimit::new(max.max(1)),
            live: Mutex::default(),
        }
    }

    pub(super) fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot for connection `id`; when every permit is out, the
    /// oldest connection still sending its head (else the oldest) is
    /// evicted and its permit goes to the new one. `None` only if no
    /// permit is free and none is held by a connection (not expected).
    pub(super) fn take(&self, id: u64) -> Option<Arc<Slot>> {
        let mut live = self.live();
        let permit = match self.limit.try_acquire() {
            Some(permit) => permit,
            None => {
                let reading = live
                    .iter()
                    .find(|(_, (s, _))| s.reading.load(Ordering::Relaxed))
                    .map(|(k, _)| *k);
                let victim = reading.or_else(|| live.keys().next().copied())?;
                let (evicted, permit) = live.remove(&victim)?;
                evicted.evict.notify_one();
                permit
            }
        };
        let slot = Arc::new(Slot {
            evict: Notify::new(),
            reading: AtomicBool::new(true),
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
    let router = super::routes::router(state.clone());
    let mut acceptor = crate::listen::Acceptor::new(listener, "admin");
    let mut next: u64 = 0;
    loop {
        let (stream, _) = acceptor.accept().await;
        next += 1;
        let id = next;
        let Some(slot) = slots.take(id) else {
            continue;
        };
        let tls = state.tls.clone();
        let router = router.clone();
        let slots = slots.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = answer(stream, tls, router, limits, &slot) => if let Err(e) = r {
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

/// A parsed request line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request<'a> {
    pub(super) method: &'a str,
    pub(super) path: &'a str,
}

/// Reads one request head, checks it, and has hyper answer it.
async fn answer(
    stream: TcpStream,
    tls: Option<Arc<crate::tls::TlsContext>>,
    router: axum::Router,
    limits: Limits,
    slot: &Slot,
) -> Result<(), RequestError> {
    let started = tokio::time::Instant::now();
    let mut stream = match &tls {
        None => Stream::Plain(stream),
        Some(tls) => {
            let accepted = tokio::time::timeout(
                limits.read_timeout,
                crate::tls::accept(tls, stream, "admin"),
            );
            match accepted.await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(RequestError::Io(io::Error::other(e))),
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
    slot.reading.store(false, Ordering::Relaxed);
    let (received, head_len) = match head {
        Ok(Ok(head)) => head,
        Ok(Err(RequestError::TooLarge(n))) => {
            let r = response(
                431,
                "Request Header Fields Too Large",
                "text/plain",
                "too large\n",
            );
            write(&mut stream, &r, limits).await?;
            drain(&mut stream).await;
            return Err(RequestError::TooLarge(n));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let r = response(408, "Request Timeout", "text/plain", "timeout\n");
            // Best effort: a slow client may not read it either.
            let _ = write(&mut stream, &r, limits).await;
            return Err(RequestError::Timeout);
        }
    };
    let streaming = match parse_request_line(&received[..head_len]) {
        Ok(r) if matches!(r.method, "GET" | "HEAD") => r.path == super::routes::STREAM_PATH,
        Ok(r) if r.method == "POST" && super::plans::takes_writes(r.path) => false,
        Ok(_) => {
            let mut r = response(
                405,
                "Method Not Allowed",
                "text/plain",
                "GET or HEAD only\n",
            );
            r.insert_str(r.find("\r\n").map_or(0, |i| i + 2), "Allow: GET, HEAD\r\n");
            write(&mut stream, &r, limits).await?;
            drain(&mut stream).await;
            return Ok(());
        }
        Err(e) => {
            let r = response(400, "Bad Request", "text/plain", "bad request\n");
            write(&mut stream, &r, limits).await?;
            drain(&mut stream).await;
            return Err(e);
        }
    };
    let io = hyper_util::rt::TokioIo::new(Rewind {
        prefix: Bytes::from(received),
        inner: stream,
    });
    let service = hyper_util::service::TowerToHyperService::new(router);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(false)
        .title_case_headers(true)
        .auto_date_header(false)
        .max_buf_size(limits.max_head.max(8 * 1024));
    let served = http.serve_connection(io, service);
    if streaming {
        served.await.map_err(io::Error::other)?;
    } else {
        match tokio::time::timeout(limits.write_timeout, served).await {
            Ok(r) => r.map_err(io::Error::other)?,
            Err(_) => return Err(RequestError::Timeout),
        }
    }
    Ok(())
}

/// The connection with the bytes already read in front, so hyper reads
/// the request head again from the start.
struct Rewind {
    prefix: Bytes,
    inner: Stream,
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.prefix.has_remaining() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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

/// Reads until the blank line that ends the head; refuses heads larger
/// than the limit before buffering more. Returns every byte read and
/// where the head ends in them.
async fn read_head(stream: &mut Stream, limits: Limits) -> Result<(Vec<u8>, usize), RequestError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(RequestError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            return Ok((buf, end));
        }
        if buf.len() > limits.max_head {
            return Err(RequestError::TooLarge(limits.max_head));
        }
    }
}

/// Where the head ends (after `\r\n\r\n`, or a bare `\n\n` as lenient
/// servers accept).
pub(super) fn find_head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub(super) fn parse_request_line(head: &[u8]) -> Result<Request<'_>, RequestError> {
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

/// A whole answer written by hand, for requests hyper never sees.
fn response(code: u16, reason: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn write(stream: &mut Stream, response: &str, limits: Limits) -> Result<(), RequestError> {
    let send = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    match tokio::time::timeout(limits.write_timeout, send).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(RequestError::Timeout),
    }
}
