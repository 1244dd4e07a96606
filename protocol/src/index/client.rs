//! An async client of the index protocol: connect (greeting and version
//! negotiation), watch groups, and receive snapshots as they are pushed.
//!
//! [`IndexClient::connect`] dials plain TCP. [`IndexClient::over`] speaks
//! the protocol over a stream the caller connected, such as a TLS session
//! (`valkyrie watch --tls` runs rustls's handshake first), so this crate
//! needs no TLS of its own.
//!
//! The client speaks version 2: it answers each `MARK` with `ACK` as soon
//! as it has read the pushes before it, which puts it among the
//! subscribers the server serves first (`docs/index-protocol.md`, *Slow
//! consumers*).

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::time::{Instant, Sleep};

use super::wire::{ClientCommand, ServerDecoder, ServerMessage, escape};
use super::{Greeting, GroupSnapshot, IndexError, PROTOCOL_VERSION, Pattern};

/// Errors of an index-protocol connection.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent something that is not the index protocol.
    #[error("protocol error: {0}")]
    Protocol(#[from] IndexError),
    /// The server answered `ERR`.
    #[error("server error ({code}): {message}")]
    Server {
        /// The error code.
        code: String,
        /// Its text.
        message: String,
    },
    /// A reply other than the one the request calls for.
    #[error("unexpected reply: {0}")]
    Unexpected(String),
    /// The server closed the connection.
    #[error("connection closed by the server")]
    Closed,
    /// Nothing arrived for three heartbeat periods.
    #[error("no data from the server for {0:?}")]
    Silent(Duration),
}

/// A pushed change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// A group's full state.
    Snapshot(GroupSnapshot),
    /// The group is no longer monitored.
    Gone(String),
}

/// One connection to an index server, over plain TCP unless it was made
/// with [`over`](IndexClient::over) on another stream.
#[derive(Debug)]
pub struct IndexClient<S = TcpStream> {
    stream: S,
    buf: BytesMut,
    decoder: ServerDecoder,
    greeting: Greeting,
    version: u32,
    /// Pushes that arrived while a reply was awaited.
    pending: VecDeque<Update>,
    /// When bytes last arrived.
    last_rx: Instant,
    /// Fires when the server may have gone silent; moved only when it
    /// fires, so receiving costs no timer update.
    alarm: Pin<Box<Sleep>>,
}

impl IndexClient {
    /// Connects over TCP, reads the greeting and negotiates the protocol
    /// version.
    pub async fn connect(addr: impl ToSocketAddrs) -> Result<IndexClient, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        IndexClient::over(stream).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> IndexClient<S> {
    /// Reads the greeting and negotiates the protocol version over
    /// `stream`, already connected (and, for TLS, wrapped) by the caller.
    pub async fn over(stream: S) -> Result<IndexClient<S>, ClientError> {
        let mut c = IndexClient {
            stream,
            buf: BytesMut::with_capacity(4096),
            decoder: ServerDecoder::new(),
            greeting: Greeting {
                version: 0,
                server: String::new(),
                run: String::new(),
                heartbeat_ms: 0,
            },
            version: 0,
            pending: VecDeque::new(),
            last_rx: Instant::now(),
            alarm: Box::pin(tokio::time::sleep(Duration::ZERO)),
        };
        c.greeting = match c.read().await? {
            ServerMessage::Greeting(g) => g,
            other => return Err(unexpected(other)),
        };
        c.send(&ClientCommand::Hello(PROTOCOL_VERSION)).await?;
        c.version = match c.reply().await? {
            ServerMessage::Hello(v) => v,
            other => return Err(unexpected(other)),
        };
        let due = c.last_rx + c.silence();
        c.alarm.as_mut().reset(due);
        Ok(c)
    }

    /// The server's greeting.
    pub fn greeting(&self) -> &Greeting {
        &self.greeting
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Watches groups named by `patterns` (`*` and `?` are wildcards);
    /// returns how many patterns the connection now watches. Snapshots of
    /// the matching groups follow, read with [`next`](Self::next).
    pub async fn watch(&mut self, patterns: &[&str]) -> Result<usize, ClientError> {
        let compiled = patterns
            .iter()
            .map(|p| {
                let mut wire = BytesMut::new();
                escape(p, &mut wire);
                Pattern::parse(&wire)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.send(&ClientCommand::Watch(compiled)).await?;
        match self.reply().await? {
            ServerMessage::Watching(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    /// Round trip: `PING` answered by `PONG`.
    pub async fn ping(&mut self) -> Result<(), ClientError> {
        self.send(&ClientCommand::Ping(None)).await?;
        match self.reply().await? {
            ServerMessage::Pong(_) => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// The next pushed change. Fails with [`ClientError::Silent`] when the
    /// server sends nothing (not even a heartbeat) for three heartbeat
    /// periods.
    pub async fn next(&mut self) -> Result<Update, ClientError> {
        if let Some(u) = self.pending.pop_front() {
            return Ok(u);
        }
        loop {
            match self.read_watched().await? {
                ServerMessage::Snapshot(s) => return Ok(Update::Snapshot(s)),
                ServerMessage::Gone(g) => return Ok(Update::Gone(g)),
                ServerMessage::Heartbeat | ServerMessage::Pong(_) => {}
                ServerMessage::Mark(token) => self.send(&ClientCommand::Ack(token)).await?,
                ServerMessage::Bye => return Err(ClientError::Closed),
                other => return Err(unexpected(other)),
            }
        }
    }

    /// Three heartbeat periods (at least three seconds).
    fn silence(&self) -> Duration {
        Duration::from_millis(self.greeting.heartbeat_ms.max(1000).saturating_mul(3))
    }

    /// [`read`](Self::read), failing when nothing arrives for
    /// [`silence`](Self::silence).
    async fn read_watched(&mut self) -> Result<ServerMessage, ClientError> {
        let silence = self.silence();
        loop {
            if let Some(m) = self.decode()? {
                return Ok(m);
            }
            self.buf.reserve(4096);
            tokio::select! {
                r = self.stream.read_buf(&mut self.buf) => {
                    if r? == 0 {
                        return Err(ClientError::Closed);
                    }
                    self.last_rx = Instant::now();
                }
                _ = &mut self.alarm => {
                    let due = self.last_rx + silence;
                    if due <= Instant::now() {
                        return Err(ClientError::Silent(silence));
                    }
                    self.alarm.as_mut().reset(due);
                }
            }
        }
    }

    /// A change that has already arrived (while a reply was awaited), if
    /// any; never waits.
    pub fn pending(&mut self) -> Option<Update> {
        self.pending.pop_front()
    }

    /// Says `QUIT` and waits for `BYE`.
    pub async fn quit(mut self) -> Result<(), ClientError> {
        self.send(&ClientCommand::Quit).await?;
        loop {
            match self.read().await {
                Ok(ServerMessage::Bye) | Err(ClientError::Closed) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
    }

    async fn send(&mut self, cmd: &ClientCommand) -> Result<(), ClientError> {
        let mut out = BytesMut::new();
        cmd.encode(&mut out);
        self.stream.write_all(&out).await?;
        Ok(())
    }

    /// The reply to a request, keeping pushes that arrive first.
    async fn reply(&mut self) -> Result<ServerMessage, ClientError> {
        loop {
            match self.read().await? {
                ServerMessage::Snapshot(s) => self.pending.push_back(Update::Snapshot(s)),
                ServerMessage::Gone(g) => self.pending.push_back(Update::Gone(g)),
                ServerMessage::Heartbeat => {}
                // The pushes before it are queued in `pending`: read.
                ServerMessage::Mark(token) => self.send(&ClientCommand::Ack(token)).await?,
                other => return Ok(other),
            }
        }
    }

    async fn read(&mut self) -> Result<ServerMessage, ClientError> {
        loop {
            if let Some(m) = self.decode()? {
                return Ok(m);
            }
            self.buf.reserve(4096);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(ClientError::Closed);
            }
            self.last_rx = Instant::now();
        }
    }

    fn decode(&mut self) -> Result<Option<ServerMessage>, ClientError> {
        match self.decoder.decode(&mut self.buf)? {
            Some(ServerMessage::Error { code, message }) => {
                Err(ClientError::Server { code, message })
            }
            m => Ok(m),
        }
    }
}

fn unexpected(m: ServerMessage) -> ClientError {
    let mut out = BytesMut::new();
    m.encode(&mut out);
    let text = String::from_utf8_lossy(&out);
    ClientError::Unexpected(text.lines().next().unwrap_or_default().to_string())
}
