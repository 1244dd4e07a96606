//! The glob matcher against a reference written another way
//! (`common/glob_reference.rs`), on patterns drawn mostly from the
//! matcher's own syntax so classes, ranges, escapes and stars meet.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/glob_reference.rs"]
mod glob_reference;

use glob_reference::reference_matches;
use proptest::prelude::*;
use valkyrie_protocol::glob::matches;

fn syntax_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            4 => prop::sample::select(b"*?[]^-\\ab".to_vec()),
            2 => prop::sample::select(b"abc]".to_vec()),
            1 => any::<u8>(),
        ],
        0..max,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn agrees_with_the_reference(pattern in syntax_bytes(16), text in syntax_bytes(16)) {
        prop_assert_eq!(
            matches(&pattern, &text),
            reference_matches(&pattern, &text),
            "pattern {:?} text {:?}",
            String::from_utf8_lossy(&pattern),
            String::from_utf8_lossy(&text)
        );
    }

    #[test]
    fn a_pattern_made_of_the_text_matches_it(text in proptest::collection::vec(any::<u8>(), 1..24)) {
        let mut pattern = Vec::new();
        for b in &text {
            pattern.push(b'\\');
            pattern.push(*b);
        }
        prop_assert!(matches(&pattern, &text));
        prop_assert!(reference_matches(&pattern, &text));
    }
}

#[test]
fn reference_agrees_on_the_known_cases() {
    for (p, t, m) in [
        ("*", "", false),
        ("", "", true),
        ("[a-]x]", "x", true),
        ("[a-]x]", "-", false),
        ("[abc", "b", true),
        ("a\\", "a\\", true),
        ("*a*b*", "xxbxxaxx", false),
    ] {
        assert_eq!(
            reference_matches(p.as_bytes(), t.as_bytes()),
            m,
            "{p} ~ {t}"
        );
        assert_eq!(matches(p.as_bytes(), t.as_bytes()), m, "{p} ~ {t}");
    }
}
