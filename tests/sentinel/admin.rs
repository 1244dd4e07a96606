//! The Sentinel port's administrative commands on the wire, exact bytes
//! from a real Valkey 8.0.1 sentinel: `SENTINEL MONITOR/SET/RESET/REMOVE/
//! CONFIG/FLUSHCONFIG` acting on real `valkey-server`s and surviving a
//! restart, `CLIENT LIST/INFO/KILL/REPLY/…`, the pub/sub output limit, and
//! `SHUTDOWN` ending the daemon process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use support::wire::*;
use support::*;
use valkyrie::config::OutputLimit;
use valkyrie::core::{Channel, Event};
use valkyrie::daemon::Daemon;

/// Reads pub/sub messages until `n` arrived or 5 s passed.
fn messages(sub: &mut Raw, n: usize) -> String {
    let mut got = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got.matches("$7\r\nmessage\r\n").count() < n && std::time::Instant::now() < deadline {
        got.push_str(&sub.ask(""));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitoring_changes_act_and_persist() {
    let bin = valkey_server();
    let tmp = TempDir::new("admin");
    let (master, _r1, _r2) = start_trio(&bin, &tmp.0);
    let pm = master.port.to_string();
    let d = Daemon::start(daemon_config(&tmp.0, vec![])).await.unwrap();
    let sp = d.sentinel_addrs[0].port();

    let pm2 = pm.clone();
    tokio::task::spawn_blocking(move || {
        let pm = pm2;
        let mut sub = Raw::connect(sp);
        sub.ask(&cmd(&["SUBSCRIBE", "+monitor", "+set", "-monitor", "+reset-master"]));
        let mut c = Raw::connect(sp);
        // Errors, in Sentinel's order of checks.
        for (args, reply) in [
            (vec!["1"], "-ERR wrong number of arguments for 'sentinel|monitor' command\r\n"),
            (vec!["127.0.0.1", &pm, "0"], "-ERR Quorum must be 1 or greater.\r\n"),
            (vec!["127.0.0.1", &pm, "x"], "-ERR Invalid quorum\r\n"),
            (vec!["127.0.0.1", "x", "1"], "-ERR Invalid port\r\n"),
            (vec!["127.0.0.1", "99999", "1"], "-ERR Invalid port number.\r\n"),
            (vec!["notanip", &pm, "1"], "-ERR Invalid IP address or hostname specified\r\n"),
        ] {
            let mut full = vec!["SENTINEL", "MONITOR", "other"];
            full.extend(args);
            assert_eq!(c.ask(&cmd(&full)), reply, "{full:?}");
        }
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "MONITOR", "other", "127.0.0.1", &pm, "2"])),
            "+OK\r\n"
        );
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "MONITOR", "other", "127.0.0.1", &pm, "2"])),
            "-ERR Duplicate master name.\r\n"
        );
        let ev = messages(&mut sub, 1);
        let payload = format!("master other 127.0.0.1 {pm} quorum 2");
        assert!(
            ev.contains(&format!("$8\r\n+monitor\r\n${}\r\n{payload}\r\n", payload.len())),
            "{ev}"
        );
        // The new group is monitored for real: its replicas are found
        // through the master's INFO.
        wait_until(Duration::from_secs(10), || {
            c.ask(&cmd(&["SENTINEL", "REPLICAS", "other"]))
                .starts_with("*2\r\n")
        });
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other"])),
            format!("*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{pm}\r\n", pm.len())
        );

        // SET: validation first, all or nothing.
        for (args, reply) in [
            (vec!["other"], "-ERR wrong number of arguments for 'sentinel|set' command\r\n"),
            (vec!["other", "quorum"], "-ERR wrong number of arguments for 'sentinel|set' command\r\n"),
            (vec!["nosuch", "quorum", "1"], "-ERR No such master with that name\r\n"),
            (vec!["other", "quorum", "0"], "-ERR Invalid argument '0' for SENTINEL SET 'quorum'\r\n"),
            (vec!["other", "bogus", "1"], "-ERR Unknown option or number of arguments for SENTINEL SET 'bogus'\r\n"),
            (vec!["other", "quorum", "5", "parallel-syncs"], "-ERR Unknown option or number of arguments for SENTINEL SET 'parallel-syncs'\r\n"),
            (vec!["other", "notification-script", "/bin/true"], "-ERR Reconfiguration of scripts path is denied for security reasons. Check the deny-scripts-reconfig configuration directive in your Sentinel configuration\r\n"),
        ] {
            let mut full = vec!["SENTINEL", "SET"];
            full.extend(args);
            assert_eq!(c.ask(&cmd(&full)), reply, "{full:?}");
        }
        let master = c.ask(&cmd(&["SENTINEL", "MASTER", "other"]));
        assert!(master.contains("$6\r\nquorum\r\n$1\r\n2\r\n"), "a rejected SET changed nothing: {master}");
        assert_eq!(
            c.ask(&cmd(&[
                "SENTINEL", "SET", "other", "quorum", "3", "down-after-milliseconds", "5000",
                "auth-pass", "", "parallel-syncs", "2"
            ])),
            "+OK\r\n"
        );
        let ev = messages(&mut sub, 4);
        for change in ["quorum 3", "down-after-milliseconds 5000", "auth-pass ******", "parallel-syncs 2"] {
            let payload = format!("master other 127.0.0.1 {pm} {change}");
            assert!(
                ev.contains(&format!("$4\r\n+set\r\n${}\r\n{payload}\r\n", payload.len())),
                "{change}: {ev}"
            );
        }
        let master = c.ask(&cmd(&["SENTINEL", "MASTER", "other"]));
        assert!(master.contains("$6\r\nquorum\r\n$1\r\n3\r\n"), "{master}");
        assert!(master.contains("$23\r\ndown-after-milliseconds\r\n$4\r\n5000\r\n"), "{master}");
        assert!(master.contains("$14\r\nparallel-syncs\r\n$1\r\n2\r\n"), "{master}");

        // RESET forgets the replicas; they are found again.
        assert_eq!(c.ask(&cmd(&["SENTINEL", "RESET", "oth*"])), ":1\r\n");
        assert_eq!(c.ask(&cmd(&["SENTINEL", "RESET", "nomatch"])), ":0\r\n");
        assert_eq!(c.ask(&cmd(&["SENTINEL", "RESET", "OTH*"])), ":0\r\n", "case-sensitive");
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "RESET"])),
            "-ERR wrong number of arguments for 'sentinel|reset' command\r\n"
        );
        let ev = messages(&mut sub, 1);
        let payload = format!("master other 127.0.0.1 {pm}");
        assert!(
            ev.contains(&format!("$13\r\n+reset-master\r\n${}\r\n{payload}\r\n", payload.len())),
            "{ev}"
        );
        wait_until(Duration::from_secs(10), || {
            c.ask(&cmd(&["SENTINEL", "REPLICAS", "other"]))
                .starts_with("*2\r\n")
        });

        // CONFIG GET/SET, byte for byte.
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "CONFIG", "GET", "*"])),
            "*14\r\n$17\r\nresolve-hostnames\r\n$2\r\nno\r\n$18\r\nannounce-hostnames\r\n$2\r\nno\r\n$11\r\nannounce-ip\r\n$0\r\n\r\n$13\r\nannounce-port\r\n$1\r\n0\r\n$13\r\nsentinel-user\r\n$0\r\n\r\n$13\r\nsentinel-pass\r\n$0\r\n\r\n$8\r\nloglevel\r\n$6\r\nnotice\r\n"
        );
        for (args, reply) in [
            (vec!["GET", "announce-ip", "loglevel", "announce-ip"], "*4\r\n$11\r\nannounce-ip\r\n$0\r\n\r\n$8\r\nloglevel\r\n$6\r\nnotice\r\n"),
            (vec!["GET", "nomatch"], "*0\r\n"),
            (vec!["SET", "loglevel", "bogus"], "-ERR Invalid value 'bogus' to SENTINEL CONFIG SET 'loglevel'\r\n"),
            (vec!["SET", "bogus", "1"], "-ERR Invalid argument 'bogus' to SENTINEL CONFIG SET\r\n"),
            (vec!["SET", "loglevel"], "-ERR Only SENTINEL CONFIG GET <param> [<param> <param> ...] / SET <param> <value> [<param> <value> ...] are supported.\r\n"),
            (vec!["SET", "loglevel", "notice", "loglevel", "notice"], "-ERR Duplicate argument 'loglevel' to SENTINEL CONFIG SET\r\n"),
            (vec!["SET", "announce-port", "70000"], "-ERR Invalid value '70000' to SENTINEL CONFIG SET 'announce-port'\r\n"),
            (vec!["FOO", "bar"], "-ERR Only SENTINEL CONFIG GET <param> [<param> <param> ...] / SET <param> <value> [<param> <value> ...] are supported.\r\n"),
            (vec!["GET"], "-ERR wrong number of arguments for 'sentinel|config' command\r\n"),
            (vec!["SET", "announce-ip", "10.1.2.3", "loglevel", "verbose"], "+OK\r\n"),
            (vec!["GET", "announce-ip"], "*2\r\n$11\r\nannounce-ip\r\n$8\r\n10.1.2.3\r\n"),
        ] {
            let mut full = vec!["SENTINEL", "CONFIG"];
            full.extend(args);
            assert_eq!(c.ask(&cmd(&full)), reply, "{full:?}");
        }
        assert_eq!(c.ask(&cmd(&["SENTINEL", "FLUSHCONFIG"])), "+OK\r\n");
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "FLUSHCONFIG", "x"])),
            "-ERR wrong number of arguments for 'sentinel|flushconfig' command\r\n"
        );
    })
    .await
    .unwrap();

    // The state file now carries the monitoring configuration, readable by
    // its owner only (it may hold auth-pass values).
    let state = tmp.0.join("valkyrie-state.json");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    d.stop().await.unwrap();

    // A restart brings back what was changed at runtime, not the file's
    // (empty) group list.
    let d = Daemon::start(daemon_config(&tmp.0, vec![])).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    let pm2 = pm.clone();
    tokio::task::spawn_blocking(move || {
        let pm = pm2;
        let mut c = Raw::connect(sp);
        let master = c.ask(&cmd(&["SENTINEL", "MASTER", "other"]));
        assert!(master.contains("$6\r\nquorum\r\n$1\r\n3\r\n"), "{master}");
        assert!(master.contains("$23\r\ndown-after-milliseconds\r\n$4\r\n5000\r\n"), "{master}");
        assert_eq!(
            c.ask(&cmd(&["SENTINEL", "CONFIG", "GET", "announce-*"])),
            "*6\r\n$18\r\nannounce-hostnames\r\n$2\r\nno\r\n$11\r\nannounce-ip\r\n$8\r\n10.1.2.3\r\n$13\r\nannounce-port\r\n$1\r\n0\r\n"
        );
        let mut sub = Raw::connect(sp);
        sub.ask(&cmd(&["SUBSCRIBE", "-monitor"]));
        assert_eq!(c.ask(&cmd(&["SENTINEL", "REMOVE", "nosuch"])), "-ERR No such master with that name\r\n");
        assert_eq!(c.ask(&cmd(&["SENTINEL", "REMOVE", "other"])), "+OK\r\n");
        let ev = messages(&mut sub, 1);
        let payload = format!("master other 127.0.0.1 {pm}");
        assert!(
            ev.contains(&format!("$8\r\n-monitor\r\n${}\r\n{payload}\r\n", payload.len())),
            "{ev}"
        );
        assert_eq!(c.ask(&cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other"])), "*-1\r\n");
        assert_eq!(c.ask(&cmd(&["SENTINEL", "MASTERS"])), "*0\r\n");
    })
    .await
    .unwrap();
    d.stop().await.unwrap();

    // Removed for good: a restart does not bring it back.
    let d = Daemon::start(daemon_config(&tmp.0, vec![])).await.unwrap();
    assert!(d.handle.topology.borrow().groups.is_empty());
    d.stop().await.unwrap();
}

/// The `CLIENT LIST` fields of a Valkey 8.0.1 sentinel, in order.
const LIST_FIELDS: [&str; 32] = [
    "id",
    "addr",
    "laddr",
    "fd",
    "name",
    "age",
    "idle",
    "flags",
    "db",
    "sub",
    "psub",
    "ssub",
    "multi",
    "watch",
    "qbuf",
    "qbuf-free",
    "argv-mem",
    "multi-mem",
    "rbs",
    "rbp",
    "obl",
    "oll",
    "omem",
    "tot-mem",
    "events",
    "cmd",
    "user",
    "redir",
    "resp",
    "lib-name",
    "lib-ver",
    "tot-net-in",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands() {
    let tmp = TempDir::new("client");
    let d = Daemon::start(daemon_config(&tmp.0, vec![])).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    tokio::task::spawn_blocking(move || {
        let mut c = Raw::connect(sp);
        let mut other = Raw::connect(sp);
        assert_eq!(other.ask(&cmd(&["CLIENT", "SETNAME", "other"])), "+OK\r\n");
        assert_eq!(
            other.ask(&cmd(&["CLIENT", "SETINFO", "lib-name", "redis-py"])),
            "+OK\r\n"
        );
        let other_id = other.ask(&cmd(&["CLIENT", "ID"]));
        let other_id = other_id.trim_start_matches(':').trim_end();

        let info = c.ask(&cmd(&["CLIENT", "INFO"]));
        let body = info.split_once("\r\n").unwrap().1;
        assert!(body.ends_with("\n\r\n"), "{info}");
        let line = body.trim_end();
        let names: Vec<&str> = line
            .split(' ')
            .map(|kv| kv.split_once('=').unwrap().0)
            .collect();
        assert_eq!(&names[..32], &LIST_FIELDS[..], "{line}");
        assert_eq!(&names[32..], ["tot-net-out", "tot-cmds"]);
        assert!(line.contains(" flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 "), "{line}");
        assert!(line.contains(" cmd=client|info user=default redir=-1 resp=2 "), "{line}");
        assert!(line.contains(&format!(" laddr=127.0.0.1:{sp} ")), "{line}");

        let list = c.ask(&cmd(&["CLIENT", "LIST"]));
        assert_eq!(list.matches("id=").count(), 2, "{list}");
        assert!(list.contains(" name=other "), "{list}");
        assert!(list.contains(" lib-name=redis-py "), "{list}");
        let by_id = c.ask(&cmd(&["CLIENT", "LIST", "ID", other_id]));
        assert!(by_id.contains(" name=other ") && by_id.matches("id=").count() == 1, "{by_id}");
        assert_eq!(c.ask(&cmd(&["CLIENT", "LIST", "ID", "99999"])), "$0\r\n\r\n");
        assert_eq!(c.ask(&cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])), "$0\r\n\r\n");
        assert_eq!(
            c.ask(&cmd(&["CLIENT", "LIST", "TYPE", "bogus"])),
            "-ERR Unknown client type 'bogus'\r\n"
        );

        // Errors and no-op subcommands, as a sentinel answers them.
        for (args, reply) in [
            (vec!["KILL", "1.2.3.4:5"], "-ERR No such client\r\n"),
            (vec!["KILL", "ID", "999999"], ":0\r\n"),
            (vec!["KILL", "TYPE", "bogus"], "-ERR Unknown client type 'bogus'\r\n"),
            (vec!["KILL", "FOO", "bar"], "-ERR syntax error\r\n"),
            (vec!["KILL", "ID", "0"], "-ERR client-id should be greater than 0\r\n"),
            (vec!["KILL", "USER", "nobody"], "-ERR No such user 'nobody'\r\n"),
            (vec!["SETNAME"], "-ERR wrong number of arguments for 'client|setname' command\r\n"),
            (vec!["SETNAME", "a b"], "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"),
            (vec!["SETINFO", "foo", "x"], "-ERR Unrecognized option 'foo'\r\n"),
            (vec!["NO-EVICT", "on"], "+OK\r\n"),
            (vec!["NO-EVICT", "maybe"], "-ERR syntax error\r\n"),
            (vec!["NO-TOUCH", "on"], "-ERR unknown subcommand 'NO-TOUCH'. Try CLIENT HELP.\r\n"),
            (vec!["GETREDIR"], ":-1\r\n"),
            (vec!["TRACKINGINFO"], "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"),
            (vec!["UNBLOCK", "1"], ":0\r\n"),
            (vec!["PAUSE", "10"], "+OK\r\n"),
            (vec!["UNPAUSE"], "+OK\r\n"),
            (vec!["CACHING", "yes"], "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"),
        ] {
            let mut full = vec!["CLIENT"];
            full.extend(args);
            assert_eq!(c.ask(&cmd(&full)), reply, "{full:?}");
        }
        assert!(c.ask(&cmd(&["CLIENT", "INFO"])).contains(" flags=e "));
        let help = c.ask(&cmd(&["CLIENT", "HELP"]));
        assert!(help.starts_with("*62\r\n+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+CACHING (YES|NO)\r\n"), "{help}");
        assert!(help.ends_with("+HELP\r\n+    Print this help.\r\n"));

        // RESP3: maps, sets and verbatim text where a sentinel sends them.
        let mut r3 = Raw::connect(sp);
        assert!(r3.ask(&cmd(&["HELLO", "3"])).starts_with("%6\r\n"));
        assert_eq!(
            r3.ask(&cmd(&["CLIENT", "TRACKINGINFO"])),
            "%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"
        );
        assert_eq!(
            r3.ask(&cmd(&["SENTINEL", "CONFIG", "GET", "loglevel"])),
            "%1\r\n$8\r\nloglevel\r\n$6\r\nnotice\r\n"
        );
        let info3 = r3.ask(&cmd(&["CLIENT", "INFO"]));
        let (head, body) = info3.split_once("\r\n").unwrap();
        assert!(head.starts_with('=') && body.starts_with("txt:id="), "{info3}");
        assert_eq!(head[1..].parse::<usize>().unwrap(), body.len() - 2, "{info3}");
        assert!(body.contains(" resp=3 "), "{info3}");
        drop(r3);

        // REPLY OFF and SKIP silence replies; ON answers again.
        assert_eq!(c.ask_none(&cmd(&["CLIENT", "REPLY", "OFF"])), "");
        assert_eq!(c.ask_none(&cmd(&["PING"])), "");
        assert_eq!(c.ask(&cmd(&["CLIENT", "REPLY", "ON"])), "+OK\r\n");
        assert_eq!(c.ask_none(&cmd(&["CLIENT", "REPLY", "SKIP"])), "");
        assert_eq!(c.ask_none(&cmd(&["PING", "a"])), "");
        assert_eq!(c.ask(&cmd(&["PING", "b"])), "$1\r\nb\r\n");

        // KILL by id closes that connection, and only it.
        assert_eq!(c.ask(&cmd(&["CLIENT", "KILL", "ID", other_id])), ":1\r\n");
        assert!(other.closed());
        assert_eq!(c.ask(&cmd(&["PING"])), "+PONG\r\n");

        // KILL TYPE pubsub takes subscribers only.
        let mut sub = Raw::connect(sp);
        assert!(sub.ask(&cmd(&["SUBSCRIBE", "+switch-master"])).starts_with("*3\r\n"));
        let pubsub = c.ask(&cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]));
        assert!(pubsub.contains(" flags=P ") && pubsub.contains(" sub=1 "), "{pubsub}");
        // Closed connections leave the count as soon as their task sees
        // the close.
        let want = "\r\nconnected_clients:2\r\nmaxclients:10000\r\nblocked_clients:0\r\npubsub_clients:1\r\n";
        wait_until(Duration::from_secs(5), || {
            c.ask(&cmd(&["INFO", "clients"])).contains(want)
        });
        let stats = c.ask(&cmd(&["INFO", "stats"]));
        let field = |name: &str| -> u64 {
            stats
                .split("\r\n")
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {stats}"))
        };
        assert!(field("total_connections_received:") >= 3);
        assert!(field("total_commands_processed:") >= 30);
        assert!(field("total_net_input_bytes:") > 0 && field("total_net_output_bytes:") > 0);
        assert!(c.ask(&cmd(&["INFO", "cpu"])).contains("# CPU\r\nused_cpu_sys:"));
        assert_eq!(c.ask(&cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])), ":1\r\n");
        assert!(sub.closed());

        // The old form by address; killing oneself still gets the reply.
        let mut third = Raw::connect(sp);
        // Served, hence registered.
        assert_eq!(third.ask(&cmd(&["PING"])), "+PONG\r\n");
        let addr = third.0.local_addr().unwrap().to_string();
        assert_eq!(c.ask(&cmd(&["CLIENT", "KILL", &addr])), "+OK\r\n");
        assert!(third.closed());
        let mine = c.0.local_addr().unwrap().to_string();
        assert_eq!(c.ask(&cmd(&["CLIENT", "KILL", &mine])), "+OK\r\n");
        assert!(c.closed());
    })
    .await
    .unwrap();
    d.stop().await.unwrap();
}

/// Sends `n` events of about 200 bytes at a pace every reading
/// subscriber keeps up with.
async fn flood(d: &Daemon, n: usize) {
    let payload = format!("master flood 127.0.0.1 6379 {}", "x".repeat(170));
    for i in 0..n {
        let _ = d
            .handle
            .events
            .send(Event::new(Channel::Sdown, payload.clone()));
        if i % 100 == 99 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// A subscriber that does not read is closed once its pending output
/// passes the pub/sub limit in bytes; one that reads gets every event; and
/// under the default limit the same flood does not close anybody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_subscribers_are_closed_by_output_bytes() {
    const EVENTS: usize = 20_000;
    let tmp = TempDir::new("slowsub");
    let mut cfg = daemon_config(&tmp.0, vec![]);
    cfg.pubsub_limit = OutputLimit {
        hard: 256 * 1024,
        soft: 0,
        soft_secs: 0,
    };
    let small = Daemon::start(cfg).await.unwrap();
    let tmp2 = TempDir::new("slowsub-default");
    let default = Daemon::start(daemon_config(&tmp2.0, vec![])).await.unwrap();

    for (d, expect_closed) in [(&small, true), (&default, false)] {
        let sp = d.sentinel_addrs[0].port();
        let (mut stalled, reader) = tokio::task::spawn_blocking(move || {
            let mut stalled = Raw::connect(sp);
            stalled.ask(&cmd(&["SUBSCRIBE", "+sdown"]));
            let mut reader = Raw::connect(sp);
            reader.ask(&cmd(&["PSUBSCRIBE", "*"]));
            (stalled, reader)
        })
        .await
        .unwrap();
        // The reader counts what it gets while the flood runs.
        let counting = std::thread::spawn(move || {
            let mut reader = reader;
            reader
                .0
                .set_read_timeout(Some(Duration::from_secs(3)))
                .unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut seen = 0usize;
            let needle = b"$6\r\n+sdown\r\n";
            let mut tail: Vec<u8> = Vec::new();
            while seen < EVENTS {
                let Ok(n) = reader.0.read(&mut buf) else {
                    break;
                };
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                let mut i = 0;
                while let Some(p) = tail[i..].windows(needle.len()).position(|w| w == needle) {
                    seen += 1;
                    i += p + needle.len();
                }
                tail.drain(..i);
            }
            (seen, reader)
        });
        flood(d, EVENTS).await;
        let (seen, _reader) = counting.join().unwrap();
        assert_eq!(seen, EVENTS, "the reading subscriber got every event");

        let (closed, pubsub, pending) = tokio::task::spawn_blocking(move || {
            let mut c = Raw::connect(sp);
            let list = c.ask(&cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]));
            // Writing to a closed connection fails or reads EOF.
            let _ = stalled.0.write_all(&cmd(&["PING"]).into_bytes());
            let closed = {
                // Drain what the kernel holds; EOF means closed.
                stalled.closed()
            };
            let pending = list
                .split(' ')
                .filter_map(|kv| kv.strip_prefix("omem="))
                .filter_map(|v| v.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            (closed, list.matches("id=").count(), pending)
        })
        .await
        .unwrap();
        if expect_closed {
            assert!(closed, "the stalled subscriber was closed");
            assert_eq!(pubsub, 1, "only the reader is left");
        } else {
            assert_eq!(pubsub, 2, "nobody closed under the default limit");
            assert!(
                pending > 0,
                "CLIENT LIST shows the stalled subscriber's pending output"
            );
        }
    }
    small.stop().await.unwrap();
    default.stop().await.unwrap();
}

#[test]
fn shutdown_ends_the_daemon() {
    let tmp = TempDir::new("shutdown");
    let port = free_port();
    let conf = tmp.0.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!("port {port}\nbind 127.0.0.1\ndir {}\n", tmp.0.display()),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_valkyrie"))
        .arg(&conf)
        .arg("--index-port")
        .arg("0")
        .arg("--admin-port")
        .arg("0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(10), || {
        try_call(port, &["PING"]).is_ok()
    });
    let mut c = Raw::connect(port);
    assert_eq!(
        c.ask(&cmd(&["SHUTDOWN", "ABORT"])),
        "-ERR No shutdown in progress.\r\n"
    );
    assert_eq!(c.ask(&cmd(&["SHUTDOWN", "BOGUS"])), "-ERR syntax error\r\n");
    assert_eq!(
        c.ask(&cmd(&["SHUTDOWN", "SAVE", "NOSAVE"])),
        "-ERR syntax error\r\n"
    );
    // No reply: the connection closes and the process exits cleanly.
    c.0.write_all(cmd(&["SHUTDOWN", "NOSAVE", "NOW"]).as_bytes())
        .unwrap();
    assert!(c.closed());
    let mut status = None;
    wait_until(Duration::from_secs(10), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
}
