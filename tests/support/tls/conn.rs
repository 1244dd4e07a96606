//! A blocking rustls client to `127.0.0.1` ([`TlsConn`]: RESP, HTTP and
//! raw lines) that can say which certificate a server presented, the
//! one-shot calls built on it (`PING`, `INFO`, the master's address, an
//! HTTP GET over TLS or in clear), and the Prometheus text parsing the
//! admin port's `/metrics` needs.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rustls::pki_types::ServerName;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

use super::pki::serial_of;

/// One TLS connection to `127.0.0.1:port`, the handshake done.
pub struct TlsConn {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    dec: FrameDecoder,
    buf: BytesMut,
}

impl TlsConn {
    /// Connects and completes the handshake (both directions bounded by
    /// `timeout`). With TLS 1.3 a server's refusal of the client's
    /// certificate arrives after this returns, as an alert on the first
    /// read: use [`TlsConn::call`] to know whether the server accepted.
    pub fn connect(
        port: u16,
        cfg: Arc<rustls::ClientConfig>,
        timeout: Duration,
    ) -> Result<TlsConn, String> {
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        sock.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        sock.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        sock.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(cfg, name).map_err(|e| e.to_string())?;
        let mut stream = rustls::StreamOwned::new(conn, sock);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| format!("handshake: {e}"))?;
        }
        Ok(TlsConn {
            stream,
            dec: FrameDecoder::new(),
            buf: BytesMut::new(),
        })
    }

    /// The serial of the certificate the server presented.
    pub fn peer_serial(&self) -> String {
        let chain = self
            .stream
            .conn
            .peer_certificates()
            .expect("a server certificate");
        serial_of(&chain[0])
    }

    /// The TLS version agreed.
    pub fn version(&self) -> Option<rustls::ProtocolVersion> {
        self.stream.conn.protocol_version()
    }

    /// Sends one RESP command and reads one reply.
    pub fn call(&mut self, args: &[&str]) -> Result<Frame, String> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream
            .write_all(&out)
            .and_then(|_| self.stream.flush())
            .map_err(|e| format!("write: {e}"))?;
        self.read()
    }

    /// The next RESP frame.
    pub fn read(&mut self) -> Result<Frame, String> {
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).map_err(|e| e.to_string())? {
                return Ok(f);
            }
            let mut chunk = [0u8; 4096];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .and_then(|_| self.stream.flush())
            .map_err(|e| format!("write: {e}"))
    }

    /// The next line (without its terminator), for the index protocol.
    pub fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(i + 1);
                return Ok(String::from_utf8_lossy(&line)
                    .trim_end_matches(['\r', '\n'])
                    .to_string());
            }
            let mut chunk = [0u8; 4096];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Everything up to the end of the stream (a peer that closes without
    /// `close_notify` ends it too).
    pub fn read_to_end(&mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::UnexpectedEof && !out.is_empty() => {
                    return Ok(out);
                }
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
}

/// A fresh TLS connection, one command, its reply.
pub fn tls_call(port: u16, cfg: Arc<rustls::ClientConfig>, args: &[&str]) -> Result<Frame, String> {
    TlsConn::connect(port, cfg, Duration::from_secs(5))?.call(args)
}

/// A fresh TLS connection and `PING`: the serial the server presented,
/// once the server answered `PONG` (a refused client certificate, or any
/// other failure, is an error).
pub fn tls_ping(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<String, String> {
    let mut c = TlsConn::connect(port, cfg, Duration::from_secs(5))?;
    match c.call(&["PING"])? {
        Frame::Simple(s) if &s[..] == b"PONG" => Ok(c.peer_serial()),
        other => Err(format!("PING answered {other:?}")),
    }
}

/// The serial of the certificate a TLS server on `port` presents (the
/// handshake alone: the server need not accept `cfg`'s identity).
pub fn presented_serial(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<String, String> {
    Ok(TlsConn::connect(port, cfg, Duration::from_secs(5))?.peer_serial())
}

/// The address `SENTINEL get-master-addr-by-name <name>` gives over TLS.
pub fn tls_master_addr(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    name: &str,
) -> Option<(String, u16)> {
    match tls_call(port, cfg, &["SENTINEL", "get-master-addr-by-name", name]).ok()? {
        Frame::Array(v) if v.len() == 2 => Some((
            String::from_utf8_lossy(v[0].as_bytes()?).into_owned(),
            String::from_utf8_lossy(v[1].as_bytes()?).parse().ok()?,
        )),
        _ => None,
    }
}

/// A field of an `INFO` section read over TLS.
pub fn tls_info_field(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    section: &str,
    field: &str,
) -> Option<String> {
    let f = tls_call(port, cfg, &["INFO", section]).ok()?;
    let text = String::from_utf8(f.as_bytes()?.to_vec()).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|v| v.trim().to_string())
    })
}

/// One HTTP/1.1 GET over TLS: status code and body.
pub fn https_get(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<(u16, String), String> {
    let mut c = TlsConn::connect(port, cfg, Duration::from_secs(5))?;
    c.send(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    parse_http(&c.read_to_end()?)
}

/// One HTTP/1.1 GET in clear: status code and body.
pub fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| e.to_string())?;
    parse_http(&out)
}

fn parse_http(raw: &[u8]) -> Result<(u16, String), String> {
    let out = String::from_utf8_lossy(raw);
    let (head, body) = out
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP head in {out:?}"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((code, body.to_string()))
}

/// The value of the Prometheus series `name` whose labels include
/// `labels`, in the text exposition `text`.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            if all { value.parse().ok() } else { None }
        })
}

/// The sum of every series `name` whose labels include `labels` (0 when
/// there is none).
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let all = labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            if n == name && all {
                value.parse::<f64>().ok()
            } else {
                None
            }
        })
        .sum()
}
