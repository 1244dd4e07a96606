//! One subscriber: greeting, commands, pushes, heartbeats.
//!
//! The loop waits for whichever comes first — a command line, a new
//! publication, or the heartbeat deadline — and writes the answer before
//! waiting again. It keeps no queue of pushes: on a new publication it
//! sends the latest snapshot of every watched group it has not yet sent,
//! so however many changes happened while it was writing, the subscriber
//! gets the newest state once. Memory per subscriber is its patterns, one
//! command line and a map of versions sent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::tls::Stream;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;
use valkyrie_protocol::index::wire::{ClientCommand, ServerMessage, parse_command};
use valkyrie_protocol::index::{
    IndexError, MAX_COMMAND_LINE, MAX_PATTERNS, PROTOCOL_VERSION, Pattern,
};

use super::publish::Published;
use super::{Limits, Stats};

/// Why a subscriber's connection ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// Reading or writing failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// Its socket did not take a push within the allowed lag.
    #[error("too slow: a push was not accepted within {0:?}")]
    Slow(std::time::Duration),
}

/// Counts the subscriber while it is connected (in the stats and the
/// metrics).
struct Registered(
    Arc<Stats>,
    #[allow(dead_code)] crate::metrics::IndexSubscriber,
);

impl Registered {
    fn new(stats: Arc<Stats>) -> Registered {
        stats.subscribers.fetch_add(1, Ordering::Relaxed);
        Registered(stats, crate::metrics::index_subscriber_connected())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Subscriber {
    writer: tokio::io::WriteHalf<Stream>,
    limits: Limits,
    stats: Arc<Stats>,
    patterns: Vec<Pattern>,
    /// Version of each group last sent.
    sent: BTreeMap<String, u64>,
    /// Small replies waiting to be written, in order with the pushes.
    out: BytesMut,
    /// Snapshots waiting to be written after `out`.
    pushes: Vec<Bytes>,
    last_write: Instant,
}

/// Serves one subscriber until it quits, disconnects, lags, or the
/// publisher stops (the daemon is shutting down); `permit` counts it
/// against [`Limits::max_subscribers`] and [`Limits::max_per_address`]
/// until then.
pub async fn run(
    stream: Stream,
    mut published: watch::Receiver<Arc<Published>>,
    greeting: Bytes,
    limits: Limits,
    stats: Arc<Stats>,
    permit: super::Permits,
) -> Result<(), ConnectionError> {
    let _permit = permit;
    let _registered = Registered::new(stats.clone());
    stream.tcp().set_nodelay(true)?;
    let (mut reader, writer) = tokio::io::split(stream);
    let mut s = Subscriber {
        writer,
        limits,
        stats,
        patterns: Vec::new(),
        sent: BTreeMap::new(),
        out: BytesMut::new(),
        pushes: Vec::new(),
        last_write: Instant::now(),
    };
    s.pushes.push(greeting);
    s.flush().await?;
    let mut input = BytesMut::new();
    // One timer for the heartbeat, moved only when it fires: resetting it
    // on every write would cost a timer update per push per subscriber.
    let heartbeat = tokio::time::sleep_until(s.last_write + s.limits.heartbeat);
    tokio::pin!(heartbeat);
    loop {
        tokio::select! {
            r = reader.read_buf(&mut input) => {
                if r? == 0 {
                    return Ok(());
                }
                if !s.commands(&mut input, &published)? {
                    s.flush().await?;
                    let _ = s.writer.shutdown().await;
                    return Ok(());
                }
                input.reserve(512);
            }
            r = published.changed(), if !s.patterns.is_empty() => {
                if r.is_err() {
                    return Ok(());
                }
                s.collect(&published.borrow_and_update());
            }
            _ = &mut heartbeat => {
                let due = s.last_write + s.limits.heartbeat;
                if due <= Instant::now() {
                    ServerMessage::Heartbeat.encode(&mut s.out);
                    heartbeat.as_mut().reset(Instant::now() + s.limits.heartbeat);
                } else {
                    heartbeat.as_mut().reset(due);
                }
            }
        }
        s.flush().await?;
    }
}

impl Subscriber {
    /// Handles every complete line in `input`; `false` when the connection
    /// must close after what has been queued.
    fn commands(
        &mut self,
        input: &mut BytesMut,
        published: &watch::Receiver<Arc<Published>>,
    ) -> Result<bool, ConnectionError> {
        while let Some(nl) = memchr_newline(input) {
            let line = input.split_to(nl + 1);
            let line = &line[..nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.len() > MAX_COMMAND_LINE {
                return self.fatal(IndexError::LineTooLong {
                    limit: MAX_COMMAND_LINE,
                });
            }
            match parse_command(line) {
                Ok(None) => {}
                Ok(Some(ClientCommand::Hello(v))) => {
                    ServerMessage::Hello(v.min(PROTOCOL_VERSION)).encode(&mut self.out);
                }
                Ok(Some(ClientCommand::Ping(token))) => {
                    ServerMessage::Pong(token).encode(&mut self.out);
                }
                Ok(Some(ClientCommand::Quit)) => {
                    ServerMessage::Bye.encode(&mut self.out);
                    return Ok(false);
                }
                Ok(Some(ClientCommand::Watch(patterns))) => {
                    let new: Vec<Pattern> = patterns
                        .into_iter()
                        .filter(|p| !self.patterns.contains(p))
                        .collect();
                    if self.patterns.len() + new.len() > MAX_PATTERNS {
                        self.error(&IndexError::TooManyPatterns {
                            limit: MAX_PATTERNS,
                        });
                        continue;
                    }
                    self.patterns.extend(new);
                    ServerMessage::Watching(self.patterns.len()).encode(&mut self.out);
                    self.collect(&published.borrow());
                }
                Err(e) if e.is_fatal() => return self.fatal(e),
                Err(e) => self.error(&e),
            }
        }
        if input.len() > MAX_COMMAND_LINE {
            return self.fatal(IndexError::LineTooLong {
                limit: MAX_COMMAND_LINE,
            });
        }
        Ok(true)
    }

    fn error(&mut self, e: &IndexError) {
        crate::metrics::index_error(e.code());
        ServerMessage::Error {
            code: e.code().into(),
            message: e.to_string(),
        }
        .encode(&mut self.out);
    }

    fn fatal(&mut self, e: IndexError) -> Result<bool, ConnectionError> {
        self.error(&e);
        tracing::debug!("index subscriber closed: {e}");
        Ok(false)
    }

    /// Queues the newest snapshot of every watched group not yet sent, and
    /// `GONE` for sent groups that are no longer published.
    fn collect(&mut self, p: &Published) {
        // Replies queued so far go first.
        if !self.out.is_empty() {
            self.pushes.push(self.out.split().freeze());
        }
        for (name, entry) in &p.groups {
            if self.sent.get(name) == Some(&entry.snapshot.version)
                || !self.patterns.iter().any(|pat| pat.matches(name))
            {
                continue;
            }
            self.sent.insert(name.clone(), entry.snapshot.version);
            self.pushes.push(entry.bytes.clone());
            self.stats.pushes.fetch_add(1, Ordering::Relaxed);
            crate::metrics::index_push(name);
        }
        let gone: Vec<String> = self
            .sent
            .keys()
            .filter(|n| !p.groups.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.sent.remove(&name);
            ServerMessage::Gone(name).encode(&mut self.out);
        }
    }

    /// Writes everything queued, within the allowed lag.
    async fn flush(&mut self) -> Result<(), ConnectionError> {
        if !self.out.is_empty() {
            self.pushes.push(self.out.split().freeze());
        }
        if self.pushes.is_empty() {
            return Ok(());
        }
        // Most pushes fit the socket buffer at once: write them without
        // arming a timer; only what does not fit waits, under the lag
        // limit.
        let mut done = 0;
        let mut offset = 0;
        while let Some(chunk) = self.pushes.get(done) {
            match crate::tls::stream::try_write(&mut self.writer, &chunk[offset..]) {
                Ok(n) if offset + n == chunk.len() => {
                    done += 1;
                    offset = 0;
                }
                Ok(n) => offset += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        // TLS: records rustls holds must reach the socket too (plain TCP
        // holds nothing).
        if done < self.pushes.len() || !crate::tls::stream::try_flush(&mut self.writer)? {
            let rest = &self.pushes[done..];
            let writer = &mut self.writer;
            let write = async move {
                let mut offset = offset;
                for c in rest {
                    writer.write_all(&c[offset..]).await?;
                    offset = 0;
                }
                writer.flush().await
            };
            match tokio::time::timeout(self.limits.max_lag, write).await {
                Ok(r) => r?,
                Err(_) => {
                    self.stats.slow_disconnects.fetch_add(1, Ordering::Relaxed);
                    return Err(ConnectionError::Slow(self.limits.max_lag));
                }
            }
        }
        self.pushes.clear();
        self.last_write = Instant::now();
        Ok(())
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}
