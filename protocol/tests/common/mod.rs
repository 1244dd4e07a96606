//! Helpers shared by the protocol tests.
#![allow(dead_code)]

use bytes::BytesMut;
use valkyrie_protocol::{DecodeError, Frame, FrameDecoder, Limits, Request, RequestDecoder};

/// Decodes every frame of `input` given whole; stops at the first error.
pub fn frames(input: &[u8], limits: Limits) -> (Vec<Frame>, Option<DecodeError>, usize) {
    let mut decoder = FrameDecoder::with_limits(limits);
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(f)) => out.push(f),
            Ok(None) => return (out, None, buf.len()),
            Err(e) => return (out, Some(e), buf.len()),
        }
    }
}

/// Decodes `input` fed in pieces cut at `cuts` (offsets, any order).
pub fn frames_chunked(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> (Vec<Frame>, Option<DecodeError>, usize) {
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
                Err(e) => return (out, Some(e), buf.len() + input.len() - fed),
            }
        }
    }
    (out, None, buf.len())
}

/// One frame from a complete input that holds exactly one frame.
pub fn one(input: &[u8]) -> Frame {
    let (mut f, err, rest) = frames(input, Limits::DEFAULT);
    assert_eq!(
        err,
        None,
        "error decoding {:?}",
        String::from_utf8_lossy(input)
    );
    assert_eq!(
        rest,
        0,
        "leftover bytes decoding {:?}",
        String::from_utf8_lossy(input)
    );
    assert_eq!(f.len(), 1);
    f.remove(0)
}

/// The error `input` produces.
pub fn err(input: &[u8]) -> DecodeError {
    let (_, e, _) = frames(input, Limits::DEFAULT);
    e.unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(input)))
}

/// The error `input` produces under `limits`.
pub fn err_with(input: &[u8], limits: Limits) -> DecodeError {
    let (_, e, _) = frames(input, limits);
    e.unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(input)))
}

/// Every request of `input` (fed whole), as argument vectors.
pub fn requests(input: &[u8], limits: Limits) -> (Vec<Request>, Option<DecodeError>) {
    let mut decoder = RequestDecoder::with_limits(limits);
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(r)) => out.push(r),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// Every request of `input` fed one byte at a time.
pub fn requests_trickled(input: &[u8], limits: Limits) -> (Vec<Request>, Option<DecodeError>) {
    let mut decoder = RequestDecoder::with_limits(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for &b in input {
        buf.extend_from_slice(&[b]);
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

/// Argument vectors as lossy strings, for readable assertions.
pub fn argv(reqs: &[Request]) -> Vec<Vec<String>> {
    reqs.iter()
        .map(|r| {
            r.args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .collect()
}
