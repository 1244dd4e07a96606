//! Differential: our decoder against the `redis-protocol` crate, RESP2 and
//! RESP3, on the same bytes. Where both accept a frame they must agree on
//! its length and content; where one accepts what the other rejects, the
//! difference must be one of the deliberate ones listed in
//! docs/benchmarks.md ("Differential fuzzing").
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use redis_protocol::resp2::types::OwnedFrame as R2;
use redis_protocol::resp3::types::{OwnedFrame as R3, VerbatimStringFormat};
use valkyrie_protocol::{DecodeError, Frame, FrameDecoder};

/// A common shape both decoders' frames can be compared in.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum N {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Bool(bool),
    Double(u64),
    Big(Vec<u8>),
    BulkError(Vec<u8>),
    Verbatim(Vec<u8>, Vec<u8>),
    Array(Vec<N>),
    Map(Vec<(N, N)>),
    Set(Vec<N>),
    Push(Vec<N>),
    Attr(Vec<(N, N)>, Box<N>),
}

fn dbl(d: f64) -> u64 {
    if d.is_nan() {
        f64::NAN.to_bits()
    } else {
        d.to_bits()
    }
}

/// Ours to N; `None` when the frame holds something redis-protocol cannot
/// represent the same way (duplicate map keys or set members, which its
/// hash maps collapse; verbatim formats other than txt/mkd).
fn ours(f: &Frame) -> Option<N> {
    Some(match f {
        Frame::Simple(b) => N::Simple(b.to_vec()),
        Frame::Error(b) => N::Error(b.to_vec()),
        Frame::Integer(i) => N::Int(*i),
        Frame::Bulk(b) => N::Bulk(b.to_vec()),
        Frame::NullBulk | Frame::NullArray | Frame::Null => N::Null,
        Frame::Boolean(b) => N::Bool(*b),
        Frame::Double(d) => N::Double(dbl(*d)),
        Frame::BigNumber(b) => N::Big(b.to_vec()),
        Frame::BulkError(b) => N::BulkError(b.to_vec()),
        Frame::Verbatim { format, text } => {
            if format != b"txt" && format != b"mkd" {
                return None;
            }
            N::Verbatim(format.to_vec(), text.to_vec())
        }
        Frame::Array(v) => N::Array(v.iter().map(ours).collect::<Option<_>>()?),
        Frame::Push(v) => N::Push(v.iter().map(ours).collect::<Option<_>>()?),
        Frame::Set(v) => {
            let items: Vec<N> = v.iter().map(ours).collect::<Option<_>>()?;
            if has_dupes(&items) {
                return None;
            }
            N::Set(sorted(items))
        }
        Frame::Map(v) => N::Map(pairs(v)?),
        Frame::Attribute { attributes, data } => {
            if matches!(
                **data,
                Frame::Attribute { .. } | Frame::Null | Frame::NullBulk | Frame::NullArray
            ) {
                // redis-protocol keeps one attribute map per frame and none on null.
                return None;
            }
            N::Attr(pairs(attributes)?, Box::new(ours(data)?))
        }
    })
}

fn pairs(v: &[(Frame, Frame)]) -> Option<Vec<(N, N)>> {
    let out: Vec<(N, N)> = v
        .iter()
        .map(|(k, x)| Some((ours(k)?, ours(x)?)))
        .collect::<Option<_>>()?;
    let keys: Vec<&N> = out.iter().map(|(k, _)| k).collect();
    if keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k)) {
        return None;
    }
    Some(sorted(out))
}

/// Maps and sets compare without order: redis-protocol's hash maps do
/// not keep wire order.
fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn has_dupes(items: &[N]) -> bool {
    items
        .iter()
        .enumerate()
        .any(|(i, k)| items[..i].contains(k))
}

fn r2(f: &R2) -> N {
    match f {
        R2::SimpleString(b) => N::Simple(b.clone()),
        R2::Error(s) => N::Error(s.as_bytes().to_vec()),
        R2::Integer(i) => N::Int(*i),
        R2::BulkString(b) => N::Bulk(b.clone()),
        R2::Array(v) => N::Array(v.iter().map(r2).collect()),
        R2::Null => N::Null,
    }
}

fn r3(f: &R3) -> N {
    let (inner, attrs) = match f {
        R3::BlobString { data, attributes } => (N::Bulk(data.clone()), attributes),
        R3::BlobError { data, attributes } => (N::BulkError(data.clone()), attributes),
        R3::SimpleString { data, attributes } => (N::Simple(data.clone()), attributes),
        R3::SimpleError { data, attributes } => (N::Error(data.as_bytes().to_vec()), attributes),
        R3::Boolean { data, attributes } => (N::Bool(*data), attributes),
        R3::Null => return N::Null,
        R3::Number { data, attributes } => (N::Int(*data), attributes),
        R3::Double { data, attributes } => (N::Double(dbl(*data)), attributes),
        R3::BigNumber { data, attributes } => (N::Big(data.clone()), attributes),
        R3::VerbatimString {
            data,
            format,
            attributes,
        } => {
            let f = match format {
                VerbatimStringFormat::Text => b"txt".to_vec(),
                VerbatimStringFormat::Markdown => b"mkd".to_vec(),
            };
            (N::Verbatim(f, data.clone()), attributes)
        }
        R3::Array { data, attributes } => (N::Array(data.iter().map(r3).collect()), attributes),
        R3::Push { data, attributes } => (N::Push(data.iter().map(r3).collect()), attributes),
        R3::Set { data, attributes } => (N::Set(sorted(data.iter().map(r3).collect())), attributes),
        R3::Map { data, attributes } => (
            N::Map(sorted(data.iter().map(|(k, v)| (r3(k), r3(v))).collect())),
            attributes,
        ),
        other => panic!("redis-protocol decoded an unexpected frame kind: {other:?}"),
    };
    match attrs {
        Some(a) => N::Attr(
            sorted(a.iter().map(|(k, v)| (r3(k), r3(v))).collect()),
            Box::new(inner),
        ),
        None => inner,
    }
}

fn is_resp2(f: &Frame) -> bool {
    match f {
        Frame::Simple(_) | Frame::Error(_) | Frame::Integer(_) | Frame::Bulk(_) => true,
        Frame::NullBulk | Frame::NullArray => true,
        Frame::Array(v) => v.iter().all(is_resp2),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    let result = FrameDecoder::new().decode_bytes(&bytes);
    let mine = match &result {
        Ok(Some((f, n))) => Some((f, *n)),
        _ => None,
    };

    // RESP2.
    let theirs = redis_protocol::resp2::decode::decode(data);
    match (&mine, &theirs) {
        (Some((f, n)), Ok(Some((t, m)))) => {
            assert_eq!(n, m, "RESP2 frame length differs");
            assert_eq!(ours(f), Some(r2(t)), "RESP2 frame differs");
        }
        (None, Ok(Some((t, _)))) => {
            // We refuse or wait where redis-protocol accepts: only for its
            // known leniencies.
            if !known_leniency(&result, data) {
                panic!("redis-protocol accepts a RESP2 frame we do not: {t:?}; ours: {mine:?}");
            }
        }
        (Some((f, _)), _) if is_resp2(f) => {
            // Non-UTF-8 simple errors are valid RESP; redis-protocol keeps
            // errors as String and refuses them.
            if !has_non_utf8_error(f) {
                panic!(
                    "we accept a RESP2 frame redis-protocol does not: {f:?}; theirs: {theirs:?}"
                );
            }
        }
        _ => {}
    }

    // RESP3.
    let theirs = redis_protocol::resp3::decode::complete::decode(data);
    match (&mine, &theirs) {
        (Some((f, n)), Ok(Some((t, m)))) => {
            if let Some(norm) = ours(f) {
                assert_eq!(n, m, "RESP3 frame length differs");
                assert_eq!(norm, r3(t), "RESP3 frame differs");
            }
        }
        _ => {}
    }
});

/// Inputs redis-protocol accepts that we reject on purpose: a CR or LF
/// inside a simple string or error (RESP forbids them), a bulk payload
/// not followed by CRLF (it skips two bytes unchecked, so a desynchronised
/// stream goes unnoticed), nesting beyond our depth limit (it has none),
/// numbers written with more than 20 characters (leading zeros), and
/// lengths with a plus sign (`*+1`), both of which Valkey's own `string2ll`
/// refuses too.
fn known_leniency(result: &Result<Option<(Frame, usize)>, DecodeError>, data: &[u8]) -> bool {
    match result {
        Err(
            DecodeError::MissingCrlf | DecodeError::DepthExceeded { .. } | DecodeError::InvalidLine,
        ) => true,
        Err(DecodeError::InvalidInteger | DecodeError::InvalidLength) => {
            data.split(|b| !b.is_ascii_digit())
                .any(|run| run.len() >= 20)
                || data
                    .windows(2)
                    .any(|w| b"*$%~>|!=".contains(&w[0]) && w[1] == b'+')
        }
        _ => false,
    }
}

fn has_non_utf8_error(f: &Frame) -> bool {
    match f {
        Frame::Error(b) => std::str::from_utf8(b).is_err(),
        Frame::Array(v) => v.iter().any(has_non_utf8_error),
        _ => false,
    }
}
