//! A RESP connection that tells a read timeout from a closed connection
//! (used by the taps, the pollers, the tripwire, the writer, and by tests
//! that play a peer themselves), and helpers to read frames as text.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

/// Why a read returned no frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnErr {
    /// Nothing complete arrived within the read timeout.
    Timeout,
    /// Closed, reset or undecodable.
    Closed,
}

/// A RESP connection (client or server side) with a short read timeout.
#[derive(Debug)]
pub struct Conn {
    pub stream: TcpStream,
    dec: FrameDecoder,
    buf: BytesMut,
}

impl Conn {
    /// Connects to `127.0.0.1:port`.
    pub fn connect(port: u16, read_timeout: Duration) -> Option<Conn> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
        Conn::from_stream(stream, read_timeout)
    }

    /// Wraps an accepted or connected socket.
    pub fn from_stream(stream: TcpStream, read_timeout: Duration) -> Option<Conn> {
        stream.set_read_timeout(Some(read_timeout)).ok()?;
        let _ = stream.set_nodelay(true);
        Some(Conn {
            stream,
            dec: FrameDecoder::new(),
            buf: BytesMut::new(),
        })
    }

    /// Writes `args` as a command.
    pub fn send(&mut self, args: &[&str]) -> Result<(), ConnErr> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.write_raw(&out)
    }

    /// Writes bytes as they are.
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ConnErr> {
        self.stream.write_all(bytes).map_err(|_| ConnErr::Closed)
    }

    /// The next frame, or why none came within the read timeout.
    pub fn read(&mut self) -> Result<Frame, ConnErr> {
        loop {
            match self.dec.decode(&mut self.buf) {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(_) => return Err(ConnErr::Closed),
            }
            let mut chunk = [0u8; 16384];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ConnErr::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ConnErr::Timeout);
                }
                Err(_) => return Err(ConnErr::Closed),
            }
        }
    }

    /// Sends `args` and waits up to `limit` for the reply.
    pub fn call(&mut self, args: &[&str], limit: Duration) -> Result<Frame, ConnErr> {
        self.send(args)?;
        let deadline = Instant::now() + limit;
        loop {
            match self.read() {
                Err(ConnErr::Timeout) if Instant::now() < deadline => {}
                r => return r,
            }
        }
    }
}

/// The text of a string-like frame.
pub fn text(f: &Frame) -> String {
    f.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// A flat key/value array as a map (`SENTINEL master`, one entry of
/// `SENTINEL sentinels`).
pub fn kv(f: &Frame) -> BTreeMap<String, String> {
    match f {
        Frame::Array(v) => v
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        _ => BTreeMap::new(),
    }
}
