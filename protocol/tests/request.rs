//! Request decoder: multibulk and inline commands as Valkey reads them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::BytesMut;
use common::*;
use valkyrie_protocol::{DecodeError, Limits, RequestDecoder};

fn args(input: &[u8]) -> Vec<Vec<String>> {
    let (r, e) = requests(input, Limits::DEFAULT);
    assert_eq!(e, None, "error for {:?}", String::from_utf8_lossy(input));
    let trickled = requests_trickled(input, Limits::DEFAULT);
    assert_eq!(
        trickled,
        (r.clone(), None),
        "trickled input decodes differently"
    );
    argv(&r)
}

fn error(input: &[u8]) -> DecodeError {
    let (_, e) = requests(input, Limits::DEFAULT);
    let e = e.unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(input)));
    assert_eq!(requests_trickled(input, Limits::DEFAULT).1, Some(e.clone()));
    e
}

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn multibulk() {
    assert_eq!(
        args(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva\r\nl\r\n*1\r\n$4\r\nPING\r\n"),
        vec![v(&["SET", "k", "va\r\nl"]), v(&["PING"])]
    );
    assert_eq!(args(b"*1\r\n$0\r\n\r\n"), vec![v(&[""])]);
}

#[test]
fn empty_requests_are_skipped() {
    // Valkey treats `*0`, `*-1` and blank lines as nothing at all.
    assert_eq!(
        args(b"*0\r\n*-1\r\n\r\n\n   \r\n*1\r\n$4\r\nPING\r\n"),
        vec![v(&["PING"])]
    );
}

#[test]
fn multibulk_errors_use_valkey_texts() {
    assert_eq!(error(b"*1\r\n:1\r\n"), DecodeError::ExpectedBulk(b':'));
    assert_eq!(
        error(b"*1\r\n:1\r\n").to_string(),
        "Protocol error: expected '$', got ':'"
    );
    // Each text below is what valkey-sentinel 8.0.1 answers to the same
    // bytes (tests/sentinel/protocol_errors.rs compares the two servers live).
    assert_eq!(error(b"*x\r\n"), DecodeError::InvalidMultibulkLength);
    assert_eq!(
        error(b"*x\r\n").to_string(),
        "Protocol error: invalid multibulk length"
    );
    for header in [&b"*01\r\n"[..], b"*+1\r\n", b"*-0\r\n"] {
        assert_eq!(error(header), DecodeError::InvalidMultibulkLength);
    }
    for arg in [&b"*1\r\n$x\r\n"[..], b"*1\r\n$04\r\n", b"*1\r\n$+4\r\n"] {
        assert_eq!(
            error(arg).to_string(),
            "Protocol error: invalid bulk length"
        );
    }
    let e = error(b"*1\r\n$-1\r\n");
    assert_eq!(e.to_string(), "Protocol error: invalid bulk length");
    let e = error(b"*3000000000\r\n");
    assert_eq!(e.to_string(), "Protocol error: invalid multibulk length");
    // Valkey skips the two bytes after a bulk argument unseen.
    assert_eq!(args(b"*1\r\n$3\r\nfooXY"), vec![v(&["foo"])]);
}

#[test]
fn unauthenticated_caps() {
    let caps = Limits::UNAUTHENTICATED;
    let eleven = format!("*11\r\n{}", "$1\r\nx\r\n".repeat(11));
    assert_eq!(
        requests(eleven.as_bytes(), caps).1,
        Some(DecodeError::AggregateTooLong { len: 11, limit: 10 })
    );
    let ten = format!("*10\r\n{}", "$1\r\nx\r\n".repeat(10));
    assert_eq!(requests(ten.as_bytes(), caps).0.len(), 1);
    assert_eq!(
        requests(b"*1\r\n$100000000\r\n", caps).1,
        Some(DecodeError::BulkTooLong {
            len: 100_000_000,
            limit: 16 * 1024
        })
    );
}

#[test]
fn inline_commands() {
    assert_eq!(args(b"PING\r\n"), vec![v(&["PING"])]);
    assert_eq!(args(b"PING\n"), vec![v(&["PING"])]);
    assert_eq!(
        args(b"  sentinel   masters \t\r\n"),
        vec![v(&["sentinel", "masters"])]
    );
    assert_eq!(
        args(b"set \"a b\" 'c d' \"\\x41\\n\\\"\" 'it\\'s'\r\n"),
        vec![v(&["set", "a b", "c d", "A\n\"", "it's"])]
    );
    // A quote in the middle of a word opens a quoted part, as in Valkey.
    assert_eq!(args(b"ab\"c d\"\r\n"), vec![v(&["abc d"])]);
    assert_eq!(args(b"\"\"\r\n"), vec![v(&[""])]);
    // A NUL ends the line, as Valkey reads it as a C string.
    assert_eq!(args(b"PING\0ignored\r\n"), vec![v(&["PING"])]);
    // Inline then multibulk in one buffer.
    assert_eq!(
        args(b"PING\r\n*1\r\n$4\r\nPING\r\n"),
        vec![v(&["PING"]), v(&["PING"])]
    );
}

#[test]
fn inline_errors() {
    assert_eq!(error(b"set \"abc\r\n"), DecodeError::UnbalancedQuotes);
    assert_eq!(error(b"set 'abc\r\n"), DecodeError::UnbalancedQuotes);
    assert_eq!(error(b"set \"a\"b\r\n"), DecodeError::UnbalancedQuotes);
    assert_eq!(
        error(b"set \"a\r\n").to_string(),
        "Protocol error: unbalanced quotes in request"
    );
    let long = vec![b'a'; 64 * 1024 + 1];
    assert_eq!(error(&long), DecodeError::LineTooLong { limit: 64 * 1024 });
    assert_eq!(
        error(&long).to_string(),
        "Protocol error: too big inline request"
    );
    let mut ok = vec![b'a'; 64 * 1024];
    ok.push(b'\n');
    assert_eq!(args(&ok).len(), 1);
}

#[test]
fn parse_borrows_without_copying() {
    let mut decoder = RequestDecoder::new();
    let buf = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*1\r\n";
    let n = decoder.parse(buf).unwrap().unwrap();
    assert_eq!(n, 22);
    let argv = decoder.argv(buf);
    assert_eq!(argv.len(), 2);
    assert_eq!(argv.get(0), Some(&b"GET"[..]));
    assert_eq!(argv.get(1).map(<[u8]>::as_ptr), Some(buf[17..].as_ptr()));
    assert_eq!(decoder.parse(&buf[n..]), Ok(None));
}

#[test]
fn huge_declared_sizes_reserve_only_the_cap() {
    use tokio_util::codec::Decoder;
    let mut codec = valkyrie_protocol::RequestCodec::new(Limits::DEFAULT);
    let mut buf = BytesMut::from(&b"*2000000000\r\n$1\r\n"[..]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    assert!(buf.capacity() < 1024, "reserved {}", buf.capacity());
    let mut buf = BytesMut::from(&b"*1\r\n$400000000\r\nx"[..]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    let cap = Limits::DEFAULT.max_prealloc;
    assert!(
        buf.capacity() <= buf.len() + cap,
        "reserved {}",
        buf.capacity()
    );
    let mut decoder = RequestDecoder::new();
    assert_eq!(decoder.parse(b"*1\r\n$400000000\r\nx"), Ok(None));
    assert_eq!(decoder.reserve_hint(), cap);
}

#[test]
fn frame_size_limit() {
    let limits = Limits {
        max_frame: 20,
        ..Limits::DEFAULT
    };
    assert_eq!(
        requests(b"*1\r\n$20\r\n", limits).1,
        Some(DecodeError::FrameTooLarge { limit: 20 })
    );
    assert_eq!(requests(b"*2\r\n$4\r\nabcd\r\n$1", limits).0.len(), 0);
}
