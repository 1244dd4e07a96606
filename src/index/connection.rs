//! One subscriber: greeting, commands, pushes, heartbeats.
//!
//! The loop waits for whichever comes first — a command line, a new
//! publication, or the heartbeat deadline — and writes the answer before
//! waiting again. It keeps no queue of pushes: on a new publication it
//! sends the latest snapshot of every watched group it has not yet sent,
//! so however many changes happened while it was writing, the subscriber
//! gets the newest state once. Memory per subscriber is its patterns, one
//! command line and a map of versions sent.
//!
//! A version-2 subscriber that answers each `MARK` before the next batch
//! is proven and waits on [`Feed::first`]; every other one waits on
//! [`Feed::then`] ([`super::tier`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::tls::Stream;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use valkyrie_protocol::index::wire::{ClientCommand, ServerMessage, parse_command};
use valkyrie_protocol::index::{
    IndexError, MAX_COMMAND_LINE, MAX_PATTERNS, PROTOCOL_VERSION, Pattern,
};

use super::limits::{Limits, Stats};
use super::publish::Published;
use super::tier::{Feed, Marks, Membership, Proven};

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
    /// The protocol version in use (`HELLO`).
    version: u32,
    /// The newest publication collected ([`Published::sequence`]).
    seen: u64,
    /// The token of the last `MARK` sent and not yet acknowledged.
    mark: Option<u64>,
    /// The one before it, if that is unacknowledged too.
    older: Option<u64>,
    marks: Marks,
    proven: Arc<Proven>,
    /// Held while the subscriber is proven.
    membership: Option<Membership>,
}

/// Serves one subscriber until it quits, disconnects, lags, or the
/// publisher stops (the daemon is shutting down); `permit` counts it
/// against [`Limits::max_subscribers`] and [`Limits::max_per_address`]
/// until then.
pub async fn run(
    stream: Stream,
    mut feed: Feed,
    greeting: Bytes,
    limits: Limits,
    stats: Arc<Stats>,
    permit: super::limits::Permits,
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
        version: 1,
        seen: 0,
        mark: None,
        older: None,
        marks: Marks::default(),
        proven: feed.proven.clone(),
        membership: None,
    };
    s.pushes.push(greeting);
    s.flush().await?;
    let mut input = BytesMut::new();
    // One timer for the heartbeat, moved only when it fires: resetting it
    // on every write would cost a timer update per push per subscriber.
    let heartbeat = tokio::time::sleep_until(s.last_write + s.limits.heartbeat);
    tokio::pin!(heartbeat);
    loop {
        // Whether this turn wrote a publication the proven tier owes.
        let mut owed = false;
        let watching = !s.patterns.is_empty();
        tokio::select! {
            r = reader.read_buf(&mut input) => {
                if r? == 0 {
                    return Ok(());
                }
                if !s.commands(&mut input, &mut feed)? {
                    s.flush().await?;
                    let _ = s.writer.shutdown().await;
                    return Ok(());
                }
                input.reserve(512);
            }
            r = feed.first.changed(), if watching && s.membership.is_some() => {
                if r.is_err() {
                    return Ok(());
                }
                let p = feed.first.borrow_and_update().clone();
                s.collect(&p);
                owed = s.membership.is_some();
            }
            r = feed.then.changed(), if watching && s.membership.is_none() => {
                if r.is_err() {
                    return Ok(());
                }
                let p = feed.then.borrow_and_update().clone();
                s.collect(&p);
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
        if owed {
            s.proven.wrote();
        }
    }
}

impl Subscriber {
    /// Handles every complete line in `input`; `false` when the connection
    /// must close after what has been queued.
    fn commands(&mut self, input: &mut BytesMut, feed: &mut Feed) -> Result<bool, ConnectionError> {
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
                    self.version = v.min(PROTOCOL_VERSION);
                    ServerMessage::Hello(self.version).encode(&mut self.out);
                }
                // No reply: an answer per batch would double the traffic.
                // A token other than the last mark's (an old one, a guess)
                // changes nothing.
                Ok(Some(ClientCommand::Ack(token))) => {
                    if self.older == Some(token) {
                        self.older = None;
                    } else if self.mark == Some(token) {
                        (self.mark, self.older) = (None, None);
                        if self.membership.is_none() {
                            self.membership = Some(self.proven.join());
                            // The first tier may be ahead of the other.
                            let p = feed.first.borrow_and_update().clone();
                            self.collect(&p);
                        }
                    }
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
                    let p = feed.first.borrow().clone();
                    self.collect(&p);
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
    /// `GONE` for sent groups that are no longer published; then, in
    /// version 2, a `MARK`. A publication older than one already collected
    /// (the other tier's, after a change of tier) is ignored.
    fn collect(&mut self, p: &Published) {
        if p.sequence < self.seen {
            return;
        }
        self.seen = p.sequence;
        // Replies queued so far go first.
        if !self.out.is_empty() {
            self.pushes.push(self.out.split().freeze());
        }
        let queued = self.pushes.len();
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
        let mut changed = self.pushes.len() > queued;
        for name in gone {
            self.sent.remove(&name);
            ServerMessage::Gone(name).encode(&mut self.out);
            changed = true;
        }
        if changed && self.version >= 2 {
            // Two marks unanswered when a third batch is due: the
            // subscriber has not shown it reads, so it waits with the rest.
            // One is allowed, as a reader's answer to the last batch may
            // still be on its way when a change follows at once.
            if self.older.is_some() {
                self.membership = None;
            }
            let token = self.marks.token();
            self.older = self.mark.replace(token);
            ServerMessage::Mark(token).encode(&mut self.out);
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
