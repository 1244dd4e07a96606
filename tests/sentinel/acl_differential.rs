//! ACL on the Sentinel port, proven side by side with a real
//! `valkey-sentinel` 8.0.1: the same users on both, the same command matrix
//! (several users × every command and subcommand the port serves), the
//! same permission outcomes and the same `-NOPERM` bytes. `ACL SETUSER` and
//! `DELUSER` survive a restart, and a pipelined brute force of `AUTH` is
//! slowed below what the real sentinel allows, measured in the same run.
//!
//! Needs the `valkey-sentinel` binary (`VALKEY_SENTINEL`, else the one on
//! `PATH`); without it the tests fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use support::sentinel::RealSentinel;
use support::wire::Conn;
use support::{TempDir, free_port};
use valkyrie::config;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::FrameDecoder;

const USERS: &str = "requirepass dpw
user alice on >pw -@all +ping +sentinel|get-master-addr-by-name
user bob on >pw2 +@all -@dangerous &chan*
user carol on >pw3 -@all +@admin -sentinel|set ~k* %R~r*
user dave on >pw4 +@all -shutdown -acl|setuser -sentinel|failover &__sentinel__:*
user erin on >pw5 -@all +@connection +@pubsub allchannels +info|server
user frank on >pw6 -@all +@slow -@admin +client|kill
";

/// (user, password)
const LOGINS: [(&str, &str); 7] = [
    ("default", "dpw"),
    ("alice", "pw"),
    ("bob", "pw2"),
    ("carol", "pw3"),
    ("dave", "pw4"),
    ("erin", "pw5"),
    ("frank", "pw6"),
];

async fn valkyrie(dir: &Path, extra: &str) -> Daemon {
    let text = format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\n{extra}",
        dir.display()
    );
    let (cfg, _) = config::parse("t.conf", text.as_bytes()).unwrap();
    Daemon::start(cfg).await.unwrap()
}

/// Every command and subcommand the port serves, with arguments that
/// change nothing for good (no shutdown, no monitored master).
const MATRIX: &[&[&str]] = &[
    &["PING"],
    &["INFO"],
    &["INFO", "server"],
    &["ROLE"],
    &["HELLO", "2"],
    &["COMMAND", "COUNT"],
    &["COMMAND", "LIST"],
    &["COMMAND", "INFO", "ping"],
    &["COMMAND", "DOCS", "ping"],
    &["PUBLISH", "__sentinel__:hello", "x"],
    &["PUBLISH", "chanx", "x"],
    &["SUBSCRIBE", "chanx"],
    &["SUBSCRIBE", "chanx", "other"],
    &["SUBSCRIBE", "__sentinel__:hello"],
    &["PSUBSCRIBE", "chan*"],
    &["PSUBSCRIBE", "*"],
    &["UNSUBSCRIBE"],
    &["PUNSUBSCRIBE"],
    &["SHUTDOWN", "ABORT"],
    &["SENTINEL", "get-master-addr-by-name", "nosuch"],
    &["SENTINEL", "get-primary-addr-by-name", "nosuch"],
    &["SENTINEL", "masters"],
    &["SENTINEL", "primaries"],
    &["SENTINEL", "master", "nosuch"],
    &["SENTINEL", "primary", "nosuch"],
    &["SENTINEL", "replicas", "nosuch"],
    &["SENTINEL", "slaves", "nosuch"],
    &["SENTINEL", "sentinels", "nosuch"],
    &["SENTINEL", "myid"],
    &["SENTINEL", "ckquorum", "nosuch"],
    &["SENTINEL", "failover", "nosuch"],
    &["SENTINEL", "monitor", "m", "127.0.0.1", "1", "0"],
    &["SENTINEL", "remove", "nosuch"],
    &[
        "SENTINEL",
        "set",
        "nosuch",
        "down-after-milliseconds",
        "1000",
    ],
    &["SENTINEL", "reset", "nosuch*"],
    &["SENTINEL", "flushconfig"],
    &["SENTINEL", "config", "get", "*"],
    &["SENTINEL", "config", "set", "loglevel", "notice"],
    &["SENTINEL", "help"],
    &["SENTINEL", "debug"],
    &["SENTINEL", "debug", "tilt-period", "30000"],
    &["SENTINEL", "info-cache", "nosuch"],
    &["SENTINEL", "pending-scripts"],
    &["SENTINEL", "simulate-failure", "help"],
    &[
        "SENTINEL",
        "is-master-down-by-addr",
        "127.0.0.1",
        "1",
        "0",
        "*",
    ],
    &[
        "SENTINEL",
        "is-primary-down-by-addr",
        "127.0.0.1",
        "1",
        "0",
        "*",
    ],
    &["CLIENT", "ID"],
    &["CLIENT", "GETNAME"],
    &["CLIENT", "SETNAME", "n"],
    &["CLIENT", "SETINFO", "lib-name", "x"],
    &["CLIENT", "INFO"],
    &["CLIENT", "LIST"],
    &["CLIENT", "KILL", "ID", "999999"],
    &["CLIENT", "REPLY", "ON"],
    &["CLIENT", "NO-EVICT", "off"],
    &["CLIENT", "TRACKING", "off"],
    &["CLIENT", "TRACKINGINFO"],
    &["CLIENT", "GETREDIR"],
    &["CLIENT", "UNPAUSE"],
    &["CLIENT", "UNBLOCK", "999999"],
    &["CLIENT", "HELP"],
    &["ACL", "WHOAMI"],
    &["ACL", "USERS"],
    &["ACL", "LIST"],
    &["ACL", "GETUSER", "alice"],
    &["ACL", "GETUSER", "carol"],
    &["ACL", "GETUSER", "nobody"],
    &["ACL", "CAT"],
    &["ACL", "CAT", "admin"],
    &["ACL", "CAT", "dangerous"],
    &["ACL", "CAT", "slow"],
    &["ACL", "CAT", "connection"],
    &["ACL", "CAT", "pubsub"],
    &["ACL", "CAT", "fast"],
    &["ACL", "CAT", "nosuch"],
    &["ACL", "HELP"],
    &["ACL", "LOAD"],
    &["ACL", "SAVE"],
    &["ACL", "GENPASS"],
    &["ACL", "LOG", "0"],
    &[
        "ACL", "DRYRUN", "alice", "sentinel", "set", "m", "quorum", "2",
    ],
    &["ACL", "DRYRUN", "bob", "subscribe", "x"],
    &["ACL", "DRYRUN", "erin", "info", "server"],
    &["ACL", "DRYRUN", "nobody", "ping"],
    &["ACL", "SETUSER", "tmp", "on", ">t", "+@fast", "&x*"],
    &["ACL", "SETUSER", "tmp", "+nosuch"],
    &[
        "ACL",
        "SETUSER",
        "tmp2",
        "(+ping",
        "~a*)",
        "-@all",
        "+info|server",
    ],
    &["ACL", "DELUSER", "tmp2", "nobody"],
    &["ACL", "DELUSER", "default"],
    &["ACL", "GETUSER", "tmp"],
];

/// Commands whose whole reply is the same on both (besides every NOPERM):
/// the ACL's own output and fixed texts.
fn exact(cmd: &[&str]) -> bool {
    match cmd {
        ["PING"] => true,
        ["ACL", "GENPASS" | "LOG", ..] => false,
        ["ACL", ..] => true,
        _ => false,
    }
}

fn sorted_lines(reply: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = reply.split(|&b| b == b'\n').collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_match_valkey_sentinel() {
    let real_dir = TempDir::new("acl-real");
    let ours_dir = TempDir::new("acl-ours");
    let real = RealSentinel::start(&real_dir.0, USERS);
    let d = valkyrie(&ours_dir.0, USERS).await;
    let (rp, op) = (real.port, d.sentinel_addrs[0].port());
    tokio::task::spawn_blocking(move || {
        let mut mismatches = Vec::new();
        let mut denied = 0;
        for (user, pass) in LOGINS {
            for cmd in MATRIX {
                // A fresh connection each, so subscribing changes nothing
                // for the next command.
                let a = Conn::login(rp, user, pass).ask(cmd);
                let b = Conn::login(op, user, pass).ask(cmd);
                let noperm = |r: &[u8]| r.starts_with(b"-NOPERM");
                denied += usize::from(noperm(&a));
                let error = |r: &[u8]| r.starts_with(b"-");
                let same = if let ["ACL", "CAT", _] = cmd {
                    // Valkey lists a category's commands in its hash
                    // table's order, seeded per process: compare as sets.
                    sorted_lines(&a) == sorted_lines(&b)
                } else if noperm(&a) || noperm(&b) || exact(cmd) || (error(&a) && error(&b)) {
                    a == b
                } else {
                    // Both ran it (or failed it the same non-ACL way).
                    true
                };
                if !same {
                    mismatches.push(format!(
                        "{user} {cmd:?}\n  valkey-sentinel: {}\n  valkyrie:        {}",
                        String::from_utf8_lossy(&a),
                        String::from_utf8_lossy(&b)
                    ));
                }
            }
        }
        assert!(
            mismatches.is_empty(),
            "{} of {} replies differ:\n{}",
            mismatches.len(),
            LOGINS.len() * MATRIX.len(),
            mismatches.join("\n")
        );
        // The matrix does exercise refusals (of commands and channels).
        assert!(denied > 100, "only {denied} refusals");

        // The ACL log holds the same refusals, newest first.
        let fields = |port: u16| {
            let mut c = Conn::login(port, "default", "dpw");
            let log = c.ask(&["ACL", "LOG", "20"]);
            let mut d = BytesMut::from(&log[..]);
            let frame = FrameDecoder::new().decode(&mut d).unwrap().unwrap();
            let valkyrie_protocol::Frame::Array(entries) = frame else {
                panic!("{frame:?}")
            };
            entries
                .into_iter()
                .map(|e| match e {
                    valkyrie_protocol::Frame::Array(kv) => kv
                        .chunks(2)
                        .filter(|p| {
                            matches!(
                                p[0].as_bytes().map(|b| &b[..]),
                                Some(b"count" | b"reason" | b"object" | b"username" | b"context")
                            )
                        })
                        .map(|p| format!("{:?}", p[1]))
                        .collect::<Vec<_>>()
                        .join(" "),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(op), fields(rp));
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_changes_survive_a_restart() {
    let dir = TempDir::new("acl-restart");
    let d = valkyrie(&dir.0, USERS).await;
    let port = d.sentinel_addrs[0].port();
    let before = tokio::task::spawn_blocking(move || {
        let mut c = Conn::login(port, "default", "dpw");
        assert_eq!(
            c.ask(&["ACL", "SETUSER", "zed", "on", ">zpw", "-@all", "+ping"]),
            b"+OK\r\n"
        );
        assert_eq!(c.ask(&["ACL", "DELUSER", "bob"]), b":1\r\n");
        assert_eq!(
            c.ask(&["ACL", "SETUSER", "alice", "<pw", ">new"]),
            b"+OK\r\n"
        );
        c.ask(&["ACL", "LIST"])
    })
    .await
    .unwrap();
    let state = std::fs::read_to_string(dir.0.join("valkyrie-state.json")).unwrap();
    assert!(!state.contains("zpw") && !state.contains(">new"), "{state}");
    d.stop().await.unwrap();

    let d = valkyrie(&dir.0, USERS).await;
    let port = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let mut z = Conn::login(port, "zed", "zpw");
        assert_eq!(z.ask(&["PING"]), b"+PONG\r\n");
        assert_eq!(
            z.ask(&["SENTINEL", "myid"]),
            b"-NOPERM User zed has no permissions to run the 'sentinel|myid' command\r\n"
        );
        let mut c = Conn::connect(port);
        let wrong = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
        assert_eq!(c.ask(&["AUTH", "bob", "pw2"]), wrong);
        assert_eq!(c.ask(&["AUTH", "alice", "pw"]), wrong);
        assert_eq!(c.ask(&["AUTH", "alice", "new"]), b"+OK\r\n");
        let mut admin = Conn::login(port, "default", "dpw");
        assert_eq!(admin.ask(&["ACL", "LIST"]), before);
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_changes_that_cannot_be_saved_are_refused_and_not_made() {
    let dir = TempDir::new("acl-unsaved");
    let d = valkyrie(&dir.0, USERS).await;
    let port = d.sentinel_addrs[0].port();
    // The state file's temporary sibling is a directory: no write can land.
    let blocked = dir.0.join("valkyrie-state.json.tmp");
    std::fs::create_dir_all(blocked.join("blocked")).unwrap();
    tokio::task::spawn_blocking(move || {
        let mut c = Conn::login(port, "default", "dpw");
        let refused = b"-ERR Failed to save config file. Check server logs.\r\n";
        assert_eq!(
            c.ask(&["ACL", "SETUSER", "zed", "on", ">zpw", "+@all"]),
            refused
        );
        assert_eq!(c.ask(&["ACL", "DELUSER", "bob"]), refused);
        // Neither change was made.
        let mut z = Conn::connect(port);
        assert_eq!(
            z.ask(&["AUTH", "zed", "zpw"]),
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        let mut b = Conn::connect(port);
        assert_eq!(b.ask(&["AUTH", "bob", "pw2"]), b"+OK\r\n");
    })
    .await
    .unwrap();
    std::fs::remove_dir_all(&blocked).unwrap();
    d.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrowing_a_users_channels_closes_its_subscribers() {
    let dir = TempDir::new("acl-channels");
    let d = valkyrie(&dir.0, USERS).await;
    let port = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let mut sub = Conn::login(port, "bob", "pw2");
        let confirmed = sub.ask(&["SUBSCRIBE", "chan1"]);
        assert!(
            confirmed.starts_with(b"*3\r\n$9\r\nsubscribe"),
            "{confirmed:?}"
        );
        let mut admin = Conn::login(port, "default", "dpw");
        assert_eq!(
            admin.ask(&["ACL", "SETUSER", "bob", "resetchannels", "&other"]),
            b"+OK\r\n"
        );
        // The subscriber is closed: its next read sees the end.
        sub.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut rest = [0u8; 64];
        assert!(matches!(sub.stream.read(&mut rest), Ok(0) | Err(_)));
        // Under the new rules it may subscribe only to what is allowed
        // (Valkey 8.0.1's text for SUBSCRIBE, checked in the matrix above).
        let mut again = Conn::login(port, "bob", "pw2");
        assert_eq!(
            again.ask(&["SUBSCRIBE", "chan1"]),
            b"-NOPERM No permissions to access a channel\r\n"
        );
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

/// Guesses checked per second by 4 connections that each pipeline
/// batches of 100 wrong `AUTH`s followed by a `PING` (whose `-NOAUTH`
/// marks the end of a batch), for `window`.
fn brute_force(port: u16, window: Duration) -> f64 {
    let mut batch = BytesMut::new();
    for i in 0..100 {
        valkyrie_protocol::encode_command(&["AUTH", &format!("guess{i}")], &mut batch);
    }
    valkyrie_protocol::encode_command(&["PING"], &mut batch);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let batch = batch.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                let start = Instant::now();
                let mut checked = 0u64;
                let mut buf = Vec::new();
                s.write_all(&batch).unwrap();
                while start.elapsed() < window {
                    let mut chunk = [0u8; 65536];
                    if let Ok(n) = s.read(&mut chunk) {
                        assert!(n > 0, "closed");
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    // Valkey answers the first failure of a pipeline and
                    // drops the others' replies; Valkyrie answers each.
                    if let Some(end) = buf.windows(7).position(|w| w == b"-NOAUTH") {
                        checked += 100;
                        buf.drain(..end + 7);
                        s.write_all(&batch).unwrap();
                    }
                }
                // A batch still under way: the failures answered so far.
                checked + buf.windows(10).filter(|w| w == b"-WRONGPASS").count() as u64
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    total as f64 / window.as_secs_f64()
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn auth_failures(admin: u16) -> f64 {
    http_get(admin, "/metrics")
        .lines()
        .find_map(|l| l.strip_prefix("valkyrie_sentinel_auth_failures_total "))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_brute_force_is_slower_than_valkey_sentinel() {
    let real_dir = TempDir::new("bf-real");
    let ours_dir = TempDir::new("bf-ours");
    let real = RealSentinel::start(&real_dir.0, "requirepass right\n");
    let admin = free_port();
    let d = valkyrie(
        &ours_dir.0,
        &format!("requirepass right\nadmin-port {admin}\n"),
    )
    .await;
    let (rp, op) = (real.port, d.sentinel_addrs[0].port());
    tokio::task::spawn_blocking(move || {
        let window = Duration::from_secs(2);
        let failures_before = auth_failures(admin);
        let theirs = brute_force(rp, window);
        let ours = brute_force(op, window);
        eprintln!("AUTH guesses/s, 4 connections × 100 pipelined: valkey-sentinel {theirs:.0}, valkyrie {ours:.0}");
        assert!(theirs > 1000.0, "valkey-sentinel {theirs}");
        assert!(ours <= theirs / 100.0, "valkyrie {ours} vs valkey-sentinel {theirs}");

        // Structurally: one pipelined batch gets one answer per pause.
        let mut c = Conn::connect(op);
        let mut batch = BytesMut::new();
        for i in 0..20 {
            valkyrie_protocol::encode_command(&["AUTH", &format!("g{i}")], &mut batch);
        }
        c.stream.write_all(&batch).unwrap();
        let start = Instant::now();
        let _ = c.reply();
        let _ = c.reply();
        assert!(start.elapsed() >= Duration::from_millis(90), "{:?}", start.elapsed());
        // A right password still logs in, after the pause.
        let mut ok = Conn::connect(op);
        assert_eq!(ok.ask(&["AUTH", "wrong"])[..10], b"-WRONGPASS"[..]);
        assert_eq!(ok.ask(&["AUTH", "right"]), b"+OK\r\n");

        // Counted, never with the password.
        let failures = auth_failures(admin) - failures_before;
        assert!(failures >= ours * 2.0 - 1.0 && failures > 0.0, "{failures}");
        let metrics = http_get(admin, "/metrics");
        assert!(metrics.contains("# HELP valkyrie_sentinel_auth_failures_total"));
        assert!(!metrics.contains("guess"));
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}
