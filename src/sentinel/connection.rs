//! One client connection: read requests with the request decoder (RESP
//! multibulk or inline, Valkey's limits and error texts), dispatch, write
//! replies. A malformed request gets Valkey's `-ERR Protocol error: …` and
//! the connection is closed, as Valkey does.
//!
//! Reading, writing and event delivery run in one select loop, so a client
//! that stops reading never blocks the loop: its pending output is bounded
//! (requests are not run past [`OUT_HIGH_WATER`]; a subscriber is closed
//! past its pub/sub output limit, counting only the events of its own
//! channels), and `CLIENT KILL` reaches it at once. A subscriber that reads
//! is never disconnected and gets every event of its channels, in order.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use bytes::{Buf, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::io::poll_read_buf;
use valkyrie_protocol::{DecodeError, Frame, Limits, Protocol, RequestDecoder, encode};

use super::clients::{Client, ClientState, Registry};
use super::cmd;
use crate::config::OutputLimit;
use crate::events::{Delivery, Subscriber};
use crate::runtime::Handle;

/// Request limits once a client is authenticated: generous for the
/// Sentinel command set, still bounded.
const AUTHENTICATED: Limits = Limits {
    max_frame: 1024 * 1024,
    max_bulk: 512 * 1024,
    max_aggregate: 1024,
    ..Limits::DEFAULT
};

/// Per-connection state the commands may change.
#[derive(Debug)]
pub struct Session {
    /// The protocol replies are encoded in.
    pub protocol: Protocol,
    /// `CLIENT ID`.
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Subscribed channels.
    pub channels: std::collections::BTreeSet<Vec<u8>>,
    /// Subscribed patterns.
    pub patterns: std::collections::BTreeSet<Vec<u8>>,
    /// Authenticated as this user (`None`: not yet).
    pub user: Option<String>,
    /// What every connection shares.
    pub shared: Arc<Shared>,
    /// This connection's registry entry.
    pub client: Arc<Client>,
    /// `CLIENT REPLY ON` (the default) or `OFF`.
    pub reply_on: bool,
    /// `CLIENT REPLY SKIP`: drop the next command's reply.
    pub skip_next: bool,
    /// The current command sends no reply (`CLIENT REPLY OFF|SKIP`).
    pub suppress: bool,
    /// Close once the replies so far are written (`CLIENT KILL` of
    /// oneself).
    pub close_after_reply: bool,
    /// Close now, without a reply (`SHUTDOWN`).
    pub close_now: bool,
    /// The last command was a failed login: the connection pauses for
    /// [`AUTH_FAILURE_DELAY`] before its reply.
    pub auth_failed: bool,
}

impl Session {
    /// Subscribed to a channel or pattern.
    pub fn subscribed(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty()
    }
}

/// What all connections of one Sentinel port share.
#[derive(Debug)]
pub struct Shared {
    /// Who may connect.
    pub security: Arc<super::auth::Security>,
    /// Connected clients.
    pub registry: Arc<Registry>,
    /// When a subscriber that does not read is disconnected.
    pub pubsub_limit: OutputLimit,
    /// `maxclients`.
    pub maxclients: usize,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Clients connected to the Sentinel port (`INFO clients`).
pub static CONNECTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Totals since start, for `INFO stats`.
#[derive(Debug, Default)]
pub struct Totals {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections refused past `maxclients`.
    pub rejected: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Bytes read.
    pub net_in: AtomicU64,
    /// Bytes written.
    pub net_out: AtomicU64,
    /// Subscribers closed past the pub/sub output limit.
    pub output_limit_disconnections: AtomicU64,
}

/// The Sentinel port's totals.
pub static TOTALS: Totals = Totals {
    connections: AtomicU64::new(0),
    rejected: AtomicU64::new(0),
    commands: AtomicU64::new(0),
    net_in: AtomicU64::new(0),
    net_out: AtomicU64::new(0),
    output_limit_disconnections: AtomicU64::new(0),
};

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Counts a client in [`CONNECTED`] while it lives: taken by the accept
/// loop before the connection's task starts, so a burst of connections
/// cannot all pass the `maxclients` check at once.
#[derive(Debug)]
pub struct Connected(());

impl Connected {
    /// Counts one more client.
    pub fn enter() -> Connected {
        CONNECTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Connected(())
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        CONNECTED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Past this much pending output, no more requests are read until the
/// client has taken its replies: a client that pipelines without reading
/// costs a bounded buffer, and the rest waits in the kernel.
const OUT_HIGH_WATER: usize = 64 * 1024;

/// After a failed login the connection neither reads, runs nor writes
/// anything for this long (its `-WRONGPASS` included): a brute force gets
/// one guess per connection per pause, however deeply it pipelines.
/// (A Valkey 8.0.1 sentinel checks every guess of a pipeline, and only
/// leaves the failures after the first one unanswered.)
pub const AUTH_FAILURE_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// While replies wait, the connection still reads (without running
/// anything) up to this much unparsed input, so that a client that went
/// away is seen at once: its connection is closed and its pending output
/// dropped, instead of lingering in CLOSE-WAIT until the limit.
const READ_WHILE_BLOCKED: usize = 64 * 1024;

/// Events moved from a subscriber's queue to its output per wake-up; the
/// rest follow on the next turn of the loop, after a write.
const EVENT_BATCH: usize = 256;

/// Closes with a reset: what the kernel still holds for this socket is
/// dropped at once (a subscriber closed at its output limit, or one that
/// went away, would otherwise keep megabytes queued in the kernel until
/// its TCP timers give up).
fn discard(wr: &tokio::net::tcp::WriteHalf<'_>) {
    let _ = socket2::SockRef::from(wr.as_ref()).set_linger(Some(std::time::Duration::ZERO));
}

/// How much one read takes at most: as Valkey's 16 KiB query buffer, so a
/// pipelined batch arrives in one system call, not in 64-byte pieces.
const READ_CHUNK: usize = 16 * 1024;

/// Writes `container|sub` for commands with subcommands, else the name,
/// as `CLIENT LIST` shows it, into `cmd` (reusing its allocation: this
/// runs for every request).
fn set_full_name(cmd: &mut String, args: &[&[u8]]) {
    cmd.clear();
    let name = cmd::Lower::new(args[0]);
    cmd.push_str(name.as_str());
    if let ("sentinel" | "client" | "command" | "acl", Some(sub)) = (name.as_str(), args.get(1)) {
        cmd.push('|');
        cmd.push_str(cmd::Lower::new(sub).as_str());
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

/// Serves one client until it disconnects.
pub async fn run(
    mut stream: TcpStream,
    handle: Handle,
    shared: Arc<Shared>,
    connected: Connected,
) -> std::io::Result<()> {
    let _connected = connected;
    add(&TOTALS.connections, 1);
    let _counted = crate::metrics::sentinel_connected();
    let _ = stream.set_nodelay(true);
    let addr = stream.peer_addr()?;
    let laddr = stream.local_addr()?;
    let open = shared.security.open();
    let client = Arc::new(Client {
        id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        addr,
        laddr,
        fd: stream.as_raw_fd(),
        created: Instant::now(),
        state: Mutex::new(ClientState {
            resp: 2,
            user: open.then(|| "default".to_string()),
            ..ClientState::default()
        }),
        kill: Notify::new(),
    });
    let _registered = shared.registry.enter(client.clone());
    // Before authentication, Valkey's caps: 10 arguments, 16 KiB bulks.
    let mut decoder = RequestDecoder::with_limits(if open {
        AUTHENTICATED
    } else {
        Limits::UNAUTHENTICATED
    });
    let mut session = Session {
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
    let (mut rd, mut wr) = stream.split();
    // Buffers start empty and grow with use: an idle connection costs
    // little more than its task and socket.
    let mut buf = BytesMut::new();
    let mut out = BytesMut::new();
    let mut net_in: u64 = 0;
    let mut net_out: u64 = 0;
    let mut cmds: u64 = 0;
    let mut soft_since = None;
    let mut closing = false;
    // Until when the connection pauses after a failed login.
    let mut penalty: Option<Instant> = None;
    // After a pause, the reply it held goes out before the next request
    // runs.
    let mut flush_first = false;
    // Events, only while subscribed: the events of its channels and
    // patterns, every one, in order (`crate::events`). The only reason a
    // subscriber is disconnected is its pending output — queued events
    // plus unwritten bytes, of what it subscribed to — passing the pub/sub
    // limit, as in Valkey. Memory stays bounded by that limit.
    let mut events: Option<(Subscriber, crate::metrics::PubsubSubscriber)> = None;
    loop {
        let mut ran = false;
        if flush_first && out.is_empty() {
            flush_first = false;
        }
        while !closing && out.len() < OUT_HIGH_WATER && penalty.is_none() && !flush_first {
            match decoder.parse(&buf) {
                Ok(Some(n)) => {
                    // Arguments borrowed from the read buffer (no copy);
                    // the request is dropped from it once answered.
                    let args: Vec<&[u8]> = decoder.argv(&buf).iter().collect();
                    if args.is_empty() {
                        buf.advance(n);
                        continue;
                    }
                    ran = true;
                    {
                        let mut st = client.state();
                        set_full_name(&mut st.cmd, &args);
                        st.last = Some(Instant::now());
                        st.net_in = net_in;
                        st.net_out = net_out;
                        st.cmds = cmds;
                        st.qbuf = buf.len() - n;
                        st.rbs = buf.capacity();
                        st.omem = out.len();
                    }
                    let was_authenticated = session.user.is_some();
                    let skip = std::mem::take(&mut session.skip_next);
                    let replies = cmd::dispatch(&args, &mut session, &handle).await;
                    drop(args);
                    buf.advance(n);
                    cmds += 1;
                    add(&TOTALS.commands, 1);
                    if session.close_now {
                        return Ok(());
                    }
                    if !skip && !session.suppress && session.reply_on {
                        for reply in replies {
                            encode(&reply, session.protocol, &mut out);
                        }
                    }
                    session.suppress = false;
                    if std::mem::take(&mut session.auth_failed) {
                        penalty = Some(Instant::now() + AUTH_FAILURE_DELAY);
                    }
                    if !was_authenticated && session.user.is_some() {
                        decoder.set_limits(AUTHENTICATED);
                    }
                    closing = session.close_after_reply;
                }
                Ok(None) => break,
                Err(e) => {
                    crate::metrics::parse_error(crate::metrics::Listener::Sentinel, &e);
                    // Valkey's own texts for the pre-authentication caps.
                    let text = match (&e, session.user.is_none()) {
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
                        session.protocol,
                        &mut out,
                    );
                    closing = true;
                }
            }
        }
        if buf.is_empty() && buf.capacity() > 0 {
            // Everything read was handled: give the read buffer back.
            buf = BytesMut::new();
        }
        if ran {
            let mut st = client.state();
            st.name.clone_from(&session.name);
            st.user.clone_from(&session.user);
            st.resp = match session.protocol {
                Protocol::Resp2 => 2,
                Protocol::Resp3 => 3,
            };
            st.sub = session.channels.len();
            st.psub = session.patterns.len();
            st.cmds = cmds;
        }
        let subscribed = session.subscribed();
        match (&events, subscribed) {
            (None, true) => {
                let sub = handle.events.subscriber(shared.pubsub_limit.hard);
                sub.set_filter(&session.channels, &session.patterns);
                events = Some((sub, crate::metrics::pubsub_subscribed()));
            }
            (Some((sub, _)), true) if ran => sub.set_filter(&session.channels, &session.patterns),
            (Some(_), false) => events = None,
            _ => {}
        }
        let (queued, overflowed) = events
            .as_ref()
            .map_or((0, false), |(s, _)| (s.queued(), s.overflowed()));
        if subscribed
            && (overflowed || over_limit(&shared.pubsub_limit, out.len() + queued, &mut soft_since))
        {
            tracing::warn!(
                client = client.id,
                %addr,
                pending = out.len() + queued,
                "subscriber closed for overcoming the pub/sub output buffer limit"
            );
            add(&TOTALS.output_limit_disconnections, 1);
            discard(&wr);
            return Ok(());
        }
        if closing && out.is_empty() {
            return Ok(());
        }
        let next = async {
            match events.as_mut() {
                Some((sub, _)) => sub.next().await,
                None => std::future::pending().await,
            }
        };
        let may_read = !closing
            && penalty.is_none()
            && (out.len() < OUT_HIGH_WATER || buf.len() < READ_WHILE_BLOCKED);
        let paused_until = penalty.unwrap_or_else(Instant::now);
        tokio::select! {
            _ = client.kill.notified() => return Ok(()),
            _ = tokio::time::sleep_until(paused_until), if penalty.is_some() => {
                penalty = None;
                flush_first = true;
            }
            written = wr.write(&out), if !out.is_empty() && penalty.is_none() => {
                let n = written?;
                out.advance(n);
                net_out += n as u64;
                add(&TOTALS.net_out, n as u64);
                if out.is_empty() {
                    out.clear();
                }
                if subscribed {
                    client.state().omem = out.len();
                }
            }
            ready = rd.readable(), if may_read => {
                ready?;
                // Room for a whole pipelined batch, taken only once data
                // is there: an idle connection holds no read buffer. One
                // poll of the read, through tokio's `poll_read`: a short
                // read tells it the socket is drained, which saves the
                // next wait a system call that would only say "nothing".
                buf.reserve(READ_CHUNK);
                let polled = std::future::poll_fn(|cx| {
                    Poll::Ready(poll_read_buf(Pin::new(&mut rd), cx, &mut buf))
                })
                .await;
                match polled {
                    Poll::Ready(Ok(0)) => {
                        if !out.is_empty() {
                            discard(&wr);
                        }
                        return Ok(());
                    }
                    Poll::Ready(Ok(n)) => {
                        net_in += n as u64;
                        add(&TOTALS.net_in, n as u64);
                    }
                    Poll::Ready(Err(e)) => return Err(e),
                    Poll::Pending => {}
                }
            }
            delivery = next => match delivery {
                Delivery::Event(e) => {
                    for m in cmd::pubsub::deliver(&session, e.channel, &e.payload) {
                        encode(&m, session.protocol, &mut out);
                    }
                    // What else is queued now, in order, a batch at a time.
                    if let Some((sub, _)) = events.as_mut() {
                        for _ in 1..EVENT_BATCH {
                            let Some(e) = sub.try_next() else { break };
                            for m in cmd::pubsub::deliver(&session, e.channel, &e.payload) {
                                encode(&m, session.protocol, &mut out);
                            }
                        }
                    }
                    // What CLIENT LIST shows of a subscriber that may
                    // never send a command again.
                    let mut st = client.state();
                    st.omem = out.len();
                    st.net_out = net_out;
                }
                // Checked at the top of the loop.
                Delivery::Overflowed => {}
            },
        }
    }
}
