//! Any split of the input into chunks yields exactly the frames (and
//! requests) of the whole input, followed by the same error if any.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use valkyrie_protocol::Limits;

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the cut points; the rest is the stream.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 16);
    if rest.len() < n {
        return;
    }
    let (cut_bytes, input) = rest.split_at(n);
    let cuts: Vec<usize> = cut_bytes
        .iter()
        .map(|&c| usize::from(c) * (input.len() + 1) / 256)
        .collect();
    let every: Vec<usize> = (0..input.len()).collect();
    for limits in [common::SMALL, Limits::DEFAULT] {
        let whole = common::frames(input, limits);
        assert_eq!(common::frames_chunked(input, &cuts, limits), whole);
        assert_eq!(common::frames_chunked(input, &every, limits), whole);
        let whole = common::requests_chunked(input, &[], limits);
        assert_eq!(common::requests_chunked(input, &cuts, limits), whole);
        assert_eq!(common::requests_chunked(input, &every, limits), whole);
    }
});
