//! A minimal RESP client connection toward one Valkey instance: connect
//! with a timeout and keepalive, send a command, read one reply with a
//! timeout. Failures are classified for the core.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use valkyrie_protocol::{Frame, FrameDecoder, Limits, encode_command};

use crate::config::Secret;
use crate::core::{Addr, LinkFailure};
use crate::tls::{HandshakeError, Outbound, Stream};

/// The name of our connections: `sentinel-<first 8 of myid>-<role>`
/// (`cmd` or `pubsub`), as Sentinel names them.
pub fn client_name(myid: &str, role: &str) -> String {
    let short = myid.get(..8).unwrap_or(myid);
    format!("sentinel-{short}-{role}")
}

/// Why a command did not get a reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No reply within the timeout.
    #[error("timed out")]
    Timeout,
    /// The connection broke.
    #[error("connection lost: {0}")]
    Broken(String),
    /// The reply was not valid RESP.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// One connection.
#[derive(Debug)]
pub struct Conn {
    stream: Stream,
    buf: BytesMut,
    decoder: FrameDecoder,
    out: BytesMut,
    renamed: Renamed,
    /// The address the connection reached.
    peer_ip: Option<std::net::IpAddr>,
}

/// The group's `rename-command` pairs (original name in lower case, the
/// name to send): every command a link sends goes through them, as
/// Sentinel's `sentinelInstanceMapCommand` does.
pub type Renamed = std::sync::Arc<[(String, String)]>;

/// A group's `rename-command` pairs (`<cmd> <renamed>`, as configured)
/// as links send by them: the original name in lower case.
pub fn renamed(pairs: &[(String, String)]) -> Renamed {
    pairs
        .iter()
        .map(|(from, to)| (from.to_ascii_lowercase(), to.clone()))
        .collect()
}

/// Connects to `addr` within `timeout`, classifying failure; with `tls`,
/// the TLS handshake follows (checking the server's certificate against
/// the CA and `addr`'s host) within its own `timeout`. A server that
/// accepts but does not complete the handshake in time is `Silent`; one
/// whose handshake fails (a certificate refused either way, a plain-text
/// port) is `Reset`, and the reason is logged once per link by the
/// caller's `tls_warned`.
pub async fn connect(
    addr: &Addr,
    timeout: Duration,
    tls: Option<&Outbound>,
) -> Result<Conn, LinkFailure> {
    connect_as(addr, &addr.host, timeout, tls).await
}

/// [`connect`] to `addr`, checking the server's certificate against
/// `name` rather than `addr`'s host: a Service's address that should lead
/// to the instance `name` (`runtime/route.rs`).
pub async fn connect_as(
    addr: &Addr,
    name: &str,
    timeout: Duration,
    tls: Option<&Outbound>,
) -> Result<Conn, LinkFailure> {
    let target = (addr.host.as_str(), addr.port);
    let tcp = match tokio::time::timeout(timeout, TcpStream::connect(target)).await {
        Err(_) => return Err(LinkFailure::ConnectTimeout),
        Ok(Err(e)) => {
            return Err(match e.kind() {
                std::io::ErrorKind::ConnectionRefused => LinkFailure::Refused,
                std::io::ErrorKind::TimedOut
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::NetworkUnreachable => LinkFailure::ConnectTimeout,
                _ => LinkFailure::Reset,
            });
        }
        Ok(Ok(s)) => s,
    };
    let peer_ip = tcp.peer_addr().ok().map(|a| a.ip());
    let _ = tcp.set_nodelay(true);
    let sock = socket2::SockRef::from(&tcp);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(1))
        .with_retries(3);
    let _ = sock.set_tcp_keepalive(&keepalive);
    let stream = match tls {
        None => Stream::Plain(tcp),
        Some(tls) => match tls.connect(name, addr.port, tcp, timeout).await {
            Ok(s) => s,
            Err(HandshakeError::Timeout) => return Err(LinkFailure::Silent),
            Err(e) => {
                tls.warn_once(addr, &e);
                return Err(LinkFailure::Reset);
            }
        },
    };
    Ok(Conn {
        stream,
        buf: BytesMut::with_capacity(4096),
        // Replies from Valkey: generous, but bounded.
        decoder: FrameDecoder::with_limits(Limits {
            max_bulk: 64 * 1024 * 1024,
            max_frame: 64 * 1024 * 1024,
            ..Limits::DEFAULT
        }),
        out: BytesMut::with_capacity(256),
        renamed: Renamed::from([]),
        peer_ip,
    })
}

impl Conn {
    /// The IP address the connection reached (`None` if the socket could
    /// not tell).
    pub fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.peer_ip
    }

    /// Sends every later command under its renamed name, if it has one.
    pub fn rename(&mut self, renamed: Renamed) {
        self.renamed = renamed;
    }

    /// Replaces the reply decoder's limits (the pub/sub link keeps them
    /// small: it only expects short hellos).
    pub fn set_limits(&mut self, limits: Limits) {
        self.decoder = FrameDecoder::with_limits(limits);
    }

    /// The local address of the connection, as the other side sees us
    /// (IPv6 without brackets): the first field of our hellos.
    pub fn local_ip(&self) -> Option<String> {
        self.stream
            .tcp()
            .local_addr()
            .ok()
            .map(|a| a.ip().to_string())
    }

    /// `AUTH [user] pass`. `Ok(Some(text))`: the server refused, with its
    /// error text (never the secret); `Ok(None)`: accepted or any other
    /// non-error reply.
    pub async fn auth(
        &mut self,
        user: Option<&str>,
        pass: &Secret,
        timeout: Duration,
    ) -> Result<Option<String>, ClientError> {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = user {
            args.push(user.as_bytes());
        }
        args.push(pass.expose().as_bytes());
        let reply = self.call(&args, timeout).await?;
        Ok(match reply {
            Frame::Error(e) | Frame::BulkError(e) => Some(String::from_utf8_lossy(&e).into_owned()),
            _ => None,
        })
    }

    /// `CLIENT SETNAME <name>`; the reply is returned (callers ignore it).
    pub async fn set_name(&mut self, name: &str, timeout: Duration) -> Result<Frame, ClientError> {
        self.call(&["CLIENT", "SETNAME", name], timeout).await
    }

    /// Reads the next frame the server sends on its own (pub/sub
    /// messages). Cancel-safe: bytes read stay buffered.
    pub async fn next_frame(&mut self) -> Result<Frame, ClientError> {
        loop {
            if let Some(frame) = self
                .decoder
                .decode(&mut self.buf)
                .map_err(|e| ClientError::Protocol(e.to_string()))?
            {
                return Ok(frame);
            }
            let n = self.stream.read_buf(&mut self.buf).await.map_err(broken)?;
            if n == 0 {
                return Err(ClientError::Broken("closed by peer".into()));
            }
        }
    }

    /// Sends `args` and waits up to `timeout` for the reply.
    pub async fn call<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        self.out.clear();
        let renamed = self.renamed.clone();
        let to = args.first().and_then(|name| {
            renamed
                .iter()
                .find(|(from, _)| from.as_bytes().eq_ignore_ascii_case(name.as_ref()))
        });
        match to {
            Some((_, to)) => {
                let mut mapped: Vec<&[u8]> = args.iter().map(AsRef::as_ref).collect();
                mapped[0] = to.as_bytes();
                encode_command(&mapped, &mut self.out);
            }
            None => encode_command(args, &mut self.out),
        }
        match tokio::time::timeout(timeout, self.round_trip()).await {
            Err(_) => Err(ClientError::Timeout),
            Ok(r) => r,
        }
    }

    /// Resolves when the peer closes the connection (or it breaks) while
    /// no command is in flight. Cancel-safe: use it in `select!` to notice
    /// a dead process at once instead of at the next PING.
    pub async fn closed(&mut self) -> ClientError {
        loop {
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) => return ClientError::Broken("closed by peer".into()),
                // Unsolicited bytes stay buffered for the next reply.
                Ok(_) => {}
                Err(e) => return broken(e),
            }
        }
    }

    async fn round_trip(&mut self) -> Result<Frame, ClientError> {
        self.stream.write_all(&self.out).await.map_err(broken)?;
        self.next_frame().await
    }
}

/// A socket error. `ETIMEDOUT` (keepalive probes or retransmissions that
/// got no answer) means the peer went silent, not that it closed or reset
/// the connection: the core must not read it as a dead process.
fn broken(e: std::io::Error) -> ClientError {
    match e.kind() {
        std::io::ErrorKind::TimedOut => ClientError::Timeout,
        _ => ClientError::Broken(e.to_string()),
    }
}

/// The text of a bulk or simple string reply, or the error text.
pub fn text(frame: &Frame) -> Result<String, String> {
    match frame {
        Frame::Error(e) | Frame::BulkError(e) => Err(String::from_utf8_lossy(e).into_owned()),
        other => other
            .as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| format!("unexpected reply {other:?}")),
    }
}
