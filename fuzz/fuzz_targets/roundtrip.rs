//! Whatever decodes re-encodes to bytes that decode to the same frame, in
//! RESP3; RESP2 output decodes and is stable under a second downgrade.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use valkyrie_protocol::{Limits, Protocol, to_bytes};

fuzz_target!(|data: &[u8]| {
    let (frames, _) = common::frames(data, Limits::DEFAULT);
    for frame in &frames {
        let wire3 = to_bytes(frame, Protocol::Resp3);
        let (back, err) = common::frames(&wire3, Limits::DEFAULT);
        assert_eq!(err, None);
        assert_eq!(back, vec![common::as_resp3(frame)]);

        let wire2 = to_bytes(frame, Protocol::Resp2);
        let (back2, err) = common::frames(&wire2, Limits::DEFAULT);
        assert_eq!(err, None);
        assert_eq!(back2.len(), 1);
        assert_eq!(to_bytes(&back2[0], Protocol::Resp2), wire2);
    }
});
