//! Frame decoder: every type, every edge case, every limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use valkyrie_protocol::{DecodeError, Frame, FrameDecoder, Limits};

fn b(s: &str) -> Frame {
    Frame::bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn simple_string_error_integer() {
    assert_eq!(one(b"+OK\r\n"), Frame::simple("OK"));
    assert_eq!(one(b"+\r\n"), Frame::simple(""));
    assert_eq!(one(b"-ERR unknown\r\n"), Frame::error("ERR unknown"));
    assert_eq!(one(b":0\r\n"), Frame::Integer(0));
    assert_eq!(one(b":-42\r\n"), Frame::Integer(-42));
    assert_eq!(one(b":9223372036854775807\r\n"), Frame::Integer(i64::MAX));
    assert_eq!(one(b":-9223372036854775808\r\n"), Frame::Integer(i64::MIN));
    // RESP lines cannot hold CR or LF; the encoder could not reproduce
    // them, so they are refused (found by the roundtrip fuzz target).
    assert_eq!(err(b"+a\nb\r\n"), DecodeError::InvalidLine);
    assert_eq!(err(b"+a\rb\r\n"), DecodeError::InvalidLine);
    assert_eq!(err(b"-ERR\n"), DecodeError::InvalidLine);
    assert_eq!(err(b"+\n"), DecodeError::InvalidLine);
    // Regression: the roundtrip fuzz target's first crash.
    assert_eq!(
        err(b"%2\r\n+server\r\n$6\r\nvalkey\r\n+pro\n+to#\r\n:3\r\n"),
        DecodeError::InvalidLine
    );
}

#[test]
fn integer_errors() {
    assert_eq!(
        err(b":9223372036854775808\r\n"),
        DecodeError::InvalidInteger
    );
    assert_eq!(err(b":\r\n"), DecodeError::InvalidInteger);
    assert_eq!(err(b":1.5\r\n"), DecodeError::InvalidInteger);
    assert_eq!(one(b":+1\r\n"), Frame::Integer(1));
    assert_eq!(err(b":+\r\n"), DecodeError::InvalidInteger);
    assert_eq!(err(b"*+1\r\n"), DecodeError::InvalidLength);
    assert_eq!(err(b":1\rx"), DecodeError::InvalidInteger);
}

#[test]
fn bulk_strings() {
    assert_eq!(one(b"$5\r\nhello\r\n"), b("hello"));
    assert_eq!(one(b"$0\r\n\r\n"), b(""));
    assert_eq!(one(b"$4\r\na\r\nb\r\n"), b("a\r\nb"));
    assert_eq!(one(b"$-1\r\n"), Frame::NullBulk);
    assert_eq!(
        err(b"$-2\r\n"),
        DecodeError::BulkTooLong {
            len: -2,
            limit: Limits::DEFAULT.max_bulk
        }
    );
    assert_eq!(err(b"$5\r\nhelloXY"), DecodeError::MissingCrlf);
    assert_eq!(err(b"$x\r\n"), DecodeError::InvalidLength);
    assert_eq!(err(b"$\r\n"), DecodeError::InvalidLength);
    assert_eq!(
        err(b"$99999999999999999999999\r\n"),
        DecodeError::InvalidLength
    );
}

#[test]
fn huge_declared_lengths_allocate_nothing() {
    let mut decoder = FrameDecoder::new();
    let mut buf = BytesMut::from(&b"*2000000000\r\n$3\r\nfoo\r\n"[..]);
    let before = buf.capacity();
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    assert_eq!(buf.capacity(), before);
    // The bulk-length limit refuses before anything is reserved.
    assert_eq!(
        err(b"$4000000000\r\n"),
        DecodeError::BulkTooLong {
            len: 4_000_000_000,
            limit: Limits::DEFAULT.max_bulk
        }
    );
    // Under the limit, a pending bulk only ever asks for max_prealloc.
    let mut decoder = FrameDecoder::new();
    let mut buf = BytesMut::from(&b"$500000000\r\nab"[..]);
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    assert_eq!(decoder.reserve_hint(), Limits::DEFAULT.max_prealloc);
}

#[test]
fn arrays_and_nulls() {
    assert_eq!(one(b"*0\r\n"), Frame::Array(vec![]));
    assert_eq!(one(b"*-1\r\n"), Frame::NullArray);
    assert_eq!(one(b"_\r\n"), Frame::Null);
    assert_eq!(
        one(b"*3\r\n:1\r\n*0\r\n$-1\r\n"),
        Frame::Array(vec![
            Frame::Integer(1),
            Frame::Array(vec![]),
            Frame::NullBulk
        ])
    );
    assert_eq!(
        one(b"*2\r\n*1\r\n+a\r\n*1\r\n*-1\r\n"),
        Frame::Array(vec![
            Frame::Array(vec![Frame::simple("a")]),
            Frame::Array(vec![Frame::NullArray]),
        ])
    );
    assert_eq!(err(b"*-2\r\n"), DecodeError::InvalidLength);
    assert_eq!(err(b"%-1\r\n"), DecodeError::InvalidLength);
    assert_eq!(err(b"_x\r\n"), DecodeError::InvalidNull);
    assert_eq!(err(b"_\rx"), DecodeError::InvalidNull);
}

#[test]
fn booleans() {
    assert_eq!(one(b"#t\r\n"), Frame::Boolean(true));
    assert_eq!(one(b"#f\r\n"), Frame::Boolean(false));
    assert_eq!(err(b"#x\r\n"), DecodeError::InvalidBoolean);
    assert_eq!(err(b"#tt"), DecodeError::InvalidBoolean);
    assert_eq!(err(b"#t\rx"), DecodeError::InvalidBoolean);
}

#[test]
fn doubles() {
    assert_eq!(one(b",1.5\r\n"), Frame::Double(1.5));
    assert_eq!(one(b",-0.25\r\n"), Frame::Double(-0.25));
    assert_eq!(one(b",10\r\n"), Frame::Double(10.0));
    assert_eq!(one(b",1e300\r\n"), Frame::Double(1e300));
    assert_eq!(one(b",1.23E-5\r\n"), Frame::Double(1.23e-5));
    assert_eq!(one(b",inf\r\n"), Frame::Double(f64::INFINITY));
    assert_eq!(one(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
    match one(b",nan\r\n") {
        Frame::Double(d) => assert!(d.is_nan()),
        other => panic!("{other:?}"),
    }
    assert_eq!(err(b",\r\n"), DecodeError::InvalidDouble);
    assert_eq!(err(b",infinity\r\n"), DecodeError::InvalidDouble);
    assert_eq!(err(b",1.5x\r\n"), DecodeError::InvalidDouble);
    assert_eq!(err(b",\xff\r\n"), DecodeError::InvalidDouble);
}

#[test]
fn big_numbers() {
    let n = "3492890328409238509324850943850943825024385";
    assert_eq!(
        one(format!("({n}\r\n").as_bytes()),
        Frame::BigNumber(Bytes::from(n))
    );
    assert_eq!(one(b"(-12\r\n"), Frame::BigNumber(Bytes::from("-12")));
    assert_eq!(err(b"(\r\n"), DecodeError::InvalidBigNumber);
    assert_eq!(err(b"(-\r\n"), DecodeError::InvalidBigNumber);
    assert_eq!(err(b"(12a\r\n"), DecodeError::InvalidBigNumber);
}

#[test]
fn bulk_errors_and_verbatim() {
    assert_eq!(
        one(b"!21\r\nSYNTAX invalid syntax\r\n"),
        Frame::BulkError(Bytes::from("SYNTAX invalid syntax"))
    );
    assert_eq!(
        one(b"=15\r\ntxt:Some string\r\n"),
        Frame::Verbatim {
            format: *b"txt",
            text: Bytes::from("Some string")
        }
    );
    assert_eq!(
        one(b"=4\r\nmkd:\r\n"),
        Frame::Verbatim {
            format: *b"mkd",
            text: Bytes::new()
        }
    );
    assert_eq!(err(b"=3\r\ntxt\r\n"), DecodeError::InvalidVerbatim);
    assert_eq!(err(b"=5\r\ntxtxy\r\n"), DecodeError::InvalidVerbatim);
}

#[test]
fn maps_sets_pushes_attributes() {
    assert_eq!(
        one(b"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n"),
        Frame::Map(vec![
            (Frame::simple("first"), Frame::Integer(1)),
            (Frame::simple("second"), Frame::Integer(2)),
        ])
    );
    assert_eq!(one(b"%0\r\n"), Frame::Map(vec![]));
    assert_eq!(
        one(b"~2\r\n+a\r\n#f\r\n"),
        Frame::Set(vec![Frame::simple("a"), Frame::Boolean(false)])
    );
    assert_eq!(one(b"~0\r\n"), Frame::Set(vec![]));
    assert_eq!(one(b">0\r\n"), Frame::Push(vec![]));
    // A push nested in a push, as a proxy might relay it.
    assert_eq!(
        one(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n>1\r\n:1\r\n"),
        Frame::Push(vec![
            b("message"),
            b("ch"),
            Frame::Push(vec![Frame::Integer(1)])
        ])
    );
    // An attribute annotates the frame that follows it.
    assert_eq!(
        one(b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.1923\r\n*2\r\n:2039123\r\n:9543892\r\n"),
        Frame::Attribute {
            attributes: vec![(
                Frame::simple("key-popularity"),
                Frame::Map(vec![(b("a"), Frame::Double(0.1923))]),
            )],
            data: Box::new(Frame::Array(vec![
                Frame::Integer(2039123),
                Frame::Integer(9543892)
            ])),
        }
    );
    // Inside an aggregate, attribute plus value count as one element.
    assert_eq!(
        one(b"*2\r\n|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n:5\r\n"),
        Frame::Array(vec![
            Frame::Attribute {
                attributes: vec![(Frame::simple("ttl"), Frame::Integer(3))],
                data: Box::new(b("v")),
            },
            Frame::Integer(5),
        ])
    );
    assert_eq!(
        one(b"|0\r\n:1\r\n"),
        Frame::Attribute {
            attributes: vec![],
            data: Box::new(Frame::Integer(1))
        }
    );
}

#[test]
fn invalid_type_byte() {
    assert_eq!(err(b"x\r\n"), DecodeError::InvalidType(b'x'));
    assert_eq!(err(b"*1\r\n\0"), DecodeError::InvalidType(0));
    // Streamed RESP3 strings/aggregates are not used by Valkey: refused.
    assert_eq!(err(b"$?\r\n"), DecodeError::InvalidLength);
    assert_eq!(err(b"*?\r\n"), DecodeError::InvalidLength);
}

#[test]
fn crlf_errors() {
    assert_eq!(err(b"$3\r\nfoo\nX"), DecodeError::MissingCrlf);
    assert_eq!(err(b"$3\r\nfoo\r\r"), DecodeError::MissingCrlf);
    assert_eq!(err(b"*1\n"), DecodeError::InvalidLength);
    assert_eq!(err(b"$3\nfoo\r\n"), DecodeError::InvalidLength);
}

#[test]
fn depth_limit() {
    let limits = Limits {
        max_depth: 3,
        ..Limits::DEFAULT
    };
    assert_eq!(frames(b"*1\r\n*1\r\n*1\r\n:1\r\n", limits).0.len(), 1);
    assert_eq!(
        err_with(b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", limits),
        DecodeError::DepthExceeded { limit: 3 }
    );
    assert_eq!(
        err_with(b"%1\r\n~1\r\n>1\r\n|1\r\n", limits),
        DecodeError::DepthExceeded { limit: 3 }
    );
    // The default depth refuses a deep bomb before building anything.
    let bomb = b"*1\r\n".repeat(100_000);
    assert_eq!(err(&bomb), DecodeError::DepthExceeded { limit: 128 });
    // Configured depths are clamped to the ceiling.
    let huge = Limits {
        max_depth: usize::MAX,
        ..Limits::DEFAULT
    };
    assert_eq!(
        err_with(&bomb, huge),
        DecodeError::DepthExceeded {
            limit: valkyrie_protocol::DEPTH_CEILING
        }
    );
}

#[test]
fn length_limits() {
    let limits = Limits {
        max_bulk: 4,
        max_aggregate: 2,
        max_line: 5,
        max_frame: 50,
        ..Limits::DEFAULT
    };
    assert_eq!(frames(b"$4\r\nabcd\r\n", limits).0, vec![b("abcd")]);
    assert_eq!(
        err_with(b"$5\r\n", limits),
        DecodeError::BulkTooLong { len: 5, limit: 4 }
    );
    assert_eq!(
        err_with(b"!5\r\n", limits),
        DecodeError::BulkTooLong { len: 5, limit: 4 }
    );
    assert_eq!(
        err_with(b"*3\r\n", limits),
        DecodeError::AggregateTooLong { len: 3, limit: 2 }
    );
    assert_eq!(
        err_with(b"%3\r\n", limits),
        DecodeError::AggregateTooLong { len: 3, limit: 2 }
    );
    assert_eq!(frames(b"+abcde\r\n", limits).0.len(), 1);
    assert_eq!(
        err_with(b"+abcdef\r\n", limits),
        DecodeError::LineTooLong { limit: 5 }
    );
    // An unterminated line is refused as soon as it is too long.
    assert_eq!(
        err_with(b"+abcdef", limits),
        DecodeError::LineTooLong { limit: 5 }
    );
    let many =
        b"*2\r\n*2\r\n*2\r\n$4\r\nabcd\r\n$4\r\nabcd\r\n*2\r\n$4\r\nabcd\r\n$4\r\nabcd\r\n:1\r\n";
    assert_eq!(
        err_with(many, limits),
        DecodeError::FrameTooLarge { limit: 50 }
    );
}

#[test]
fn pipelined_frames_consume_exactly() {
    let (f, e, rest) = frames(b"+OK\r\n:1\r\n$1\r\nx\r\n*1\r\n:2", Limits::DEFAULT);
    assert_eq!(f, vec![Frame::simple("OK"), Frame::Integer(1), b("x")]);
    assert_eq!(e, None);
    assert_eq!(rest, 6);
}

#[test]
fn trickle_is_linear_and_exact() {
    // A 1 MiB bulk and a 60 KiB line fed one byte at a time: each call does
    // O(1) work, so this finishes quickly; a rescanning decoder would need
    // ~10^11 steps.
    let payload = vec![b'x'; 1 << 20];
    let mut input = format!("${}\r\n", payload.len()).into_bytes();
    input.extend_from_slice(&payload);
    input.extend_from_slice(b"\r\n+");
    input.extend(std::iter::repeat_n(b'y', 60 * 1024));
    input.extend_from_slice(b"\r\n");
    let cuts: Vec<usize> = (0..input.len()).collect();
    let (f, e, rest) = frames_chunked(&input, &cuts, Limits::DEFAULT);
    assert_eq!(e, None);
    assert_eq!(rest, 0);
    assert_eq!(f.len(), 2);
    assert_eq!(f[0], Frame::Bulk(Bytes::from(payload)));
}

#[test]
fn strings_are_slices_of_the_read_buffer() {
    let mut decoder = FrameDecoder::new();
    let src = Bytes::from_static(b"*2\r\n$3\r\nfoo\r\n+bar\r\n");
    let (frame, used) = decoder.decode_bytes(&src).unwrap().unwrap();
    assert_eq!(used, src.len());
    let Frame::Array(items) = frame else { panic!() };
    let Frame::Bulk(foo) = &items[0] else {
        panic!()
    };
    // Same memory, not a copy.
    assert_eq!(foo.as_ptr(), src[8..].as_ptr());
}

#[test]
fn check_reports_length_without_building() {
    let mut decoder = FrameDecoder::new();
    assert_eq!(decoder.check(b"*2\r\n:1\r\n"), Ok(None));
    assert_eq!(decoder.check(b"*2\r\n:1\r\n:2\r\n+next"), Ok(Some(12)));
    assert_eq!(decoder.check(b"+next\r\n"), Ok(Some(7)));
}

#[test]
fn decoder_resets_after_error() {
    let mut decoder = FrameDecoder::new();
    let mut buf = BytesMut::from(&b"*2\r\n:1\r\n?"[..]);
    assert_eq!(
        decoder.decode(&mut buf),
        Err(DecodeError::InvalidType(b'?'))
    );
    let mut buf = BytesMut::from(&b":5\r\n"[..]);
    assert_eq!(decoder.decode(&mut buf), Ok(Some(Frame::Integer(5))));
}
