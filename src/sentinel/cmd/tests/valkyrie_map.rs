//! `VALKYRIE READINESS`'s verdict map: every field in its fixed order,
//! peer mode and alone, with a candidate and without; and the helpers
//! that read a map back (shared with `valkyrie`).

use valkyrie_protocol::Frame;

use super::super::valkyrie::verdict_map;
use crate::core::select::Skip;
use crate::core::{
    Addr, AdminError, Candidate, FenceView, QuorumView, Readiness, Reason, ReplicaVerdict, Trigger,
};
use crate::topology::Verdict;

pub(super) fn addr(port: u16) -> Addr {
    Addr::new("127.0.0.1", port)
}

/// The scalar fields of a verdict map, in order, and its `holds` and
/// `replicas` (each replica's fields in order).
pub(super) type Fields = Vec<(String, String)>;

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

fn pairs(f: &Frame) -> &[(Frame, Frame)] {
    match f {
        Frame::Map(pairs) => pairs,
        other => panic!("not a map: {other:?}"),
    }
}

pub(super) fn fields(f: &Frame) -> (Fields, Vec<String>, Vec<Fields>) {
    let (mut scalars, mut holds, mut replicas) = (Vec::new(), Vec::new(), Vec::new());
    for (k, v) in pairs(f) {
        match (text(k).as_str(), v) {
            ("holds", Frame::Array(items)) => holds = items.iter().map(text).collect(),
            ("replicas", Frame::Array(items)) => {
                replicas = items
                    .iter()
                    .map(|r| pairs(r).iter().map(|(k, v)| (text(k), text(v))).collect())
                    .collect();
            }
            (k, v) => scalars.push((k.to_string(), text(v))),
        }
    }
    (scalars, holds, replicas)
}

pub(super) fn owned(expected: &[(&str, &str)]) -> Fields {
    expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn verdict(readiness: Readiness, at: u64) -> Verdict {
    Verdict {
        readiness,
        at,
        wall_ms: 1_700_000_000_000,
    }
}

/// A group held back by a window, in peer mode, with one replica at
/// priority 0 and one that may be promoted.
pub(super) fn held() -> Readiness {
    Readiness {
        ready: false,
        holds: vec![
            Reason::Window { until: 7_500 },
            Reason::Tilt {
                since: 1_000,
                until: None,
            },
        ],
        trigger: Trigger::Odown,
        candidate: Some(Candidate {
            addr: addr(6380),
            priority: 100,
            offset: 5_000,
            lag_bytes: None,
        }),
        replicas: vec![
            ReplicaVerdict {
                addr: addr(6380),
                priority: Some(100),
                offset: Some(5_000),
                skip: None,
            },
            ReplicaVerdict {
                addr: addr(6381),
                priority: Some(0),
                offset: None,
                skip: Some(Skip::PriorityZero),
            },
        ],
        quorum: Some(QuorumView {
            usable: 3,
            quorum: 2,
            needed: 2,
            known: 3,
        }),
        fence: FenceView::Relaxed {
            in_force: 1,
            full: 2,
        },
        witnesses: None,
        manual: Ok(addr(6380)),
    }
}

#[test]
fn the_verdict_map_holds_every_field_in_its_fixed_order() {
    let v = verdict(held(), 5_000);
    let (scalars, holds, replicas) = fields(&verdict_map("mymaster", Some(&v)));
    let text = v.text();
    assert_eq!(
        scalars,
        owned(&[
            ("name", "mymaster"),
            ("ready", "0"),
            ("reason", "window"),
            ("text", &text),
            ("trigger", "odown"),
            ("candidate", "127.0.0.1:6380"),
            ("candidate-priority", "100"),
            ("candidate-offset", "5000"),
            ("candidate-lag-bytes", ""),
            ("until-ms", "2500"),
            ("tilt", "1"),
            ("usable-sentinels", "3"),
            ("quorum", "2"),
            ("votes-needed", "2"),
            ("fence", "relaxed"),
            ("fence-replicas", "1"),
            ("switchover-ready", "1"),
            ("switchover-to", "127.0.0.1:6380"),
        ])
    );
    assert!(text.starts_with("no new failover for 2.5 s"), "{text}");
    assert_eq!(holds, ["window", "tilt"]);
    assert_eq!(
        replicas,
        [
            owned(&[
                ("addr", "127.0.0.1:6380"),
                ("eligible", "1"),
                ("reason", ""),
                ("priority", "100"),
                ("offset", "5000"),
            ]),
            owned(&[
                ("addr", "127.0.0.1:6381"),
                ("eligible", "0"),
                ("reason", "priority_zero"),
                ("priority", "0"),
                ("offset", ""),
            ]),
        ]
    );
}

#[test]
fn a_lone_ready_group_and_one_without_a_candidate() {
    let ready = Readiness {
        ready: true,
        holds: vec![],
        candidate: held().candidate.map(|c| Candidate {
            lag_bytes: Some(14),
            ..c
        }),
        quorum: None,
        fence: FenceView::InForce { replicas: 2 },
        ..held()
    };
    let (scalars, holds, _) = fields(&verdict_map("m", Some(&verdict(ready, 0))));
    let get = |k: &str| {
        scalars
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("ready"), Some("1"));
    assert_eq!(get("reason"), Some("ready"));
    assert_eq!(
        get("text"),
        Some("ready: would promote 127.0.0.1:6380 (lag 14 B)")
    );
    assert_eq!(get("candidate-lag-bytes"), Some("14"));
    assert_eq!((get("until-ms"), get("tilt")), (Some("0"), Some("0")));
    // Alone, no quorum applies: empty.
    for k in ["usable-sentinels", "quorum", "votes-needed"] {
        assert_eq!(get(k), Some(""), "{k}");
    }
    assert_eq!(
        (get("fence"), get("fence-replicas")),
        (Some("in_force"), Some("2"))
    );
    assert!(holds.is_empty());

    let none = Readiness {
        ready: false,
        holds: vec![Reason::NoEligibleReplica],
        trigger: Trigger::LostData { replid: "x".into() },
        candidate: None,
        fence: FenceView::Off,
        manual: Err(AdminError::NoGoodReplica),
        ..held()
    };
    let (scalars, holds, _) = fields(&verdict_map("m", Some(&verdict(none, 0))));
    let get = |k: &str| {
        scalars
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("reason"), Some("no_eligible_replica"));
    assert_eq!(get("trigger"), Some("lost_data"));
    for k in [
        "candidate",
        "candidate-priority",
        "candidate-offset",
        "candidate-lag-bytes",
        "switchover-to",
    ] {
        assert_eq!(get(k), Some(""), "{k}");
    }
    assert_eq!(get("switchover-ready"), Some("0"));
    assert_eq!(
        (get("fence"), get("fence-replicas")),
        (Some("off"), Some("0"))
    );
    assert_eq!(holds, ["no_eligible_replica"]);
}
