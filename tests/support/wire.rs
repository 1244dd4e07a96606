//! A raw client for exact-bytes tests of the Sentinel port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A plain socket: requests written as given, replies read as bytes.
pub struct Raw(pub TcpStream);

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw(s)
    }

    /// Whether the server closed the connection (buffered replies are
    /// read and dropped first).
    pub fn closed(&mut self) -> bool {
        self.0
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 65536];
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    /// Sends `req` and reads its reply: waits up to 5 s for the first
    /// byte (a loaded machine may be slow), then reads until a short pause.
    pub fn ask(&mut self, req: &str) -> String {
        self.exchange(req, Duration::from_secs(5))
    }

    /// Sends `req` when no reply is expected (`CLIENT REPLY OFF`): reads
    /// whatever arrives within 300 ms.
    pub fn ask_none(&mut self, req: &str) -> String {
        self.exchange(req, Duration::from_millis(300))
    }

    fn exchange(&mut self, req: &str, first: Duration) -> String {
        self.0.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        self.0.set_read_timeout(Some(first)).unwrap();
        loop {
            match self.0.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
            self.0
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

pub fn cmd(args: &[&str]) -> String {
    let mut s = format!("*{}\r\n", args.len());
    for a in args {
        s.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s
}

/// Keys of a flat RESP2 key/value reply, in order.
pub fn keys(reply: &str) -> Vec<String> {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let mut values = Vec::new();
    let mut i = 1;
    while i + 1 < lines.len() {
        if lines[i].starts_with('$') {
            values.push(lines[i + 1].to_string());
            i += 2;
        } else {
            i += 1;
        }
    }
    values.iter().step_by(2).cloned().collect()
}

/// One connection where each request gets exactly one reply, returned as
/// the reply's raw bytes (for byte-for-byte comparisons with Sentinel).
pub struct Conn {
    pub stream: TcpStream,
    buf: bytes::BytesMut,
}

impl Conn {
    /// Wraps a connected socket (5 s read timeout).
    pub fn new(stream: TcpStream) -> Conn {
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Conn {
            stream,
            buf: bytes::BytesMut::new(),
        }
    }

    pub fn connect(port: u16) -> Conn {
        Conn::new(TcpStream::connect(("127.0.0.1", port)).unwrap())
    }

    /// Connected and logged in as `user`.
    pub fn login(port: u16, user: &str, pass: &str) -> Conn {
        let mut c = Conn::connect(port);
        assert_eq!(c.ask(&["AUTH", user, pass]), b"+OK\r\n", "{user} on {port}");
        c
    }

    /// Sends `args` as a command; its reply's bytes.
    pub fn ask(&mut self, args: &[&str]) -> Vec<u8> {
        let mut req = bytes::BytesMut::new();
        valkyrie_protocol::encode_command(args, &mut req);
        self.stream.write_all(&req).unwrap();
        self.reply()
    }

    /// The next whole reply, as raw bytes.
    pub fn reply(&mut self) -> Vec<u8> {
        loop {
            let mut probe = self.buf.clone();
            if let Ok(Some(_)) = valkyrie_protocol::FrameDecoder::new().decode(&mut probe) {
                let n = self.buf.len() - probe.len();
                return self.buf.split_to(n).to_vec();
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// `ask`, decoded.
    pub fn frame(&mut self, args: &[&str]) -> valkyrie_protocol::Frame {
        let raw = self.ask(args);
        let mut b = bytes::BytesMut::from(&raw[..]);
        valkyrie_protocol::FrameDecoder::new()
            .decode(&mut b)
            .unwrap()
            .unwrap()
    }
}
