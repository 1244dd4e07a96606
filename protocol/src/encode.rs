//! The RESP encoder, for both protocol versions.
//!
//! Encoding a frame for a RESP2 peer applies the downgrade Valkey applies
//! when a RESP2 client asks for a RESP3-shaped reply: maps become flat
//! arrays, sets and pushes become arrays, null becomes `$-1`, booleans
//! become integers, doubles and big numbers become bulk strings, bulk errors
//! become simple errors, verbatim strings lose their format, and attributes
//! are dropped.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

use crate::Frame;

/// The protocol version a peer speaks (`HELLO 2` / `HELLO 3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// RESP2, every client's default.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

/// Appends the encoding of `frame` for a `protocol` peer to `out`.
pub fn encode(frame: &Frame, protocol: Protocol, out: &mut BytesMut) {
    let resp3 = protocol == Protocol::Resp3;
    match frame {
        Frame::Simple(s) => line(out, b'+', s),
        Frame::Error(s) => line(out, b'-', s),
        Frame::Integer(n) => header(out, b':', *n),
        Frame::Bulk(b) => bulk(out, b'$', b),
        Frame::NullBulk if resp3 => out.put_slice(b"_\r\n"),
        Frame::NullBulk => out.put_slice(b"$-1\r\n"),
        Frame::NullArray if resp3 => out.put_slice(b"_\r\n"),
        Frame::NullArray => out.put_slice(b"*-1\r\n"),
        Frame::Null if resp3 => out.put_slice(b"_\r\n"),
        Frame::Null => out.put_slice(b"$-1\r\n"),
        Frame::Boolean(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Frame::Boolean(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
        Frame::Double(d) => {
            let mut text = DoubleText::default();
            write_double(&mut text, *d);
            if resp3 {
                line(out, b',', text.as_bytes());
            } else {
                bulk(out, b'$', text.as_bytes());
            }
        }
        Frame::BigNumber(n) if resp3 => line(out, b'(', n),
        Frame::BigNumber(n) => bulk(out, b'$', n),
        Frame::BulkError(e) if resp3 => bulk(out, b'!', e),
        Frame::BulkError(e) => line(out, b'-', e),
        Frame::Verbatim { format, text } if resp3 => {
            header(out, b'=', len_i64(text.len() + 4));
            out.put_slice(format);
            out.put_u8(b':');
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
        Frame::Verbatim { text, .. } => bulk(out, b'$', text),
        Frame::Array(items) => list(out, b'*', items, protocol),
        Frame::Set(items) => list(out, if resp3 { b'~' } else { b'*' }, items, protocol),
        Frame::Push(items) => list(out, if resp3 { b'>' } else { b'*' }, items, protocol),
        Frame::Map(pairs) => {
            if resp3 {
                header(out, b'%', len_i64(pairs.len()));
            } else {
                header(out, b'*', len_i64(pairs.len() * 2));
            }
            for (k, v) in pairs {
                encode(k, protocol, out);
                encode(v, protocol, out);
            }
        }
        Frame::Attribute { attributes, data } => {
            if resp3 {
                header(out, b'|', len_i64(attributes.len()));
                for (k, v) in attributes {
                    encode(k, protocol, out);
                    encode(v, protocol, out);
                }
            }
            encode(data, protocol, out);
        }
    }
}

/// Encodes `frame` into a new buffer.
pub fn to_bytes(frame: &Frame, protocol: Protocol) -> BytesMut {
    let mut out = BytesMut::new();
    encode(frame, protocol, &mut out);
    out
}

/// Appends a command (an array of bulk strings), the form every request
/// to a Valkey server takes.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    header(out, b'*', len_i64(args.len()));
    for a in args {
        bulk(out, b'$', a.as_ref());
    }
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn header(out: &mut BytesMut, tag: u8, n: i64) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    out.reserve(digits.len() + 3);
    out.put_u8(tag);
    out.put_slice(digits.as_bytes());
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, tag: u8, data: &[u8]) {
    header(out, tag, len_i64(data.len()));
    out.reserve(data.len() + 2);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// A line-typed value. CR and LF cannot appear inside one, so they become
/// spaces, as Valkey does for error texts; anything else would let a value
/// inject frames into the stream.
fn line(out: &mut BytesMut, tag: u8, data: &[u8]) {
    out.reserve(data.len() + 3);
    out.put_u8(tag);
    if memchr::memchr2(b'\r', b'\n', data).is_none() {
        out.put_slice(data);
    } else {
        out.extend(
            data.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    }
    out.put_slice(b"\r\n");
}

fn list(out: &mut BytesMut, tag: u8, items: &[Frame], protocol: Protocol) {
    header(out, tag, len_i64(items.len()));
    for item in items {
        encode(item, protocol, out);
    }
}

/// Stack buffer for a formatted double (at most ~25 bytes).
#[derive(Default)]
struct DoubleText {
    buf: [u8; 32],
    len: usize,
}

impl DoubleText {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for DoubleText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Writes the shortest text that parses back to exactly `d`: `inf`,
/// `-inf`, `nan`, plain decimals for ordinary magnitudes, and exponent form
/// for very large or small ones (Rust's shortest round-trip formatting).
fn write_double(out: &mut DoubleText, d: f64) {
    // Writing into a 32-byte buffer cannot fail for these formats (the
    // longest, `-2.2250738585072014e-308`, is 24 bytes).
    let _ = if d.is_nan() {
        out.write_str("nan")
    } else if d.is_infinite() {
        out.write_str(if d > 0.0 { "inf" } else { "-inf" })
    } else if d == 0.0 || (1e-5..1e16).contains(&d.abs()) {
        write!(out, "{d}")
    } else {
        write!(out, "{d:e}")
    };
}
