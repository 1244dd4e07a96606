//! Encoder: exact bytes for every type, and Valkey's RESP3→RESP2 downgrade.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use valkyrie_protocol::{Frame, Protocol, encode_command, to_bytes};

fn r2(f: &Frame) -> String {
    String::from_utf8(to_bytes(f, Protocol::Resp2).to_vec()).unwrap()
}

fn r3(f: &Frame) -> String {
    String::from_utf8(to_bytes(f, Protocol::Resp3).to_vec()).unwrap()
}

fn b(s: &str) -> Frame {
    Frame::bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn scalars() {
    for (f, two, three) in [
        (Frame::simple("OK"), "+OK\r\n", "+OK\r\n"),
        (Frame::error("ERR x"), "-ERR x\r\n", "-ERR x\r\n"),
        (Frame::Integer(-7), ":-7\r\n", ":-7\r\n"),
        (b("hi"), "$2\r\nhi\r\n", "$2\r\nhi\r\n"),
        (b(""), "$0\r\n\r\n", "$0\r\n\r\n"),
        (Frame::NullBulk, "$-1\r\n", "_\r\n"),
        (Frame::NullArray, "*-1\r\n", "_\r\n"),
        (Frame::Null, "$-1\r\n", "_\r\n"),
        (Frame::Boolean(true), ":1\r\n", "#t\r\n"),
        (Frame::Boolean(false), ":0\r\n", "#f\r\n"),
        (Frame::Double(1.5), "$3\r\n1.5\r\n", ",1.5\r\n"),
        (Frame::Double(3.0), "$1\r\n3\r\n", ",3\r\n"),
        (Frame::Double(1e300), "$5\r\n1e300\r\n", ",1e300\r\n"),
        (Frame::Double(f64::INFINITY), "$3\r\ninf\r\n", ",inf\r\n"),
        (
            Frame::Double(f64::NEG_INFINITY),
            "$4\r\n-inf\r\n",
            ",-inf\r\n",
        ),
        (Frame::Double(f64::NAN), "$3\r\nnan\r\n", ",nan\r\n"),
        (
            Frame::BigNumber(Bytes::from("123456789012345678901234567890")),
            "$30\r\n123456789012345678901234567890\r\n",
            "(123456789012345678901234567890\r\n",
        ),
        (
            Frame::BulkError(Bytes::from("SYNTAX bad")),
            "-SYNTAX bad\r\n",
            "!10\r\nSYNTAX bad\r\n",
        ),
        (
            Frame::Verbatim {
                format: *b"txt",
                text: Bytes::from("Some string"),
            },
            "$11\r\nSome string\r\n",
            "=15\r\ntxt:Some string\r\n",
        ),
    ] {
        assert_eq!(r2(&f), two, "{f:?} in RESP2");
        assert_eq!(r3(&f), three, "{f:?} in RESP3");
    }
}

#[test]
fn aggregates_and_downgrade() {
    let map = Frame::Map(vec![
        (b("server"), b("valkey")),
        (b("proto"), Frame::Integer(3)),
    ]);
    assert_eq!(
        r3(&map),
        "%2\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$5\r\nproto\r\n:3\r\n"
    );
    assert_eq!(
        r2(&map),
        "*4\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$5\r\nproto\r\n:3\r\n"
    );
    let set = Frame::Set(vec![Frame::Integer(1)]);
    assert_eq!(r3(&set), "~1\r\n:1\r\n");
    assert_eq!(r2(&set), "*1\r\n:1\r\n");
    let push = Frame::Push(vec![b("message"), b("ch"), b("hi")]);
    assert_eq!(r3(&push), ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    assert_eq!(r2(&push), "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    let attr = Frame::Attribute {
        attributes: vec![(Frame::simple("ttl"), Frame::Integer(3))],
        data: Box::new(Frame::Array(vec![Frame::Null, Frame::Boolean(true)])),
    };
    assert_eq!(r3(&attr), "|1\r\n+ttl\r\n:3\r\n*2\r\n_\r\n#t\r\n");
    assert_eq!(r2(&attr), "*2\r\n$-1\r\n:1\r\n");
    assert_eq!(r2(&Frame::Array(vec![])), "*0\r\n");
    assert_eq!(r2(&Frame::Map(vec![])), "*0\r\n");
}

#[test]
fn line_values_cannot_inject_frames() {
    assert_eq!(r2(&Frame::error("ERR a\r\n+OK")), "-ERR a  +OK\r\n");
    assert_eq!(r2(&Frame::BulkError(Bytes::from("E x\ny"))), "-E x y\r\n");
    assert_eq!(r3(&Frame::simple("a\rb")), "+a b\r\n");
}

#[test]
fn commands() {
    let mut out = bytes::BytesMut::new();
    encode_command(
        &["SENTINEL", "get-master-addr-by-name", "mymaster"],
        &mut out,
    );
    assert_eq!(
        &out[..],
        b"*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$8\r\nmymaster\r\n"
    );
}
