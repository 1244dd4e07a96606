//! `COMMAND`, `COMMAND LIST`, `COMMAND INFO` and `COMMAND DOCS` side by side with a real
//! `valkey-sentinel` 8.0.1, in RESP2 and RESP3: for named commands (in any
//! case, unknown ones among them) and `COUNT`, the same replies, of the
//! same length, but for the order of subcommands; for the lists of every
//! command, the same entries. Sentinel orders subcommands and the lists
//! of every command by its hash tables, seeded per process, so two runs of
//! Sentinel differ there too.
//!
//! Needs the `valkey-sentinel` binary (`VALKEY_SENTINEL`, else the one on
//! `PATH`); without it the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use support::TempDir;
use support::sentinel::beside_a_real_sentinel;
use support::wire::Conn;
use valkyrie_protocol::Frame;

/// Requests whose replies must be the same bytes.
const NAMED: &[&[&str]] = &[
    &["COMMAND", "COUNT"],
    &["COMMAND", "INFO", "ping", "SENTINEL", "nosuch", "Role"],
    &["COMMAND", "INFO", "nosuch"],
    &["COMMAND", "DOCS", "ping", "sentinel", "nosuch", "HELLO"],
    &["COMMAND", "DOCS", "nosuch"],
    // Subcommands by their `container|sub` names (Valkey's own suite asks
    // for `client|setinfo`).
    &[
        "COMMAND",
        "INFO",
        "client|setinfo",
        "SENTINEL|Debug",
        "client|nosuch",
        "nosuch|x",
    ],
    &[
        "COMMAND",
        "DOCS",
        "client|setinfo",
        "config|get",
        "nosuch|x",
    ],
    &[
        "COMMAND", "DOCS", "auth", "acl", "client", "command", "info",
    ],
    &[
        "COMMAND",
        "DOCS",
        "publish",
        "subscribe",
        "psubscribe",
        "unsubscribe",
    ],
    &[
        "COMMAND",
        "DOCS",
        "punsubscribe",
        "shutdown",
        "role",
        "ping",
    ],
];

/// A list of every command, as its entries' encodings, sorted; `docs`:
/// a map, flat in RESP2.
fn entries(reply: &Frame, docs: bool) -> Vec<String> {
    let mut out: Vec<String> = match reply {
        Frame::Array(flat) if docs => flat
            .chunks(2)
            .map(|p| format!("{:?}", (&p[0], canonical(&p[1]))))
            .collect(),
        Frame::Array(items) => items
            .iter()
            .map(|f| format!("{:?}", canonical(f)))
            .collect(),
        Frame::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| format!("{:?}", (k, canonical(v))))
            .collect(),
        other => panic!("not a list: {other:?}"),
    };
    out.sort();
    out
}

/// `f` with every list of subcommands sorted: a `COMMAND INFO` entry's
/// tenth field, a docs map's `subcommands` (a map in RESP3, flat in RESP2).
fn canonical(f: &Frame) -> Frame {
    let is_key = |k: &Frame| k.as_bytes().is_some_and(|b| &b[..] == b"subcommands");
    match f {
        Frame::Array(items) if items.len() == 10 && items[0].as_bytes().is_some() => {
            let mut items: Vec<Frame> = items.iter().map(canonical).collect();
            if let Frame::Array(subs) = &mut items[9] {
                subs.sort_by_key(|s| format!("{s:?}"));
            }
            Frame::Array(items)
        }
        Frame::Map(pairs) => Frame::Map(
            pairs
                .iter()
                .map(|(k, v)| (k.clone(), if is_key(k) { sorted(v) } else { canonical(v) }))
                .collect(),
        ),
        Frame::Array(items) => {
            let mut out = Vec::new();
            let mut it = items.iter().peekable();
            while let Some(x) = it.next() {
                out.push(canonical(x));
                if is_key(x)
                    && let Some(v) = it.next()
                {
                    out.push(sorted(v));
                }
            }
            Frame::Array(out)
        }
        other => other.clone(),
    }
}

/// A map of subcommands' docs, its pairs sorted.
fn sorted(v: &Frame) -> Frame {
    match v {
        Frame::Map(pairs) => {
            let mut pairs: Vec<(Frame, Frame)> = pairs
                .iter()
                .map(|(k, v)| (k.clone(), canonical(v)))
                .collect();
            pairs.sort_by_key(|p| format!("{p:?}"));
            Frame::Map(pairs)
        }
        Frame::Array(flat) => {
            let mut pairs: Vec<(Frame, Frame)> = flat
                .chunks(2)
                .map(|p| (p[0].clone(), canonical(&p[1])))
                .collect();
            pairs.sort_by_key(|p| format!("{p:?}"));
            Frame::Array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect())
        }
        other => other.clone(),
    }
}

/// One reply, decoded.
fn decoded(raw: &[u8]) -> Frame {
    let mut b = bytes::BytesMut::from(raw);
    valkyrie_protocol::FrameDecoder::new()
        .decode(&mut b)
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_details_and_docs_are_sentinels() {
    let dir = TempDir::new("command-diff");
    let (real, daemon) = beside_a_real_sentinel(&dir.0).await;
    let ours_port = daemon.sentinel_addrs[0].port();
    let real_port = real.port;

    tokio::task::spawn_blocking(move || {
        for resp3 in [false, true] {
            let mut real = Conn::connect(real_port);
            let mut ours = Conn::connect(ours_port);
            if resp3 {
                for c in [&mut real, &mut ours] {
                    assert!(c.ask(&["HELLO", "3"]).starts_with(b"%"));
                }
            }
            for args in NAMED {
                let (a, b) = (real.ask(args), ours.ask(args));
                assert_eq!(a.len(), b.len(), "{args:?} (RESP3 {resp3})");
                assert_eq!(
                    canonical(&decoded(&a)),
                    canonical(&decoded(&b)),
                    "{args:?} (RESP3 {resp3})"
                );
            }
            for args in [&["COMMAND"][..], &["COMMAND", "INFO"], &["COMMAND", "DOCS"]] {
                let (a, b) = (real.frame(args), ours.frame(args));
                let docs = args.len() == 2 && args[1] == "DOCS";
                let (a, b) = (entries(&a, docs), entries(&b, docs));
                assert_eq!(a.len(), 15, "{args:?}");
                assert_eq!(a, b, "{args:?} (RESP3 {resp3})");
            }
            // `COMMAND LIST`: every command and subcommand name, in any
            // order.
            let list = |c: &mut Conn| {
                let Frame::Array(names) = c.frame(&["COMMAND", "LIST"]) else {
                    panic!("COMMAND LIST is not a list");
                };
                let mut names: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
                names.sort();
                names
            };
            let (a, b) = (list(&mut real), list(&mut ours));
            assert!(a.iter().any(|n| n.contains("client|setinfo")), "{a:?}");
            assert_eq!(a, b, "COMMAND LIST (RESP3 {resp3})");
        }
    })
    .await
    .unwrap();
    daemon.stop().await.unwrap();
    drop(real);
}
