//! One connection's loop, step by step: [`Connection::dispatch`] runs the
//! requests read so far, [`Connection::publish`] copies what `CLIENT LIST`
//! shows into the registry, [`Connection::follow_events`] keeps its event
//! subscription in step with its channels and enforces the pub/sub output
//! limit, [`Connection::wait`] waits for the first of `CLIENT KILL`, the
//! end of a login pause, the socket (to write or read) and an event, and
//! [`Connection::close`] ends it.

use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use bytes::{Buf, BytesMut};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::io::poll_read_buf;
use valkyrie_protocol::{DecodeError, Frame, Limits, Protocol, RequestDecoder, encode};

use super::super::clients::{Client, ClientState, Registered};
use super::super::cmd;
use super::session::{AUTH_FAILURE_DELAY, AUTHENTICATED, Session, Shared, Totals};
use crate::config::OutputLimit;
use crate::events::{Delivery, Subscriber};
use crate::runtime::Handle;
use crate::tls::Stream;
use crate::tls::stream::{ReadHalf, WriteHalf};

/// Past this much pending output, no more requests are read until the
/// client has taken its replies: a client that pipelines without reading
/// costs a bounded buffer, and the rest waits in the kernel.
const OUT_HIGH_WATER: usize = 64 * 1024;

/// While replies wait, the connection still reads (without running
/// anything) up to this much unparsed input, so that a client that went
/// away is seen at once: its connection is closed and its pending output
/// dropped, instead of lingering in CLOSE-WAIT until the limit.
const READ_WHILE_BLOCKED: usize = 64 * 1024;

/// Events moved from a subscriber's queue to its output per wake-up; the
/// rest follow on the next turn of the loop, after a write.
const EVENT_BATCH: usize = 256;

/// How much one read takes at most: as Valkey's 16 KiB query buffer, so a
/// pipelined batch arrives in one system call, not in 64-byte pieces.
const READ_CHUNK: usize = 16 * 1024;

/// Requests of up to this many arguments list them on the stack (every
/// Sentinel command a client sends in normal operation has fewer).
const SHORT_ARGS: usize = 8;

/// What the loop does after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Goes on.
    Continue,
    /// Closes the socket.
    Close,
    /// Closes with a reset: what the kernel still holds for the socket is
    /// dropped at once (a subscriber closed at its output limit, or one
    /// that went away, would otherwise keep megabytes queued in the kernel
    /// until its TCP timers give up).
    Reset,
}

/// One client connection and everything its loop keeps.
pub(super) struct Connection<'s> {
    handle: Handle,
    shared: Arc<Shared>,
    client: Arc<Client>,
    session: Session,
    decoder: RequestDecoder,
    rd: ReadHalf<'s>,
    wr: WriteHalf<'s>,
    /// Read, not yet handled. Buffers start empty and grow with use: an
    /// idle connection costs little more than its task and socket.
    buf: BytesMut,
    /// Replies and events not yet written.
    out: BytesMut,
    net_in: u64,
    net_out: u64,
    cmds: u64,
    /// Since when a subscriber's output is over the soft limit.
    soft_since: Option<Instant>,
    /// Closes once `out` is written.
    closing: bool,
    /// Until when the connection pauses after a failed login.
    penalty: Option<Instant>,
    /// After a pause, the reply it held goes out before the next request
    /// runs.
    flush_first: bool,
    /// Events, only while subscribed: the events of its channels and
    /// patterns, every one, in order (`crate::events`). The only reason a
    /// subscriber is disconnected is its pending output — queued events
    /// plus unwritten bytes, of what it subscribed to — passing the
    /// pub/sub limit, as in Valkey. Memory stays bounded by that limit.
    events: Option<(Subscriber, crate::metrics::PubsubSubscriber)>,
    /// The command being run, as [`cmd::full_name`] writes it (its
    /// allocation reused from one request to the next).
    full_name: String,
    /// Counts the commands run, by name.
    commands: CommandCounter,
    /// Listed in the registry while it lives.
    _registered: Registered,
}

/// `valkyrie_sentinel_commands_total`, with the handle of the last
/// command's series kept: a connection mostly repeats one command, and
/// looking the series up in the recorder for every request (building its
/// key, hashing it) cost more than the command itself.
#[derive(Default)]
struct CommandCounter {
    last: Option<(&'static str, metrics::Counter)>,
}

impl CommandCounter {
    /// Counts one `full_name` (`name` or `name|sub`).
    fn count(&mut self, full_name: &str) {
        let name = full_name.split('|').next().unwrap_or_default();
        match &self.last {
            Some((label, counter)) if *label == name => counter.increment(1),
            _ => {
                let label = crate::sentinel::commands::label(name.as_bytes());
                let counter =
                    metrics::counter!(crate::metrics::SENTINEL_COMMANDS, "command" => label);
                counter.increment(1);
                self.last = Some((label, counter));
            }
        }
    }
}

impl<'s> Connection<'s> {
    /// Registers the client of `stream`, with a fresh id of this daemon.
    pub(super) fn new(
        stream: &'s mut Stream,
        handle: Handle,
        shared: Arc<Shared>,
    ) -> std::io::Result<Connection<'s>> {
        let addr = stream.tcp().peer_addr()?;
        let laddr = stream.tcp().local_addr()?;
        let open = shared.security.open();
        let client = Arc::new(Client {
            id: shared.next_id(),
            addr,
            laddr,
            fd: stream.tcp().as_raw_fd(),
            created: Instant::now(),
            state: Mutex::new(ClientState {
                resp: 2,
                user: open.then(|| "default".to_string()),
                ..ClientState::default()
            }),
            kill: Notify::new(),
        });
        let registered = shared.registry.enter(client.clone());
        // Before authentication, Valkey's caps: 10 arguments, 16 KiB bulks.
        let decoder = RequestDecoder::with_limits(if open {
            AUTHENTICATED
        } else {
            Limits::UNAUTHENTICATED
        });
        let session = Session {
            id: client.id,
            user: open.then(|| "default".to_string()),
            shared: shared.clone(),
            client: client.clone(),
            protocol: Protocol::Resp2,
            name: None,
            channels: Default::default(),
            patterns: Default::default(),
            reply_on: true,
            skip_next: false,
            suppress: false,
            close_after_reply: false,
            close_now: false,
            auth_failed: false,
        };
        let (rd, wr) = stream.split();
        Ok(Connection {
            handle,
            shared,
            client,
            session,
            decoder,
            rd,
            wr,
            buf: BytesMut::new(),
            out: BytesMut::new(),
            net_in: 0,
            net_out: 0,
            cmds: 0,
            soft_since: None,
            closing: false,
            penalty: None,
            flush_first: false,
            events: None,
            full_name: String::new(),
            commands: CommandCounter::default(),
            _registered: registered,
        })
    }

    /// Serves the client until it disconnects or is closed.
    pub(super) async fn serve(mut self) -> std::io::Result<()> {
        loop {
            if self.flush_first && self.out.is_empty() {
                self.flush_first = false;
            }
            let Some(ran) = self.dispatch().await else {
                return Ok(());
            };
            if ran {
                self.publish();
            }
            let wrote = self.write_now().await?;
            let next = match self.follow_events(ran) {
                Next::Continue if self.closing && self.out.is_empty() && !self.wr.unflushed() => {
                    Next::Close
                }
                // Requests held back (by the output limit, or behind the
                // reply a login pause held) may run now that output went
                // out: no waiting for the socket, which may stay silent.
                Next::Continue if wrote && !self.buf.is_empty() => Next::Continue,
                Next::Continue => self.wait().await?,
                end => end,
            };
            if next != Next::Continue {
                self.close(next);
                return Ok(());
            }
        }
    }

    /// Runs the complete requests read so far, while output may grow and
    /// no login pause holds the connection. `Some(true)` when a command
    /// ran; `None` when one closes the connection at once (`SHUTDOWN`).
    async fn dispatch(&mut self) -> Option<bool> {
        let mut ran = false;
        let mut batch_start = None;
        while !self.closing
            && self.out.len() < OUT_HIGH_WATER
            && self.penalty.is_none()
            && !self.flush_first
        {
            match self.decoder.parse(&self.buf) {
                Ok(Some(n)) => {
                    // Arguments borrowed from the read buffer (no copy);
                    // the request is dropped from it once answered. Their
                    // list lives on the stack unless the request is long.
                    let argv = self.decoder.argv(&self.buf);
                    let mut short: [&[u8]; SHORT_ARGS] = [&[]; SHORT_ARGS];
                    let long: Vec<&[u8]>;
                    let args: &[&[u8]] = if argv.len() <= SHORT_ARGS {
                        for (slot, arg) in short.iter_mut().zip(argv.iter()) {
                            *slot = arg;
                        }
                        &short[..argv.len()]
                    } else {
                        long = argv.iter().collect();
                        &long
                    };
                    if args.is_empty() {
                        self.buf.advance(n);
                        continue;
                    }
                    ran = true;
                    cmd::full_name(&mut self.full_name, args);
                    self.commands.count(&self.full_name);
                    // One clock read per batch read: what `CLIENT LIST`
                    // shows as idle counts in seconds.
                    let now = *batch_start.get_or_insert_with(Instant::now);
                    {
                        let mut st = self.client.state();
                        st.cmd.clone_from(&self.full_name);
                        st.last = Some(now);
                        st.net_in = self.net_in;
                        st.net_out = self.net_out;
                        st.cmds = self.cmds;
                        st.qbuf = self.buf.len() - n;
                        st.rbs = self.buf.capacity();
                        st.omem = self.out.len();
                    }
                    let was_authenticated = self.session.user.is_some();
                    let skip = std::mem::take(&mut self.session.skip_next);
                    let replies =
                        cmd::dispatch(args, &self.full_name, &mut self.session, &self.handle).await;
                    self.buf.advance(n);
                    self.cmds += 1;
                    Totals::add(&self.shared.totals.commands, 1);
                    if self.session.close_now {
                        return None;
                    }
                    self.reply(replies, skip);
                    if !was_authenticated && self.session.user.is_some() {
                        self.decoder.set_limits(AUTHENTICATED);
                    }
                    self.closing = self.session.close_after_reply;
                }
                Ok(None) => break,
                Err(e) => {
                    self.protocol_error(&e);
                    self.closing = true;
                }
            }
        }
        if self.buf.is_empty() && self.buf.capacity() > 0 {
            // Everything read was handled: give the read buffer back.
            self.buf = BytesMut::new();
        }
        Some(ran)
    }

    /// Queues a command's replies (unless `CLIENT REPLY` drops them) and
    /// starts the pause after a failed login.
    fn reply(&mut self, replies: Vec<Frame>, skip: bool) {
        let session = &mut self.session;
        if !skip && !session.suppress && session.reply_on {
            for reply in replies {
                encode(&reply, session.protocol, &mut self.out);
            }
        }
        session.suppress = false;
        if std::mem::take(&mut session.auth_failed) {
            self.penalty = Some(Instant::now() + AUTH_FAILURE_DELAY);
        }
    }

    /// Queues Valkey's `-ERR Protocol error: …` for a malformed request.
    fn protocol_error(&mut self, e: &DecodeError) {
        crate::metrics::parse_error(crate::metrics::Listener::Sentinel, e);
        // Valkey's own texts for the pre-authentication caps.
        let text = match (e, self.session.user.is_none()) {
            (DecodeError::AggregateTooLong { .. }, true) => {
                "Protocol error: unauthenticated multibulk length".to_string()
            }
            (DecodeError::BulkTooLong { .. }, true) => {
                "Protocol error: unauthenticated bulk length".to_string()
            }
            _ => e.to_string(),
        };
        encode(
            &Frame::error(format!("ERR {text}")),
            self.session.protocol,
            &mut self.out,
        );
    }

    /// Copies what the commands changed into the registry entry.
    fn publish(&self) {
        let mut st = self.client.state();
        st.name.clone_from(&self.session.name);
        st.user.clone_from(&self.session.user);
        st.resp = match self.session.protocol {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        };
        st.sub = self.session.channels.len();
        st.psub = self.session.patterns.len();
        st.cmds = self.cmds;
    }

    /// Subscribes to events, follows the channels (after commands ran) or
    /// unsubscribes; a subscriber past its output limit is closed with a
    /// reset.
    fn follow_events(&mut self, ran: bool) -> Next {
        let subscribed = self.session.subscribed();
        match (&self.events, subscribed) {
            (None, true) => {
                let sub = self.handle.events.subscriber(self.shared.pubsub_limit.hard);
                sub.set_filter(&self.session.channels, &self.session.patterns);
                self.events = Some((sub, crate::metrics::pubsub_subscribed()));
            }
            (Some((sub, _)), true) if ran => {
                sub.set_filter(&self.session.channels, &self.session.patterns);
            }
            (Some(_), false) => self.events = None,
            _ => {}
        }
        let (queued, overflowed) = self
            .events
            .as_ref()
            .map_or((0, false), |(s, _)| (s.queued(), s.overflowed()));
        let pending = self.out.len() + queued;
        if subscribed
            && (overflowed || over_limit(&self.shared.pubsub_limit, pending, &mut self.soft_since))
        {
            tracing::warn!(
                client = self.client.id,
                addr = %self.client.addr,
                pending,
                "subscriber closed for overcoming the pub/sub output buffer limit"
            );
            Totals::add(&self.shared.totals.output_limit_disconnections, 1);
            return Next::Reset;
        }
        Next::Continue
    }

    /// Waits for the first of: `CLIENT KILL`, the end of a login pause,
    /// room to write, input, an event.
    async fn wait(&mut self) -> std::io::Result<Next> {
        let subscribed = self.session.subscribed();
        let may_read = !self.closing
            && self.penalty.is_none()
            && (self.out.len() < OUT_HIGH_WATER || self.buf.len() < READ_WHILE_BLOCKED);
        let may_write = (!self.out.is_empty() || self.wr.unflushed()) && self.penalty.is_none();
        // A timer only while paused: most waits have none, and building
        // one costs a clock read and a runtime lookup every time.
        let penalty = self.penalty;
        let pause_end = async move {
            match penalty {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        let events = &mut self.events;
        let event = async move {
            match events.as_mut() {
                Some((sub, _)) => sub.next().await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            _ = self.client.kill.notified() => Next::Close,
            () = pause_end => {
                self.penalty = None;
                self.flush_first = true;
                Next::Continue
            }
            written = self.wr.write_some(&self.out), if may_write => {
                self.wrote(written?, subscribed);
                Next::Continue
            }
            ready = self.rd.readable(), if may_read => {
                ready?;
                self.read().await?
            }
            delivery = event => {
                self.deliver(delivery);
                Next::Continue
            }
        };
        Ok(next)
    }

    /// Writes the pending output at once if the socket takes it (it
    /// nearly always does): a request answered right away then costs the
    /// loop one wait, for the next request, instead of a second one just
    /// to learn that the socket is writable. Whether it wrote anything.
    async fn write_now(&mut self) -> std::io::Result<bool> {
        if (self.out.is_empty() && !self.wr.unflushed()) || self.penalty.is_some() {
            return Ok(false);
        }
        let subscribed = self.session.subscribed();
        let polled = {
            let mut write = std::pin::pin!(self.wr.write_some(&self.out));
            std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await
        };
        match polled {
            Poll::Ready(written) => {
                let n = written?;
                self.wrote(n, subscribed);
                Ok(n > 0)
            }
            Poll::Pending => Ok(false),
        }
    }

    /// Accounts for `n` bytes written.
    fn wrote(&mut self, n: usize, subscribed: bool) {
        self.out.advance(n);
        self.net_out += n as u64;
        Totals::add(&self.shared.totals.net_out, n as u64);
        if self.out.is_empty() {
            self.out.clear();
        }
        if subscribed {
            self.client.state().omem = self.out.len();
        }
    }

    /// Reads what the socket has: the end of input closes the connection
    /// (with a reset if replies are still pending).
    async fn read(&mut self) -> std::io::Result<Next> {
        // Room for a whole pipelined batch, taken only once data is
        // there: an idle connection holds no read buffer. One poll of the
        // read, through tokio's `poll_read`: a short read tells it the
        // socket is drained, which saves the next wait a system call that
        // would only say "nothing".
        self.buf.reserve(READ_CHUNK);
        let (rd, buf) = (&mut self.rd, &mut self.buf);
        let polled =
            std::future::poll_fn(|cx| Poll::Ready(poll_read_buf(Pin::new(&mut *rd), cx, buf)))
                .await;
        match polled {
            Poll::Ready(Ok(0)) if self.out.is_empty() => Ok(Next::Close),
            Poll::Ready(Ok(0)) => Ok(Next::Reset),
            Poll::Ready(Ok(n)) => {
                self.net_in += n as u64;
                Totals::add(&self.shared.totals.net_in, n as u64);
                Ok(Next::Continue)
            }
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Ok(Next::Continue),
        }
    }

    /// Queues an event and what else is queued now, in order, a batch at
    /// a time.
    fn deliver(&mut self, delivery: Delivery) {
        let Delivery::Event(e) = delivery else {
            // Overflowed: checked at the top of the loop.
            return;
        };
        for m in cmd::pubsub::deliver(&self.session, e.channel, &e.payload) {
            encode(&m, self.session.protocol, &mut self.out);
        }
        if let Some((sub, _)) = self.events.as_mut() {
            for _ in 1..EVENT_BATCH {
                let Some(e) = sub.try_next() else { break };
                for m in cmd::pubsub::deliver(&self.session, e.channel, &e.payload) {
                    encode(&m, self.session.protocol, &mut self.out);
                }
            }
        }
        // What CLIENT LIST shows of a subscriber that may never send a
        // command again.
        let mut st = self.client.state();
        st.omem = self.out.len();
        st.net_out = self.net_out;
    }

    /// Ends the connection; the socket closes when its owner drops it.
    fn close(self, how: Next) {
        if how == Next::Reset {
            crate::tls::stream::reset(self.rd, self.wr);
        }
    }
}

/// Whether a subscriber's pending output is past the limit: over `hard`,
/// or over `soft` for `soft_secs` (as Valkey's pub/sub output limit).
fn over_limit(limit: &OutputLimit, pending: usize, soft_since: &mut Option<Instant>) -> bool {
    let pending = pending as u64;
    if limit.hard > 0 && pending > limit.hard {
        return true;
    }
    if limit.soft > 0 && pending > limit.soft {
        let since = *soft_since.get_or_insert_with(Instant::now);
        return since.elapsed().as_secs() >= limit.soft_secs;
    }
    *soft_since = None;
    false
}
