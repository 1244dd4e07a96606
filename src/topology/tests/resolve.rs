//! Resolving selections against a topology: the sorted union of names,
//! globs and a label selector, which selects only the resources' groups,
//! and the errors (an unknown name, nothing matched, too much asked).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::group;
use super::selection::{labels, sel};
use crate::topology::{MAX_GLOBS, MAX_NAMES, Selection, SelectionError, Topology};

/// Config groups `a`, `b`; resource groups `shop.cache` (tier=cache),
/// `shop.queue` (tier=queue) and `shop.bare` (no labels).
fn topology() -> Topology {
    let view = |l: Option<BTreeMap<String, String>>| {
        let mut g = group(0, 7000, &[]);
        g.managed = l.is_some();
        g.labels = Arc::new(l.unwrap_or_default());
        Arc::new(g)
    };
    let groups = [
        ("a", None),
        ("b", None),
        ("shop.cache", Some(labels(&[("tier", "cache")]))),
        ("shop.queue", Some(labels(&[("tier", "queue")]))),
        ("shop.bare", Some(labels(&[]))),
    ];
    Topology {
        groups: groups
            .into_iter()
            .map(|(n, l)| (n.to_string(), view(l)))
            .collect(),
        ..Topology::default()
    }
}

fn selection(names: &[&str], globs: &[&str], selector: Option<&str>) -> Selection {
    Selection {
        names: names.iter().map(|s| s.to_string()).collect(),
        globs: globs.iter().map(|s| s.to_string()).collect(),
        selector: selector.map(sel),
    }
}

#[test]
fn resolving_is_the_sorted_union_of_names_globs_and_selector() {
    let t = topology();
    let resolve = |s: Selection| s.resolve(&t);
    let ok = |v: &[&str]| Ok(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(resolve(selection(&["b", "a"], &[], None)), ok(&["a", "b"]));
    assert_eq!(
        resolve(selection(&[], &["shop.*"], None)),
        ok(&["shop.bare", "shop.cache", "shop.queue"])
    );
    assert_eq!(
        resolve(selection(&[], &[], Some("tier=cache"))),
        ok(&["shop.cache"])
    );
    // Union, each once.
    assert_eq!(
        resolve(selection(
            &["a", "shop.cache"],
            &["?"],
            Some("tier in (cache,queue)")
        )),
        ok(&["a", "b", "shop.cache", "shop.queue"])
    );
    // A selector selects only the resources' groups: `!tier` is not `a`.
    assert_eq!(
        resolve(selection(&[], &[], Some("!tier"))),
        ok(&["shop.bare"])
    );
    assert_eq!(
        resolve(selection(&[], &[], Some("tier!=cache"))),
        ok(&["shop.bare", "shop.queue"])
    );
    // `*` is everything.
    assert_eq!(
        resolve(selection(&[], &["*"], None)).map(|v| v.len()),
        Ok(5)
    );
}

#[test]
fn resolving_refuses_unknown_names_empty_matches_and_too_much() {
    let t = topology();
    let resolve = |s: Selection| s.resolve(&t);
    assert_eq!(
        resolve(selection(&["a", "nosuch"], &["*"], None)),
        Err(SelectionError::NoSuchGroup("\"nosuch\"".into()))
    );
    let nothing = resolve(selection(&[], &["x*"], Some("tier=db"))).unwrap_err();
    assert_eq!(
        nothing.to_string(),
        "no group matches the globs \"x*\" or the label selector \"tier=db\""
    );
    assert_eq!(
        resolve(Selection::default()).unwrap_err().to_string(),
        "no group matches an empty selection"
    );
    let many = Selection {
        names: vec!["a".into(); MAX_NAMES + 1],
        ..Selection::default()
    };
    assert_eq!(
        resolve(many).unwrap_err().to_string(),
        format!("too many names: at most {MAX_NAMES}")
    );
    let many = Selection {
        globs: vec!["a".into(); MAX_GLOBS + 1],
        ..Selection::default()
    };
    assert!(matches!(
        resolve(many),
        Err(SelectionError::TooMany { what: "globs", .. })
    ));
    let long = Selection {
        globs: vec!["*".repeat(5000)],
        ..Selection::default()
    };
    assert!(matches!(
        resolve(long),
        Err(SelectionError::TooMany {
            what: "bytes in a glob",
            ..
        })
    ));
    // Within the bounds, many names are fine.
    let within = Selection {
        names: vec!["a".into(); MAX_NAMES],
        ..Selection::default()
    };
    assert_eq!(resolve(within), Ok(vec!["a".to_string()]));
}
