//! One client connection: read requests with the request decoder (RESP
//! multibulk or inline, Valkey's limits and error texts), dispatch, write
//! replies. A malformed request gets Valkey's `-ERR Protocol error: …` and
//! the connection is closed, as Valkey does.

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use valkyrie_protocol::{Frame, Limits, Protocol, RequestDecoder, encode};

use tokio::sync::broadcast;

use super::cmd;
use crate::core::Event;
use crate::runtime::Handle;

/// Per-connection state the commands may change.
#[derive(Debug, Default)]
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
pub async fn run(mut stream: TcpStream, handle: Handle) -> std::io::Result<()> {
    let _connected = Connected::enter();
    let _ = stream.set_nodelay(true);
    let mut decoder = RequestDecoder::with_limits(Limits {
        max_frame: 1024 * 1024,
        max_bulk: 512 * 1024,
        max_aggregate: 1024,
        ..Limits::DEFAULT
    });
    let mut session = Session {
        id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        ..Session::default()
    };
    let mut buf = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    // Events, only while subscribed. A subscriber that falls more than the
    // channel's capacity behind is disconnected, as Valkey does past its
    // pub/sub output-buffer limit: memory stays bounded.
    let mut events: Option<broadcast::Receiver<Event>> = None;
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
                    for reply in cmd::dispatch(&args, &mut session, &handle).await {
                        encode(&reply, session.protocol, &mut out);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    encode(
                        &Frame::error(format!("ERR {e}")),
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
            (None, true) => events = Some(handle.events.subscribe()),
            (Some(_), false) => events = None,
            _ => {}
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        let next = async {
            match events.as_mut() {
                Some(rx) => rx.recv().await,
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
                Err(broadcast::error::RecvError::Lagged(_)) => return Ok(()),
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
        }
    }
}
