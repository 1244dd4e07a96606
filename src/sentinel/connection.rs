//! One client connection: read requests with the request decoder (RESP
//! multibulk or inline, Valkey's limits and error texts), dispatch, write
//! replies. A malformed request gets Valkey's `-ERR Protocol error: …` and
//! the connection is closed, as Valkey does.

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use valkyrie_protocol::{DecodeError, Frame, Limits, Protocol, RequestDecoder, encode};

use tokio::sync::broadcast;

use super::cmd;
use crate::core::Event;
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
    /// Who may connect.
    pub security: std::sync::Arc<super::auth::Security>,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Clients connected to the Sentinel port (`INFO clients`).
pub static CONNECTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct Connected;

impl Connected {
    fn enter() -> Connected {
        CONNECTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Connected
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        CONNECTED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Serves one client until it disconnects.
pub async fn run(
    mut stream: TcpStream,
    handle: Handle,
    security: std::sync::Arc<super::auth::Security>,
) -> std::io::Result<()> {
    let _connected = Connected::enter();
    let _counted = crate::metrics::sentinel_connected();
    let _ = stream.set_nodelay(true);
    let open = security.open();
    // Before authentication, Valkey's caps: 10 arguments, 16 KiB bulks.
    let mut decoder = RequestDecoder::with_limits(if open {
        AUTHENTICATED
    } else {
        Limits::UNAUTHENTICATED
    });
    let mut session = Session {
        id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        user: open.then(|| "default".to_string()),
        security,
        protocol: Protocol::Resp2,
        name: None,
        channels: Default::default(),
        patterns: Default::default(),
    };
    // Buffers start empty and grow with use: an idle connection costs
    // little more than its task and socket.
    let mut buf = BytesMut::new();
    let mut out = BytesMut::new();
    // Events, only while subscribed. A subscriber that falls more than the
    // channel's capacity behind is disconnected, as Valkey does past its
    // pub/sub output-buffer limit: memory stays bounded.
    let mut events: Option<(broadcast::Receiver<Event>, crate::metrics::PubsubSubscriber)> = None;
    loop {
        loop {
            match decoder.parse(&buf) {
                Ok(Some(n)) => {
                    let args: Vec<Vec<u8>> =
                        decoder.argv(&buf).iter().map(<[u8]>::to_vec).collect();
                    let _ = buf.split_to(n);
                    if args.is_empty() {
                        continue;
                    }
                    let was_authenticated = session.user.is_some();
                    for reply in cmd::dispatch(&args, &mut session, &handle).await {
                        encode(&reply, session.protocol, &mut out);
                    }
                    if !was_authenticated && session.user.is_some() {
                        decoder.set_limits(AUTHENTICATED);
                    }
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
                    stream.write_all(&out).await?;
                    return Ok(());
                }
            }
        }
        let subscribed = !session.channels.is_empty() || !session.patterns.is_empty();
        match (&events, subscribed) {
            (None, true) => {
                events = Some((
                    handle.events.subscribe(),
                    crate::metrics::pubsub_subscribed(),
                ))
            }
            (Some(_), false) => events = None,
            _ => {}
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        let next = async {
            match events.as_mut() {
                Some((rx, _)) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            read = stream.read_buf(&mut buf) => {
                if read? == 0 {
                    return Ok(());
                }
            }
            event = next => match event {
                Ok(e) => {
                    for m in cmd::pubsub::deliver(&session, e.channel, &e.payload) {
                        encode(&m, session.protocol, &mut out);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    crate::metrics::pubsub_lagged();
                    return Ok(());
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
        }
    }
}
