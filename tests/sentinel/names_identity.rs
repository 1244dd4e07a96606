//! Names, identity and secrets: client names checked as Valkey checks them
//! (compared byte for byte with a real `valkey-sentinel`), `CLIENT LIST`
//! lines that no client can forge, master names that every output can
//! carry, and a daemon id (`SENTINEL MYID`) that survives restarts.
//!
//! The comparison needs the `valkey-sentinel` binary (`VALKEY_SENTINEL`,
//! else the one on `PATH`); without it the test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::path::Path;

use support::sentinel::RealSentinel;
use support::wire::Conn;
use support::{TempDir, free_port};
use valkyrie::config;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;

const PASS: &str = "sekret";

/// The HELLO reply's connection id, which differs between servers, as `N`.
fn without_id(reply: Vec<u8>) -> String {
    let text = String::from_utf8_lossy(&reply).into_owned();
    match text.split_once("$2\r\nid\r\n:") {
        Some((head, tail)) => {
            let rest = tail.split_once("\r\n").map_or("", |(_, r)| r);
            format!("{head}$2\r\nid\r\n:N\r\n{rest}")
        }
        None => text,
    }
}

/// Names with spaces, newlines and other bytes outside `!`..`~`, through
/// every command that sets one: what each reply is, and what a refused
/// HELLO leaves unchanged (login, protocol, name).
const SCRIPT: &[&[&str]] = &[
    &[
        "HELLO",
        "3",
        "AUTH",
        "default",
        PASS,
        "SETNAME",
        "a b\nid=999 addr=evil",
    ],
    &["CLIENT", "GETNAME"],
    &["HELLO", "3", "AUTH", "default", PASS, "BOGUS"],
    &["CLIENT", "GETNAME"],
    &[
        "HELLO", "3", "SETNAME", "x\u{1}", "AUTH", "default", "wrong",
    ],
    &["HELLO", "3", "AUTH", "default", "wrong", "SETNAME", "good"],
    &["HELLO", "2", "AUTH", "default", PASS, "SETNAME", "good"],
    &["HELLO", "3", "SETNAME", "x y"],
    &["CLIENT", "GETNAME"],
    &["HELLO", "3", "SETNAME", "caf\u{e9}"],
    &["HELLO", "3", "SETNAME", "tab\there"],
    &["HELLO", "3", "SETNAME", "del\u{7f}"],
    &["HELLO", "3", "SETNAME"],
    &["CLIENT", "GETNAME"],
    &["HELLO", "3", "SETNAME", ""],
    &["CLIENT", "GETNAME"],
    &["CLIENT", "SETNAME", "a\nb"],
    &["CLIENT", "SETNAME", "a b"],
    &["CLIENT", "SETINFO", "lib-name", "a b"],
    &["CLIENT", "SETINFO", "LIB-VER", "1\n2"],
    &["CLIENT", "SETINFO", "lib-name", "redis-py(x)"],
    &["CLIENT", "SETNAME", "ok-name"],
    &["CLIENT", "GETNAME"],
];

fn run_script(port: u16) -> Vec<String> {
    let mut c = Conn::connect(port);
    SCRIPT.iter().map(|req| without_id(c.ask(req))).collect()
}

/// `CLIENT LIST` from another connection while `_forger`, which tried to
/// forge an entry, is connected: every line one client, no forged address.
fn assert_list_unforged(port: u16, _forger: &Conn) {
    let mut other = Conn::connect(port);
    assert_eq!(other.ask(&["AUTH", PASS]), b"+OK\r\n");
    let list = match other.frame(&["CLIENT", "LIST"]) {
        Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
        f => panic!("{f:?}"),
    };
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines.len() >= 2, "{list}");
    for l in &lines {
        assert!(l.starts_with("id="), "{list}");
        assert_eq!(l.matches(" addr=").count(), 1, "{list}");
        assert!(!l.contains("evil"), "{list}");
    }
}

fn daemon_text(dir: &Path, extra: &str) -> String {
    format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\n{extra}",
        dir.display()
    )
}

async fn start(text: &str) -> Daemon {
    let (cfg, _) = config::parse("t.conf", text.as_bytes()).unwrap();
    Daemon::start(cfg).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_names_match_valkey_sentinel_byte_for_byte() {
    let tmp = TempDir::new("names-real");
    let real = RealSentinel::start(&tmp.0, &format!("requirepass {PASS}\n"));
    let ours_dir = tmp.0.join("ours");
    std::fs::create_dir_all(&ours_dir).unwrap();
    let d = start(&daemon_text(&ours_dir, &format!("requirepass {PASS}\n"))).await;
    let port = d.sentinel_addrs[0].port();
    let real_port = real.port;
    tokio::task::spawn_blocking(move || {
        let expected = run_script(real_port);
        let got = run_script(port);
        for ((req, e), g) in SCRIPT.iter().zip(&expected).zip(&got) {
            assert_eq!(g, e, "reply to {req:?}");
        }
        // The forging attempt itself, then CLIENT LIST on both servers.
        for p in [real_port, port] {
            let mut forger = Conn::connect(p);
            let r = forger.ask(&[
                "HELLO",
                "2",
                "AUTH",
                "default",
                PASS,
                "SETNAME",
                "a\nid=999 addr=evil",
            ]);
            assert!(r.starts_with(b"-ERR Client names"), "{r:?}");
            assert_eq!(forger.ask(&["AUTH", PASS]), b"+OK\r\n");
            assert_list_unforged(p, &forger);
        }
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_list_fields_are_escaped() {
    let tmp = TempDir::new("names-list");
    let d = start(&daemon_text(&tmp.0, "")).await;
    let port = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let mut forger = Conn::connect(port);
        // An unknown command's name lands in the `cmd=` field.
        let r = forger.ask(&["GET\nid=999 addr=evil", "k"]);
        assert!(r.starts_with(b"-ERR unknown command"), "{r:?}");
        let mut other = Conn::connect(port);
        let list = match other.frame(&["CLIENT", "LIST"]) {
            Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
            f => panic!("{f:?}"),
        };
        let lines: Vec<&str> = list.lines().collect();
        assert_eq!(lines.len(), 2, "{list}");
        assert!(
            lines[0].contains(r" cmd=get\x0aid=999\x20addr=evil "),
            "{list}"
        );
        assert!(lines.iter().all(|l| l.starts_with("id=")), "{list}");
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

fn myid(port: u16) -> String {
    match Conn::connect(port).frame(&["SENTINEL", "MYID"]) {
        Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
        f => panic!("{f:?}"),
    }
}

async fn myid_of(text: &str) -> String {
    let d = start(text).await;
    let port = d.sentinel_addrs[0].port();
    let id = tokio::task::spawn_blocking(move || myid(port))
        .await
        .unwrap();
    d.stop().await.unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn myid_survives_restarts_and_follows_the_config() {
    let tmp = TempDir::new("myid");
    let text = daemon_text(&tmp.0, "");
    let first = myid_of(&text).await;
    assert!(config::valid_myid(&first), "{first}");
    // Saved at once, before anything else happened.
    let saved = std::fs::read_to_string(tmp.0.join(valkyrie::state::FILE_NAME)).unwrap();
    assert!(saved.contains(&format!("\"myid\": \"{first}\"")), "{saved}");
    assert_eq!(myid_of(&text).await, first);

    // Another directory, another daemon, another id.
    let other = TempDir::new("myid-other");
    assert_ne!(myid_of(&daemon_text(&other.0, "")).await, first);

    // `sentinel myid` wins over the state file, and is then saved.
    let configured = "6165e0003d05f9e39a4ca4a6bee8ba1de4c6a1e7";
    let with_id = daemon_text(&tmp.0, &format!("sentinel myid {configured}\n"));
    assert_eq!(myid_of(&with_id).await, configured);
    assert_eq!(myid_of(&text).await, configured);
}

#[test]
fn a_malformed_myid_is_a_config_error() {
    for bad in [
        "xyz",
        "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        "6165e0003d05f9e39a4ca4a6bee8ba1de4c6a1e",
        "6165e0003d05f9e39a4ca4a6bee8ba1de4c6a1e77",
    ] {
        let text = format!("port 26379\n\nsentinel myid {bad}\n");
        match config::parse("/etc/sentinel.conf", text.as_bytes()) {
            Err(config::ConfigError::Directive {
                path,
                line,
                message,
            }) => {
                assert_eq!((path.as_str(), line), ("/etc/sentinel.conf", 3));
                assert!(
                    message.contains("Malformed Sentinel id in myid option"),
                    "{message}"
                );
                assert!(message.contains(bad), "{message}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    let (cfg, _) = config::parse(
        "t.conf",
        b"sentinel myid 6165E0003D05F9E39A4CA4A6BEE8BA1DE4C6A1E7\n",
    )
    .unwrap();
    assert_eq!(
        cfg.myid.as_deref(),
        Some("6165E0003D05F9E39A4CA4A6BEE8BA1DE4C6A1E7")
    );
}

#[test]
fn master_names_with_spaces_or_newlines_are_refused_in_the_config() {
    for (name, host) in [
        (r#""a\nb""#, "127.0.0.1"),
        (r#""a b""#, "127.0.0.1"),
        (r#""a\x1bb""#, "127.0.0.1"),
        ("ok", r#""host\nname""#),
    ] {
        let text =
            format!("sentinel resolve-hostnames yes\nsentinel monitor {name} {host} 6379 1\n");
        match config::parse("s.conf", text.as_bytes()) {
            Err(config::ConfigError::Directive {
                path,
                line,
                message,
            }) => {
                assert_eq!((path.as_str(), line), ("s.conf", 2), "{message}");
                assert!(
                    message.contains("cannot contain spaces, newlines or special characters"),
                    "{message}"
                );
            }
            other => panic!("{name} {host}: {other:?}"),
        }
    }
    let known =
        "sentinel monitor m 10.0.0.1 6379 1\nsentinel known-replica m \"10.0.0.2 x\" 6380\n";
    match config::parse("s.conf", known.as_bytes()) {
        Err(config::ConfigError::Directive { line, message, .. }) => {
            assert_eq!(line, 2, "{message}");
            assert!(message.starts_with("Hosts cannot contain"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_names_with_spaces_or_newlines_are_refused_at_monitor() {
    let tmp = TempDir::new("names-monitor");
    let d = start(&daemon_text(&tmp.0, "")).await;
    let port = d.sentinel_addrs[0].port();
    let target = free_port().to_string();
    tokio::task::spawn_blocking(move || {
        let mut c = Conn::connect(port);
        for name in ["a\nb", "a b", "a\u{1b}b", "caf\u{e9}", ""] {
            assert_eq!(
                c.ask(&["SENTINEL", "MONITOR", name, "127.0.0.1", &target, "1"]),
                b"-ERR Master names cannot contain spaces, newlines or special characters.\r\n",
                "{name:?}"
            );
        }
        assert_eq!(c.ask(&["SENTINEL", "MASTERS"]), b"*0\r\n");
        assert_eq!(
            c.ask(&["SENTINEL", "MONITOR", "ok", "127.0.0.1\n", &target, "1"]),
            b"-ERR Invalid IP address or hostname specified\r\n"
        );
        assert_eq!(
            c.ask(&["SENTINEL", "MONITOR", "ok", "127.0.0.1", &target, "1"]),
            b"+OK\r\n"
        );
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_with_a_bad_master_name_is_refused() {
    let tmp = TempDir::new("names-state");
    std::fs::write(
        tmp.0.join(valkyrie::state::FILE_NAME),
        r#"{"version":1,"groups":{},"config":{"groups":[{"name":"a\nb","host":"127.0.0.1",
        "port":6379,"quorum":1,"down_after_ms":1000,"failover_timeout_ms":1000,
        "parallel_syncs":1,"auth_user":null,"auth_pass":null}],"announce_ip":null,
        "announce_port":0,"resolve_hostnames":false,"announce_hostnames":false,
        "sentinel_user":null,"sentinel_pass":null,"loglevel":"notice"}}"#,
    )
    .unwrap();
    let (cfg, _) = config::parse("t.conf", daemon_text(&tmp.0, "").as_bytes()).unwrap();
    let err = Daemon::start(cfg).await.err().unwrap().to_string();
    assert!(
        err.contains("cannot contain spaces, newlines or special characters"),
        "{err}"
    );
}
