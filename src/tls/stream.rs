//! One stream type for plain TCP and TLS, on ports and on links.
//!
//! [`Stream`] reads and writes like a `TcpStream` and still reaches its
//! socket (addresses, descriptor, linger). [`Stream::split`] gives the
//! Sentinel port's connection its two halves: a plain stream splits for
//! free, as before; a TLS stream through tokio's `split`, with a read half
//! whose `readable` reads the decrypted bytes it announces (TLS readiness
//! of the socket says nothing about whole records), so the connection's
//! loop stays the same for both.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp;

/// A connection, plain or TLS.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS accepted on one of our ports.
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// TLS we opened toward an instance or a peer.
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// The socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Server(s) => s.get_ref().0,
            Stream::Client(s) => s.get_ref().0,
        }
    }

    /// Whether the stream is TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }

    /// Splits into a read and a write half borrowing the stream.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            tls => {
                let (r, w) = tokio::io::split(tls);
                (
                    ReadHalf::Tls {
                        half: r,
                        staged: BytesMut::new(),
                        eof: false,
                    },
                    WriteHalf::Tls {
                        half: w,
                        unflushed: false,
                    },
                )
            }
        }
    }
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Plain(s)
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Server(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The read half of a split [`Stream`].
#[derive(Debug)]
pub enum ReadHalf<'a> {
    /// Plain TCP.
    Plain(tcp::ReadHalf<'a>),
    /// TLS: bytes decrypted by [`ReadHalf::readable`] wait in `staged`.
    Tls {
        /// The half.
        half: tokio::io::ReadHalf<&'a mut Stream>,
        /// Decrypted bytes not yet read.
        staged: BytesMut,
        /// The peer closed.
        eof: bool,
    },
}

impl ReadHalf<'_> {
    /// Waits until a read would return something (data or the end).
    /// Cancel-safe: what a TLS read decrypted stays staged.
    pub async fn readable(&mut self) -> io::Result<()> {
        match self {
            ReadHalf::Plain(r) => r.readable().await,
            ReadHalf::Tls { half, staged, eof } => {
                if !staged.is_empty() || *eof {
                    return Ok(());
                }
                staged.reserve(4096);
                if half.read_buf(staged).await? == 0 {
                    *eof = true;
                }
                Ok(())
            }
        }
    }
}

impl AsyncRead for ReadHalf<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Plain(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Tls { half, staged, eof } => {
                if !staged.is_empty() {
                    let n = staged.len().min(buf.remaining());
                    buf.put_slice(&staged[..n]);
                    staged.advance(n);
                    if staged.is_empty() {
                        *staged = BytesMut::new();
                    }
                    return Poll::Ready(Ok(()));
                }
                if *eof {
                    return Poll::Ready(Ok(()));
                }
                Pin::new(half).poll_read(cx, buf)
            }
        }
    }
}

/// The write half of a split [`Stream`].
#[derive(Debug)]
pub enum WriteHalf<'a> {
    /// Plain TCP.
    Plain(tcp::WriteHalf<'a>),
    /// TLS; `unflushed` while rustls holds records the socket has not
    /// taken yet.
    Tls {
        /// The half.
        half: tokio::io::WriteHalf<&'a mut Stream>,
        /// Records wait in rustls.
        unflushed: bool,
    },
}

impl WriteHalf<'_> {
    /// Whether bytes already accepted still wait to reach the socket
    /// (TLS records rustls holds): [`WriteHalf::write_some`] must run
    /// again even with nothing new to write.
    pub fn unflushed(&self) -> bool {
        matches!(
            self,
            WriteHalf::Tls {
                unflushed: true,
                ..
            }
        )
    }

    /// Writes part of `buf` (possibly none, when it only moved held
    /// records to the socket) and returns how much.
    pub async fn write_some(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            WriteHalf::Plain(w) => w.write(buf).await,
            WriteHalf::Tls { half, unflushed } => {
                if *unflushed {
                    half.flush().await?;
                    *unflushed = false;
                }
                if buf.is_empty() {
                    return Ok(0);
                }
                let n = half.write(buf).await?;
                // What the socket did not take now is sent by the next
                // call, which the connection makes while `unflushed`.
                *unflushed = !matches!(try_flush(half), Ok(true));
                Ok(n)
            }
        }
    }
}

/// Drops the connection with a reset (linger 0) rather than a close.
pub fn reset<'a>(read: ReadHalf<'a>, write: WriteHalf<'a>) {
    let linger = |s: &TcpStream| {
        let _ = socket2::SockRef::from(s).set_linger(Some(std::time::Duration::ZERO));
    };
    match (read, write) {
        (ReadHalf::Plain(_), WriteHalf::Plain(w)) => linger(w.as_ref()),
        (ReadHalf::Tls { half, .. }, WriteHalf::Tls { half: w, .. }) => {
            linger(half.unsplit(w).tcp())
        }
        // Halves of one stream are of one kind.
        _ => {}
    }
}

/// Writes what `w` takes now without waiting: `WouldBlock` when it
/// takes nothing.
pub fn try_write(w: &mut (impl AsyncWrite + Unpin), buf: &[u8]) -> io::Result<usize> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match Pin::new(w).poll_write(&mut cx, buf) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

/// Flushes `w` as far as it goes now: `Ok(true)` when nothing is held
/// any more (always, for plain TCP).
pub fn try_flush(w: &mut (impl AsyncWrite + Unpin)) -> io::Result<bool> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match Pin::new(w).poll_flush(&mut cx) {
        Poll::Ready(r) => r.map(|()| true),
        Poll::Pending => Ok(false),
    }
}
