//! Decoding arbitrary bytes never panics, and everything it returns
//! respects the limits: depth, lengths, lines, and preallocation.
#![no_main]

#[path = "common.rs"]
mod common;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use valkyrie_protocol::{FrameDecoder, Limits, RequestDecoder};

fuzz_target!(|data: &[u8]| {
    for limits in [common::SMALL, Limits::DEFAULT, Limits::UNAUTHENTICATED] {
        let mut decoder = FrameDecoder::with_limits(limits);
        let mut buf = BytesMut::from(data);
        while let Ok(Some(frame)) = decoder.decode(&mut buf) {
            common::within(&frame, &limits, 0);
        }
        assert!(decoder.reserve_hint() <= limits.max_prealloc);

        let mut requests = RequestDecoder::with_limits(limits);
        let mut buf = BytesMut::from(data);
        while let Ok(Some(req)) = requests.decode(&mut buf) {
            assert!(!req.args.is_empty());
            assert!(req.args.len() <= limits.max_aggregate);
        }
        assert!(requests.reserve_hint() <= limits.max_prealloc);
    }
});
