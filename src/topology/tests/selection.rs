//! Label selectors: every operator and their conjunction, the canonical
//! text, malformed selectors each with its error, and the bounds
//! (resolving selections: `resolve.rs`).

use std::collections::BTreeMap;

use crate::topology::{LabelSelector, MAX_REQUIREMENTS, MAX_SELECTOR_BYTES, SelectionError};

pub(super) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn sel(text: &str) -> LabelSelector {
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"))
}

fn err(text: &str) -> SelectionError {
    match text.parse::<LabelSelector>() {
        Ok(s) => panic!("{text:?} parses as {s}"),
        Err(e) => e,
    }
}

#[test]
fn every_operator_matches_as_in_kubernetes() {
    let cache = labels(&[("tier", "cache"), ("env", "prod")]);
    let queue = labels(&[("tier", "queue")]);
    let none = labels(&[]);
    let cases: &[(&str, [bool; 3])] = &[
        ("tier=cache", [true, false, false]),
        ("tier==cache", [true, false, false]),
        // Absent counts as "not equal", as in Kubernetes.
        ("tier!=cache", [false, true, true]),
        ("tier in (cache, other)", [true, false, false]),
        ("tier in (cache,queue)", [true, true, false]),
        ("tier notin (cache)", [false, true, true]),
        ("env", [true, false, false]),
        ("!env", [false, true, true]),
        // `k=` is the empty value.
        ("tier=", [false, false, false]),
        ("tier!=", [true, true, true]),
    ];
    for (text, want) in cases {
        let s = sel(text);
        let got = [&cache, &queue, &none].map(|l| s.matches(l));
        assert_eq!(&got, want, "{text}");
    }
    assert!(sel("tier=").matches(&labels(&[("tier", "")])));
}

#[test]
fn commas_are_and_and_the_text_round_trips() {
    let s = sel("tier in (cache,queue), !canary ,env=prod");
    assert!(s.matches(&labels(&[("tier", "cache"), ("env", "prod")])));
    assert!(!s.matches(&labels(&[("tier", "cache"), ("env", "dev")])));
    assert!(!s.matches(&labels(&[
        ("tier", "queue"),
        ("env", "prod"),
        ("canary", "1")
    ])));
    assert_eq!(s.to_string(), "tier in (cache,queue),!canary,env=prod");
    for text in [
        "a=b",
        "a!=b",
        "a in (x,y)",
        "a notin (x)",
        "a",
        "!a",
        "example.com/a-b_c.d=V.1",
    ] {
        assert_eq!(sel(text).to_string(), text);
        assert_eq!(sel(&sel(text).to_string()), sel(text));
    }
    // Keywords are keys where a key is expected; spaces are optional.
    assert!(sel("in=notin").matches(&labels(&[("in", "notin")])));
    assert_eq!(sel("a in(x)"), sel("a in (x)"));
    assert_eq!(sel("a==b"), sel(" a = b "));
}

#[test]
fn malformed_selectors_say_what_is_wrong() {
    use SelectionError::*;
    let syntax = |at, expected, found: &str| Syntax {
        at,
        expected,
        found: found.into(),
    };
    let after_key = "an operator (=, ==, !=, in, notin), \",\" or the end";
    let cases: Vec<(&str, SelectionError)> = vec![
        ("", EmptySelector),
        ("  \t ", EmptySelector),
        ("=cache", syntax(0, "a label key", "\"=\"")),
        ("tier=cache,", syntax(11, "a label key", "the end")),
        ("a,,b", syntax(2, "a label key", "\",\"")),
        (
            "tier=cache env=prod",
            syntax(11, "\",\" or the end", "\"env\""),
        ),
        ("tier cache", syntax(5, after_key, "\"cache\"")),
        ("tier (a)", syntax(5, after_key, "\"(\"")),
        ("!tier=cache", syntax(5, "\",\" or the end", "\"=\"")),
        ("tier in", syntax(7, "\"(\"", "the end")),
        ("tier in cache", syntax(8, "\"(\"", "\"cache\"")),
        ("tier in (a", syntax(10, "\",\" or \")\"", "the end")),
        ("tier in (a b)", syntax(11, "\",\" or \")\"", "\"b\"")),
        ("tier in (a,)", syntax(11, "a label value", "\")\"")),
        ("tier in ()", EmptySet("\"tier\"".into())),
        ("tier notin ( )", EmptySet("\"tier\"".into())),
        ("replicas>3", Comparison(8)),
        ("replicas < 3", Comparison(9)),
    ];
    for (text, want) in cases {
        assert_eq!(err(text), want, "{text:?}");
    }
    let key = |text: &str| match err(text) {
        Key { why, .. } => why,
        other => panic!("{text:?}: {other:?}"),
    };
    assert_eq!(
        key("-tier=a"),
        "it must start and end with a letter or a digit"
    );
    assert_eq!(
        key("ti@r"),
        "only letters, digits, '-', '_' and '.' are allowed"
    );
    assert_eq!(key(&"k".repeat(64)), "longer than 63 characters");
    assert_eq!(key("/tier"), "the prefix before '/' is empty");
    assert_eq!(key("example.com/"), "the name is empty");
    assert!(key("Example.com/tier").starts_with("the prefix must be a DNS subdomain"));
    assert!(key("a..b/tier").starts_with("the prefix must be a DNS subdomain"));
    assert_eq!(
        key(&format!("{}/t", "a".repeat(254))),
        "the prefix is longer than 253 characters"
    );
    assert!(key("a/b/c").starts_with("at most one '/'"));
    let value = |text: &str| match err(text) {
        Value { why, .. } => why,
        other => panic!("{text:?}: {other:?}"),
    };
    assert_eq!(
        value("tier=-a"),
        "it must start and end with a letter or a digit"
    );
    assert_eq!(
        value("tier in (a,b/c)"),
        "only letters, digits, '-', '_' and '.' are allowed"
    );
    assert_eq!(
        value(&format!("t={}", "v".repeat(64))),
        "longer than 63 characters"
    );
    // The messages an operator reads; hostile input is quoted and cut.
    assert_eq!(
        err("tier in ()").to_string(),
        "bad label selector: \"tier\" in () or notin () needs at least one value"
    );
    let long = err(&format!("t=\u{1}{}", "v".repeat(100))).to_string();
    assert!(
        long.contains("\"\\u{1}vvv") && long.contains("…") && long.len() < 250,
        "{long}"
    );
}

#[test]
fn selectors_are_bounded() {
    let n = |count: usize| vec!["k"; count].join(",");
    assert_eq!(sel(&n(MAX_REQUIREMENTS)).to_string(), n(MAX_REQUIREMENTS));
    assert_eq!(
        err(&n(MAX_REQUIREMENTS + 1)),
        SelectionError::TooManyRequirements
    );
    let long = format!("k={}", " ".repeat(MAX_SELECTOR_BYTES));
    assert_eq!(err(&long), SelectionError::SelectorTooLong(long.len()));
    assert_eq!(
        err(&long).to_string(),
        "the label selector is 4098 bytes long: at most 4096"
    );
    // 63 characters is the most a value or name may have.
    assert!(
        sel(&format!("{}={}", "k".repeat(63), "v".repeat(63)))
            .matches(&labels(&[(&"k".repeat(63), &"v".repeat(63))]))
    );
}
