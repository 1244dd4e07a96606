//! `SENTINEL DEBUG`: its parse (Sentinel's checks and error texts) and
//! its reply (Sentinel's names, order and types, RESP2 and RESP3).

use bytes::BytesMut;
use valkyrie_protocol::{Frame, Protocol, encode};

use super::super::sentinel::Subcommand;
use super::super::sentinel::debug::{parse, reply};
use super::parse as parse_subcommand;
use crate::core::Timers;

fn bytes(frame: &Frame, protocol: Protocol) -> String {
    let mut out = BytesMut::new();
    encode(frame, protocol, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn err(s: &str) -> Result<Vec<(&'static str, u64)>, Frame> {
    Err(Frame::error(s.to_string()))
}

#[test]
fn debug_takes_any_number_of_arguments() {
    let bare: &[&[u8]] = &[b"SENTINEL", b"DEBUG"];
    assert_eq!(parse_subcommand(bare), Ok(Subcommand::Debug { pairs: &[] }));
    let pairs: &[&[u8]] = &[b"sentinel", b"debug", b"info-period", b"5"];
    assert_eq!(
        parse_subcommand(pairs),
        Ok(Subcommand::Debug {
            pairs: &[b"info-period", b"5"]
        })
    );
}

#[test]
fn pairs_are_parsed_case_insensitively_in_order() {
    assert_eq!(
        parse(&[b"INFO-Period", b"2000", b"tilt-period", b"5000"]),
        Ok(vec![("info-period", 2000), ("tilt-period", 5000)])
    );
    // Every name Sentinel knows.
    for name in crate::core::timers::NAMES {
        assert_eq!(parse(&[name.as_bytes(), b"1"]), Ok(vec![(name, 1)]));
    }
    assert_eq!(
        parse(&[b"election-timeout", b"9223372036854775807"]),
        Ok(vec![("election-timeout", i64::MAX.unsigned_abs())])
    );
}

#[test]
fn bad_values_get_sentinels_error_naming_the_value_and_option() {
    for value in [
        "0",
        "-5",
        "abc",
        "",
        "05",
        "+5",
        " 5",
        "1.5",
        "9223372036854775808",
    ] {
        assert_eq!(
            parse(&[b"Ping-Period", value.as_bytes()]),
            err(&format!(
                "ERR Invalid argument '{value}' for SENTINEL DEBUG 'Ping-Period'"
            )),
            "{value:?}"
        );
    }
    // The first bad pair is the reply; nothing applies.
    assert_eq!(
        parse(&[b"info-period", b"100", b"ask-period", b"x", b"nosuch", b"1"]),
        err("ERR Invalid argument 'x' for SENTINEL DEBUG 'ask-period'")
    );
}

#[test]
fn unknown_options_and_missing_values_get_sentinels_error() {
    assert_eq!(
        parse(&[b"nosuch", b"1"]),
        err("ERR Unknown option or number of arguments for SENTINEL DEBUG 'nosuch'")
    );
    assert_eq!(
        parse(&[b"info-period", b"100", b"TILT-period"]),
        err("ERR Unknown option or number of arguments for SENTINEL DEBUG 'TILT-period'")
    );
    // Sentinel's own spelling only (no `replica-reconf-timeout`).
    assert_eq!(
        parse(&[b"replica-reconf-timeout", b"1"]),
        err(
            "ERR Unknown option or number of arguments for SENTINEL DEBUG \
             'replica-reconf-timeout'"
        )
    );
}

#[test]
fn the_reply_is_sentinels_thirteen_pairs_of_bulk_strings() {
    let mut timers = Timers::default();
    timers.set("tilt-period", 5000);
    let frame = reply(&timers);
    let resp2 = bytes(&frame, Protocol::Resp2);
    assert!(
        resp2.starts_with("*26\r\n$11\r\nINFO-PERIOD\r\n$4\r\n1000\r\n$11\r\nPING-PERIOD\r\n"),
        "{resp2}"
    );
    let resp3 = bytes(&frame, Protocol::Resp3);
    assert!(
        resp3.starts_with("%13\r\n$11\r\nINFO-PERIOD\r\n$4\r\n1000\r\n"),
        "{resp3}"
    );
    let Frame::Map(pairs) = frame else {
        panic!("not a map: {frame:?}")
    };
    let shown: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| {
            let text = |f: &Frame| String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned();
            (text(k), text(v))
        })
        .collect();
    let want = [
        ("INFO-PERIOD", "1000"),
        ("PING-PERIOD", "1000"),
        ("ASK-PERIOD", "1000"),
        ("PUBLISH-PERIOD", "2000"),
        ("DEFAULT-DOWN-AFTER", "30000"),
        ("DEFAULT-FAILOVER-TIMEOUT", "180000"),
        ("TILT-TRIGGER", "2000"),
        ("TILT-PERIOD", "5000"),
        ("SLAVE-RECONF-TIMEOUT", "10000"),
        ("MIN-LINK-RECONNECT-PERIOD", "6000"),
        ("ELECTION-TIMEOUT", "10000"),
        ("SCRIPT-MAX-RUNTIME", "60000"),
        ("SCRIPT-RETRY-DELAY", "30000"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    assert_eq!(shown, want);
}

#[test]
fn each_name_sets_its_own_timer() {
    for (i, name) in crate::core::timers::NAMES.iter().enumerate() {
        let mut timers = Timers::default();
        let value = 7_000 + i as u64;
        assert!(timers.set(name, value));
        assert_eq!(timers.get(name), Some(value));
        // Only that one changed.
        let before = Timers::default();
        let changed: Vec<&str> = crate::core::timers::NAMES
            .iter()
            .copied()
            .filter(|n| timers.get(n) != before.get(n))
            .collect();
        assert_eq!(changed, [*name]);
    }
    assert!(!Timers::default().set("nosuch", 1));
}
