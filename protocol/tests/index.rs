//! The index protocol's wire format: exact encodings, decoding (whole and
//! trickled), compatible evolution (unknown lines and attributes skipped),
//! errors, commands, globs, and the consumer's ordering rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::BytesMut;
use proptest::prelude::*;
use valkyrie_protocol::index::wire::{
    ClientCommand, ServerDecoder, ServerMessage, escape, parse_command, unescape,
};
use valkyrie_protocol::index::{
    Greeting, GroupSnapshot, IndexError, Master, MasterState, Outcome, Pattern, Replica,
    ReplicaState, View,
};

fn snap(group: &str, epoch: u64, version: u64, master_port: u16) -> GroupSnapshot {
    GroupSnapshot {
        group: group.into(),
        epoch,
        version,
        master: Master {
            host: "127.0.0.1".into(),
            port: master_port,
            state: MasterState::Up,
            failover: None,
        },
        replicas: vec![
            Replica {
                host: "127.0.0.1".into(),
                port: 6381,
                state: ReplicaState::Up,
                offset: 1234,
                priority: 100,
            },
            Replica {
                host: "::1".into(),
                port: 6382,
                state: ReplicaState::Down,
                offset: 0,
                priority: 0,
            },
        ],
    }
}

fn decode_all(bytes: &[u8]) -> Result<Vec<ServerMessage>, IndexError> {
    let mut d = ServerDecoder::new();
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(m) = d.decode(&mut buf)? {
        out.push(m);
    }
    Ok(out)
}

fn trickle(bytes: &[u8]) -> Result<Vec<ServerMessage>, IndexError> {
    let mut d = ServerDecoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for &b in bytes {
        buf.extend_from_slice(&[b]);
        while let Some(m) = d.decode(&mut buf)? {
            out.push(m);
        }
    }
    Ok(out)
}

#[test]
fn snapshot_encoding_is_exact() {
    let mut s = snap("my master", 3, 7, 6380);
    s.master.failover = Some("wait_promotion".into());
    s.master.state = MasterState::Odown;
    let mut out = BytesMut::new();
    s.encode(&mut out);
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        "SNAPSHOT my%20master epoch=3 version=7\n\
         MASTER 127.0.0.1 6380 state=odown failover=wait_promotion\n\
         REPLICA 127.0.0.1 6381 state=up offset=1234 priority=100\n\
         REPLICA ::1 6382 state=down offset=0 priority=0\n\
         END my%20master\n"
    );
    assert_eq!(
        decode_all(&out).unwrap(),
        vec![ServerMessage::Snapshot(s.clone())]
    );
    assert_eq!(trickle(&out).unwrap(), vec![ServerMessage::Snapshot(s)]);
}

#[test]
fn every_server_message_round_trips() {
    let messages = vec![
        ServerMessage::Greeting(Greeting {
            version: 1,
            server: "abc".into(),
            run: "r1".into(),
            heartbeat_ms: 15000,
        }),
        ServerMessage::Hello(1),
        ServerMessage::Watching(3),
        ServerMessage::Snapshot(snap("g", 1, 2, 7000)),
        ServerMessage::Gone("g 2".into()),
        ServerMessage::Pong(None),
        ServerMessage::Pong(Some("t".into())),
        ServerMessage::Heartbeat,
        ServerMessage::Error {
            code: "syntax".into(),
            message: "bad thing\nhere".into(),
        },
        ServerMessage::Bye,
        ServerMessage::Mark(0),
        ServerMessage::Mark(u64::MAX),
        ServerMessage::Mark(0x3f09_c2d1_a7b4_e865),
    ];
    let mut out = BytesMut::new();
    for m in &messages {
        m.encode(&mut out);
    }
    let mut expected = messages.clone();
    // Error texts are kept on one line.
    expected[8] = ServerMessage::Error {
        code: "syntax".into(),
        message: "bad thing here".into(),
    };
    assert_eq!(decode_all(&out).unwrap(), expected);
    assert_eq!(trickle(&out).unwrap(), expected);
}

#[test]
fn unknown_lines_and_attributes_are_skipped() {
    // What a later version may add: attributes, line kinds inside and
    // outside a snapshot. A version-1 reader keeps what it knows.
    let text = b"VALKYRIE-INDEX 3 server=s run=r heartbeat=1000 zone=eu\n\
        NEWS something\n\
        SNAPSHOT g epoch=1 version=2 checksum=ff\n\
        MASTER h 1 state=up failover=none tls=yes\n\
        LABEL a=b\n\
        REPLICA h 2 state=up offset=5 priority=1 lag=3\n\
        END g\n";
    let got = decode_all(text).unwrap();
    assert_eq!(got.len(), 2);
    match &got[1] {
        ServerMessage::Snapshot(s) => {
            assert_eq!((s.epoch, s.version, s.replicas.len()), (1, 2, 1));
            assert_eq!(s.replicas[0].offset, 5);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_server_lines_are_errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"MASTER h 1 state=up\n", "MASTER outside a snapshot"),
        (
            b"SNAPSHOT g epoch=1 version=1\nEND h\n",
            "END h inside snapshot of g",
        ),
        (
            b"SNAPSHOT g epoch=1 version=1\nEND g\n",
            "snapshot without MASTER",
        ),
        (b"SNAPSHOT g epoch=1\n", "SNAPSHOT without version="),
        (b"SNAPSHOT g epoch=x version=1\n", "invalid epoch"),
        (
            b"SNAPSHOT g epoch=1 version=1\nMASTER h 99999 state=up\n",
            "invalid port",
        ),
        (
            b"SNAPSHOT g epoch=1 version=1\nMASTER h 1 state=sideways\n",
            "master state sideways",
        ),
        (
            b"SNAPSHOT g epoch=1 version=1\nHEARTBEAT\n",
            "HEARTBEAT inside a snapshot",
        ),
        (b"GONE a%2\n", "invalid %-escape"),
        (b"HELLO\x07 1\n", "invalid byte 0x07 in line"),
    ];
    for (input, text) in cases {
        let e = decode_all(input).unwrap_err();
        assert_eq!(e.to_string(), *text, "{}", String::from_utf8_lossy(input));
        // Trickled, the same error.
        assert_eq!(trickle(input).unwrap_err(), e);
    }
}

#[test]
fn limits_bound_what_a_server_can_make_a_client_hold() {
    let long = vec![b'x'; 70_000];
    assert_eq!(
        decode_all(&long).unwrap_err(),
        IndexError::LineTooLong { limit: 65536 }
    );
    let mut text = b"SNAPSHOT g epoch=1 version=1\nMASTER h 1 state=up\n".to_vec();
    for i in 0..4097 {
        text.extend_from_slice(
            format!("REPLICA h {} state=up offset=0 priority=1\n", i % 60000).as_bytes(),
        );
    }
    assert_eq!(
        decode_all(&text).unwrap_err(),
        IndexError::TooManyReplicas { limit: 4096 }
    );
}

#[test]
fn commands() {
    let ok = |line: &str| parse_command(line.as_bytes()).unwrap();
    assert_eq!(ok("HELLO 1"), Some(ClientCommand::Hello(1)));
    assert_eq!(ok("hello 9"), Some(ClientCommand::Hello(9)));
    assert_eq!(
        ok("  PING \t x "),
        Some(ClientCommand::Ping(Some("x".into())))
    );
    assert_eq!(ok("ping"), Some(ClientCommand::Ping(None)));
    assert_eq!(ok("QUIT"), Some(ClientCommand::Quit));
    assert_eq!(
        ok("ack 3F09c2d1a7b4e865"),
        Some(ClientCommand::Ack(0x3f09_c2d1_a7b4_e865))
    );
    assert_eq!(ok(""), None);
    assert_eq!(ok(" \t "), None);
    match ok("WATCH a b*") {
        Some(ClientCommand::Watch(p)) => {
            assert_eq!(p.len(), 2);
            assert!(p[1].matches("bcd"));
        }
        other => panic!("{other:?}"),
    }
    let err = |line: &str| parse_command(line.as_bytes()).unwrap_err();
    assert_eq!(err("FOO"), IndexError::UnknownCommand("FOO".into()));
    assert_eq!(err("HELLO 0"), IndexError::Version(0));
    assert_eq!(err("HELLO 1 2").code(), "syntax");
    assert_eq!(err("HELLO 99999999999").code(), "syntax");
    assert_eq!(err("WATCH").code(), "syntax");
    assert_eq!(err("PING\0").code(), "syntax");
    for bad in [
        "ACK",
        "ACK 1",
        "ACK 3f09c2d1a7b4e8650",
        "ACK +f09c2d1a7b4e865",
        "ACK a b",
    ] {
        assert_eq!(err(bad).code(), "syntax", "{bad}");
    }
    let many = format!("WATCH{}", " x".repeat(257));
    assert_eq!(err(&many), IndexError::TooManyPatterns { limit: 256 });
    // Encoding and parsing agree.
    for c in [
        ClientCommand::Hello(1),
        ClientCommand::Ping(Some("a b".into())),
        ClientCommand::Quit,
        ClientCommand::Ack(7),
        ClientCommand::Watch(vec![Pattern::parse(b"x*").unwrap()]),
    ] {
        let mut out = BytesMut::new();
        c.encode(&mut out);
        assert_eq!(parse_command(&out[..out.len() - 1]).unwrap(), Some(c));
    }
}

#[test]
fn globs() {
    let m = |p: &str, s: &str| Pattern::parse(p.as_bytes()).unwrap().matches(s);
    assert!(m("*", ""));
    assert!(m("*", "anything"));
    assert!(m("cache-*", "cache-a"));
    assert!(m("cache-*", "cache-"));
    assert!(!m("cache-*", "cach"));
    assert!(m("a?c", "abc"));
    assert!(!m("a?c", "ac"));
    assert!(m("*a*b*", "xxaxxbxx"));
    assert!(!m("*a*b*", "xxbxxaxx"));
    assert!(m("a*b*c", "abbbc"));
    assert!(!m("a*b*c", "abbbcd"));
    assert!(m("exact", "exact"));
    assert!(!m("exact", "exactly"));
    // An escaped `*` is literal.
    assert!(m("a%2A", "a*"));
    assert!(!m("a%2A", "ab"));
    assert!(m("my%20group", "my group"));
    // Worst case stays cheap: a long run of stars against a long name.
    let p = "*a".repeat(100);
    assert!(!m(&p, &"a".repeat(99)));
}

#[test]
fn view_orders_snapshots_within_and_across_runs() {
    let mut v = View::new();
    v.set_run("run1");
    assert_eq!(v.apply(snap("g", 1, 5, 1)), Outcome::Changed);
    assert_eq!(v.apply(snap("g", 1, 5, 1)), Outcome::Stale);
    assert_eq!(v.apply(snap("g", 1, 4, 2)), Outcome::Stale);
    // Only the offset moved: newer, but nothing to act on.
    let mut s = snap("g", 1, 6, 1);
    s.replicas[0].offset += 10;
    assert_eq!(v.apply(s), Outcome::Unchanged);
    assert_eq!(v.apply(snap("g", 2, 7, 2)), Outcome::Changed);
    assert_eq!(v.get("g").unwrap().master.port, 2);
    // The server restarted: versions begin again, epochs do not go back.
    v.set_run("run2");
    assert_eq!(v.apply(snap("g", 1, 1, 1)), Outcome::Stale);
    assert_eq!(v.apply(snap("g", 2, 1, 2)), Outcome::Unchanged);
    assert_eq!(v.apply(snap("g", 2, 2, 3)), Outcome::Changed);
    assert_eq!(v.apply(snap("g", 2, 1, 2)), Outcome::Stale);
    assert!(v.remove("g"));
    assert!(!v.remove("g"));
    assert_eq!(v.apply(snap("g", 0, 1, 9)), Outcome::Changed);
    assert_eq!(v.groups().count(), 1);
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,12}",
        any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
    ]
}

proptest! {
    #[test]
    fn escaping_round_trips(s in any::<String>()) {
        let mut out = BytesMut::new();
        escape(&s, &mut out);
        prop_assert!(out.iter().all(|&b| (0x21..=0x7e).contains(&b) && b != b'='));
        prop_assert_eq!(unescape(&out).unwrap(), s);
    }

    #[test]
    fn snapshots_round_trip_whole_and_split(
        group in name(),
        host in name(),
        epoch in any::<u64>(),
        version in any::<u64>(),
        replicas in proptest::collection::vec((name(), any::<u16>(), 0u8..3, any::<u64>(), any::<u32>()), 0..5),
        split in any::<prop::sample::Index>(),
    ) {
        let s = GroupSnapshot {
            group,
            epoch,
            version,
            master: Master { host, port: 1, state: MasterState::Sdown, failover: None },
            replicas: replicas.into_iter().map(|(host, port, st, offset, priority)| Replica {
                host, port, offset, priority,
                state: [ReplicaState::Up, ReplicaState::Down, ReplicaState::Disconnected][usize::from(st)],
            }).collect(),
        };
        let mut out = BytesMut::new();
        s.encode(&mut out);
        let at = split.index(out.len());
        let mut d = ServerDecoder::new();
        let mut buf = BytesMut::from(&out[..at]);
        let first = d.decode(&mut buf).unwrap();
        prop_assert!(first.is_none());
        buf.extend_from_slice(&out[at..]);
        prop_assert_eq!(d.decode(&mut buf).unwrap(), Some(ServerMessage::Snapshot(s)));
        prop_assert!(buf.is_empty());
    }
}

#[test]
fn a_mark_is_sixteen_hex_digits() {
    assert_eq!(
        decode_all(b"MARK 00000000000000ff\n").unwrap(),
        vec![ServerMessage::Mark(255)]
    );
    for bad in [
        "MARK\n",
        "MARK ff\n",
        "MARK 00000000000000fg\n",
        "MARK a b\n",
    ] {
        assert_eq!(
            decode_all(bad.as_bytes()).unwrap_err().code(),
            "syntax",
            "{bad}"
        );
    }
}
