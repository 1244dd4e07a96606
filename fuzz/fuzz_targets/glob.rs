//! Valkey's glob matcher (`valkyrie_protocol::glob`) against a reference
//! written another way (tokens, then memoised recursion; shared with the
//! protocol crate's proptest): the first byte splits the input into a
//! pattern and a text, each at most 256 bytes (so the pattern stays under
//! Valkey's 1000-star limit, which the reference does not model); the
//! two must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use valkyrie_protocol::glob::matches;

#[path = "../../protocol/tests/common/glob_reference.rs"]
mod glob_reference;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cut).min(rest.len());
    let (pattern, text) = rest.split_at(cut);
    if text.len() > 256 {
        return;
    }
    assert_eq!(
        matches(pattern, text),
        glob_reference::reference_matches(pattern, text),
        "pattern {:?} text {:?}",
        String::from_utf8_lossy(pattern),
        String::from_utf8_lossy(text)
    );
});
