//! Shared by the fuzz targets: small limits so every limit is reachable,
//! and helpers to decode a whole input or the same input in pieces.
#![allow(dead_code)]

use bytes::BytesMut;
use valkyrie_protocol::{DecodeError, Frame, FrameDecoder, Limits, Request, RequestDecoder};

/// Limits small enough that fuzzed inputs hit every one of them.
pub const SMALL: Limits = Limits {
    max_depth: 8,
    max_bulk: 64,
    max_aggregate: 16,
    max_line: 48,
    max_frame: 1024,
    max_prealloc: 32,
};

pub type Outcome = (Vec<Frame>, Option<DecodeError>);

pub fn frames(input: &[u8], limits: Limits) -> Outcome {
    frames_chunked(input, &[], limits)
}

pub fn frames_chunked(input: &[u8], cuts: &[usize], limits: Limits) -> Outcome {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
    cuts.push(input.len());
    cuts.sort_unstable();
    let mut decoder = FrameDecoder::with_limits(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for cut in cuts {
        buf.extend_from_slice(&input[fed..cut]);
        fed = cut;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(f)) => out.push(f),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

pub fn requests_chunked(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> (Vec<Request>, Option<DecodeError>) {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
    cuts.push(input.len());
    cuts.sort_unstable();
    let mut decoder = RequestDecoder::with_limits(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for cut in cuts {
        buf.extend_from_slice(&input[fed..cut]);
        fed = cut;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

/// Checks that a decoded frame respects `limits`.
pub fn within(frame: &Frame, limits: &Limits, depth: usize) {
    let agg = |n: usize| {
        assert!(
            depth < limits.max_depth,
            "depth {} over {}",
            depth + 1,
            limits.max_depth
        );
        assert!(
            n <= limits.max_aggregate,
            "aggregate {n} over {}",
            limits.max_aggregate
        );
    };
    match frame {
        Frame::Bulk(b) | Frame::BulkError(b) => assert!(b.len() <= limits.max_bulk),
        Frame::Verbatim { text, .. } => assert!(text.len() + 4 <= limits.max_bulk),
        Frame::Simple(b) | Frame::Error(b) | Frame::BigNumber(b) => {
            assert!(b.len() <= limits.max_line)
        }
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => {
            agg(v.len());
            v.iter().for_each(|f| within(f, limits, depth + 1));
        }
        Frame::Map(v) => {
            agg(v.len());
            v.iter().for_each(|(k, x)| {
                within(k, limits, depth + 1);
                within(x, limits, depth + 1);
            });
        }
        Frame::Attribute { attributes, data } => {
            agg(attributes.len());
            attributes.iter().for_each(|(k, x)| {
                within(k, limits, depth + 1);
                within(x, limits, depth + 1);
            });
            within(data, limits, depth + 1);
        }
        _ => {}
    }
}

/// RESP2's `$-1` and `*-1` become `_` in a RESP3 roundtrip.
pub fn as_resp3(f: &Frame) -> Frame {
    match f {
        Frame::NullBulk | Frame::NullArray => Frame::Null,
        Frame::Array(v) => Frame::Array(v.iter().map(as_resp3).collect()),
        Frame::Set(v) => Frame::Set(v.iter().map(as_resp3).collect()),
        Frame::Push(v) => Frame::Push(v.iter().map(as_resp3).collect()),
        Frame::Map(v) => Frame::Map(v.iter().map(|(k, x)| (as_resp3(k), as_resp3(x))).collect()),
        Frame::Attribute { attributes, data } => Frame::Attribute {
            attributes: attributes
                .iter()
                .map(|(k, x)| (as_resp3(k), as_resp3(x)))
                .collect(),
            data: Box::new(as_resp3(data)),
        },
        other => other.clone(),
    }
}
