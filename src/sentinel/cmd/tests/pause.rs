//! `VALKYRIE PAUSE|RESUME SELECTOR <selector>`: the parse (the keyword in
//! any case, a group named SELECTOR still reachable by a glob), the
//! groups a selector selects, and the errors a client reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use valkyrie_protocol::Frame;

use super::super::pause::{matching, selected};
use super::super::valkyrie::Subcommand;
use crate::topology::Topology;
use crate::topology::tests::group;

/// `SELECTOR` and `plain` (configuration groups), `shop.cache`
/// (tier=cache) and `shop.queue` (tier=queue), owned by resources.
fn topology() -> Topology {
    let view = |labels: Option<&[(&str, &str)]>| {
        let mut g = group(0, 7000, &[]);
        g.managed = labels.is_some();
        let map: BTreeMap<String, String> = labels
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        g.labels = Arc::new(map);
        Arc::new(g)
    };
    let groups = [
        ("SELECTOR", None),
        ("plain", None),
        ("shop.cache", Some(&[("tier", "cache")][..])),
        ("shop.queue", Some(&[("tier", "queue")][..])),
    ];
    Topology {
        groups: groups
            .into_iter()
            .map(|(n, l)| (n.to_string(), view(l)))
            .collect(),
        ..Topology::default()
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn selector_is_a_keyword_in_any_case_and_the_glob_still_reaches_the_group() {
    assert_eq!(
        Subcommand::parse(&[b"VALKYRIE", b"PAUSE", b"Selector", b"tier=cache"]),
        Ok(Subcommand::PauseSelector {
            selector: &[b"tier=cache"],
            paused: true
        })
    );
    assert_eq!(
        Subcommand::parse(&[
            b"valkyrie",
            b"resume",
            b"selector",
            b"tier",
            b"in",
            b"(a,b)"
        ]),
        Ok(Subcommand::PauseSelector {
            selector: &[&b"tier"[..], b"in", b"(a,b)"],
            paused: false
        })
    );
    // The keyword alone: no selector (an error when run, below).
    assert_eq!(
        Subcommand::parse(&[b"valkyrie", b"pause", b"SELECTOR"]),
        Ok(Subcommand::PauseSelector {
            selector: &[],
            paused: true
        })
    );
    // Only as the first argument; a glob reaches a group so named.
    assert_eq!(
        Subcommand::parse(&[b"valkyrie", b"pause", b"[S]ELECTOR", b"SELECTOR"]),
        Ok(Subcommand::Pause {
            patterns: &[&b"[S]ELECTOR"[..], b"SELECTOR"],
            paused: true
        })
    );
    assert_eq!(
        matching(&topology(), &[b"[S]ELECTOR"]),
        names(&["SELECTOR"])
    );
}

#[test]
fn a_selector_selects_the_resources_groups_whose_labels_match() {
    let t = topology();
    assert_eq!(selected(&t, &[b"tier=cache"]), Ok(names(&["shop.cache"])));
    assert_eq!(
        selected(&t, &[b"tier", b"in", b"(cache,", b"queue)"]),
        Ok(names(&["shop.cache", "shop.queue"]))
    );
    // Configuration groups have no labels, and are never selected.
    assert_eq!(
        selected(&t, &[b"!canary"]),
        Ok(names(&["shop.cache", "shop.queue"]))
    );
}

#[test]
fn a_bad_or_empty_selector_is_an_error_the_operator_can_read() {
    let t = topology();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[],
            "ERR SELECTOR needs a label selector, such as tier=cache \
             (a group named SELECTOR: use the glob [S]ELECTOR)",
        ),
        (
            &[b""],
            "ERR the label selector is empty (it would select every group; the glob * does that)",
        ),
        (
            &[b"tier=db"],
            "ERR no group matches the label selector \"tier=db\"",
        ),
        (
            &[b"tier", b"in"],
            "ERR bad label selector at byte 7: expected \"(\", found the end",
        ),
        (&[b"\xff"], "ERR bad label selector: it is not UTF-8"),
        (
            &[b"tier>1"],
            "ERR bad label selector at byte 4: the operators < and > are not supported",
        ),
    ];
    for (words, want) in cases {
        assert_eq!(selected(&t, words), Err(Frame::error(*want)), "{words:?}");
    }
    let many: Vec<&[u8]> = vec![b"k"; 65];
    assert_eq!(
        selected(&t, &many),
        Err(Frame::error(
            "ERR too many arguments: at most 64 (quote the selector)"
        ))
    );
}
