//! `VALKYRIE READINESS` as requested: the parse and its errors, every
//! group or the named ones, the group without a verdict yet, the bounds on
//! what a client may ask for, and a real core's verdict read through.

use std::sync::Arc;

use valkyrie_protocol::Frame;

use super::super::valkyrie::{Subcommand, readiness, verdict_map};
use super::valkyrie_map::{Fields, addr, fields, held, owned, verdict};
use crate::core::{Core, GroupSpec, Reason, Settings};
use crate::topology::tests::group;
use crate::topology::{Advertiser, Topology};

fn topology(names: &[&str], verdicts: &[&str]) -> Topology {
    Topology {
        groups: names
            .iter()
            .map(|n| (n.to_string(), Arc::new(group(0, 7000, &[7001]))))
            .collect(),
        readiness: verdicts
            .iter()
            .map(|n| (n.to_string(), Arc::new(verdict(held(), 5_000))))
            .collect(),
        ..Topology::default()
    }
}

fn names_of(reply: &Frame) -> Vec<String> {
    match reply {
        Frame::Array(maps) => maps.iter().map(|m| fields(m).0[0].1.clone()).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn a_group_without_a_verdict_yet_is_unknown_with_the_same_fields() {
    let t = topology(&["a"], &[]);
    let reply = readiness(&t, &[b"a"]);
    let (scalars, holds, replicas) = fields(&reply);
    let (known, _, _) = fields(&verdict_map("a", Some(&verdict(held(), 0))));
    let keys = |f: &Fields| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&scalars), keys(&known));
    assert_eq!(
        scalars[1..3],
        owned(&[("ready", "0"), ("reason", "unknown")])
    );
    assert!(holds.is_empty() && replicas.is_empty());
}

#[test]
fn no_names_is_every_group_in_name_order_and_several_keep_theirs() {
    let t = topology(&["b", "a", "c"], &["a", "b", "c"]);
    assert_eq!(names_of(&readiness(&t, &[])), ["a", "b", "c"]);
    // One name: the map itself.
    assert!(matches!(readiness(&t, &[b"b"]), Frame::Map(_)));
    assert_eq!(names_of(&readiness(&t, &[b"c", b"a"])), ["c", "a"]);
    // A name repeated is answered each time, within the bound.
    assert_eq!(
        names_of(&readiness(&t, &[b"a", b"a", b"a"])),
        ["a", "a", "a"]
    );
    // No group: an empty array, and any name is unknown.
    let empty = Topology::default();
    assert_eq!(readiness(&empty, &[]), Frame::Array(vec![]));
    assert_eq!(
        readiness(&empty, &[b"a"]),
        Frame::error("ERR No such master with that name")
    );
}

#[test]
fn hostile_names_get_bounded_errors() {
    let t = topology(&["a", "b"], &["a", "b"]);
    let no_such = Frame::error("ERR No such master with that name");
    assert_eq!(readiness(&t, &[b"nosuch"]), no_such);
    // One unknown name fails the request.
    assert_eq!(readiness(&t, &[b"a", b"nosuch"]), no_such);
    // Not UTF-8, or huge: unknown, and the error does not echo it.
    assert_eq!(readiness(&t, &[b"\xff\xfe"]), no_such);
    let huge = vec![b'a'; 1 << 20];
    assert_eq!(readiness(&t, &[&huge]), no_such);
    // More names than groups: refused before anything is built.
    let many: Vec<&[u8]> = vec![b"a"; 10_000];
    assert_eq!(
        readiness(&t, &many),
        Frame::error("ERR too many names: at most 2 (the number of groups) per request")
    );
}

#[test]
fn the_subcommands_parse_with_the_containers_errors() {
    let args: &[&[u8]] = &[b"VALKYRIE", b"Readiness", b"a", b"b"];
    assert_eq!(
        Subcommand::parse(args),
        Ok(Subcommand::Readiness {
            names: &[b"a", b"b"]
        })
    );
    assert_eq!(
        Subcommand::parse(&[b"valkyrie", b"READINESS"]),
        Ok(Subcommand::Readiness { names: &[] })
    );
    assert_eq!(
        Subcommand::parse(&[b"valkyrie", b"help"]),
        Ok(Subcommand::Help)
    );
    assert_eq!(
        Subcommand::parse(&[b"valkyrie"]),
        Err(Frame::error(
            "ERR wrong number of arguments for 'valkyrie' command"
        ))
    );
    assert_eq!(
        Subcommand::parse(&[b"valkyrie", b"help", b"x"]),
        Err(Frame::error(
            "ERR wrong number of arguments for 'valkyrie|help' command"
        ))
    );
    // PAUSE and RESUME need a pattern.
    assert_eq!(
        Subcommand::parse(&[b"valkyrie", b"pause"]),
        Err(Frame::error(
            "ERR wrong number of arguments for 'valkyrie|pause' command"
        ))
    );
    assert_eq!(
        Subcommand::parse(&[b"VALKYRIE", b"Resume", b"a*", b"b"]),
        Ok(Subcommand::Pause {
            patterns: &[&b"a*"[..], b"b"],
            paused: false
        })
    );
    for sub in [&b"suspend"[..], b"x|y", b"readiness|help"] {
        let expected = format!(
            "ERR unknown subcommand '{}'. Try VALKYRIE HELP.",
            String::from_utf8_lossy(sub)
        );
        assert_eq!(
            Subcommand::parse(&[b"valkyrie", sub]),
            Err(Frame::error(expected))
        );
    }
}

#[test]
fn a_real_cores_verdict_reads_through() {
    let spec = GroupSpec {
        name: "g".into(),
        master: addr(6379),
        quorum: 1,
        down_after: 1_000,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![addr(6380), addr(6381)],
    };
    let (core, _) = Core::new(Settings::new("0".repeat(40)), vec![spec], None, 0);
    let t = Advertiser::new(&core, 0).topology();
    let v = &t.readiness["g"];
    let (scalars, holds, replicas) = fields(&readiness(&t, &[b"g"]));
    let get = |k: &str| scalars.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
    // Nothing has reported yet: held back, for the core's reasons.
    assert_eq!(get("ready"), Some("0".into()));
    assert_eq!(get("reason"), Some(v.readiness.label().to_string()));
    assert_eq!(get("text"), Some(v.text()));
    let labels: Vec<&str> = v.readiness.holds.iter().map(Reason::label).collect();
    assert_eq!(holds, labels);
    assert!(!holds.is_empty());
    assert_eq!(replicas.len(), 2);
    for r in &replicas {
        assert_eq!(r[1], ("eligible".into(), "0".into()), "{r:?}");
        assert_eq!(r[4], ("offset".into(), String::new()), "{r:?}");
    }
}
