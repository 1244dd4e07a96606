//! The index (topology-push) port against real valkey-server processes: a
//! snapshot on connect, watch filters, error replies to malformed
//! commands, a push after a real failover (master killed) with the new
//! master and a higher epoch that the Sentinel port agrees with, and a
//! reconnect after a daemon restart that never goes back in epoch.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;
use valkyrie::config::Config;
use valkyrie::daemon::Daemon;
use valkyrie_protocol::Frame;
use valkyrie_protocol::index::{
    ClientError, GroupSnapshot, IndexClient, MasterState, Outcome, Update, View,
};

fn config(dir: &std::path::Path, groups: &[(&str, u16)]) -> Config {
    let groups = groups
        .iter()
        .map(|(name, port)| {
            let mut g = fast_group(*port);
            g.name = (*name).to_string();
            g.quorum = 1;
            g
        })
        .collect();
    Config {
        index_port: free_port(),
        ..daemon_config(dir, groups)
    }
}

/// A raw line-by-line connection, as `nc` would see it.
struct Lines {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Lines {
    fn connect(port: u16) -> Lines {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Lines {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, text: &str) {
        self.w.write_all(text.as_bytes()).unwrap();
    }

    /// The next line, without its terminator; `None` at end of stream.
    fn line(&mut self) -> Option<String> {
        let mut s = String::new();
        match self.r.read_line(&mut s) {
            Ok(0) => None,
            Ok(_) => Some(s.trim_end_matches('\n').to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("read: {e}"),
        }
    }

    fn ask(&mut self, text: &str) -> String {
        self.send(text);
        self.line().unwrap()
    }

    /// Lines up to and including `END <group>`.
    fn snapshot(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let l = self.line().unwrap();
            let end = l.starts_with("END ");
            out.push(l);
            if end {
                return out;
            }
        }
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// Reads snapshots until `done` holds for one; returns it.
async fn until(
    c: &mut IndexClient,
    limit: Duration,
    mut done: impl FnMut(&GroupSnapshot) -> bool,
) -> GroupSnapshot {
    tokio::time::timeout(limit, async {
        loop {
            if let Update::Snapshot(s) = c.next().await.unwrap()
                && done(&s)
            {
                return s;
            }
        }
    })
    .await
    .expect("no matching snapshot in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_on_connect_filters_and_errors() {
    let bin = valkey_server();
    let tmp = TempDir::new("index-wire");
    let (master, r1, r2) = start_trio(&bin, &tmp.0);
    let other = Server::start(&bin, &tmp.0, free_port(), None);
    let (pm, po) = (master.port, other.port);
    let cfg = config(
        &tmp.0,
        &[("mymaster", pm), ("cache-a", po), ("cache-b", po)],
    );
    let d = Daemon::start(cfg).await.unwrap();
    let ip = d.index_addrs[0].port();
    let h = d.handle.clone();
    let myid = h.myid.clone();
    let (rp1, rp2) = (r1.port, r2.port);
    blocking(move || {
        wait_until(Duration::from_secs(10), || {
            h.topology.borrow().groups["mymaster"].replicas.len() == 2
        })
    })
    .await;

    blocking(move || {
        let mut c = Lines::connect(ip);
        let greeting = c.line().unwrap();
        assert!(
            greeting.starts_with(&format!("VALKYRIE-INDEX 2 server={myid} run=")),
            "{greeting}"
        );
        assert!(greeting.ends_with(" heartbeat=15000"), "{greeting}");
        // A newer client is answered with the version this server speaks.
        assert_eq!(c.ask("hello 7\r\n"), "HELLO 2");
        // Version 1 from here on: no marks.
        assert_eq!(c.ask("HELLO 1\n"), "HELLO 1");
        assert_eq!(c.ask("PING abc\n"), "PONG abc");

        // Malformed commands get errors; the connection goes on.
        assert_eq!(
            c.ask("BOGUS x\n"),
            "ERR unknown-command unknown command 'BOGUS'"
        );
        assert_eq!(c.ask("HELLO x\n"), "ERR syntax invalid version");
        assert_eq!(
            c.ask("HELLO 0\n"),
            "ERR version unsupported protocol version 0; this server speaks 1 to 2"
        );
        assert_eq!(c.ask("WATCH\n"), "ERR syntax usage: WATCH <group-or-glob>…");
        assert_eq!(c.ask("WATCH bad%zz\n"), "ERR syntax invalid %-escape");
        assert_eq!(c.ask("PING a b\n"), "ERR syntax usage: PING [token]");
        assert_eq!(c.ask("QUIT now\n"), "ERR syntax usage: QUIT");
        assert_eq!(c.ask("ACK\n"), "ERR syntax usage: ACK <mark>");
        assert_eq!(c.ask("ACK 12\n"), "ERR syntax a mark is 16 hex digits");
        assert_eq!(
            c.ask("ACK +123456789abcdef\n"),
            "ERR syntax a mark is 16 hex digits"
        );
        assert_eq!(c.ask("PING \x01\n"), "ERR syntax invalid byte 0x01 in line");
        let many = (0..257).map(|i| format!(" g{i}")).collect::<String>();
        assert_eq!(
            c.ask(&format!("WATCH{many}\n")),
            "ERR limit more than 256 patterns"
        );
        // Blank lines are ignored, as in Valkey's inline protocol.
        assert_eq!(c.ask("\n\r\n   \nPING\n"), "PONG");

        // Snapshot on watch: the exact lines.
        assert_eq!(c.ask("WATCH mymaster\n"), "WATCHING 1");
        let snap = c.snapshot();
        // Versions count changes since the index server started (replicas
        // may have been discovered before or after).
        let version: u64 = snap[0]
            .strip_prefix("SNAPSHOT mymaster epoch=0 version=")
            .unwrap_or_else(|| panic!("{}", snap[0]))
            .parse()
            .unwrap();
        assert!((1..=3).contains(&version), "{}", snap[0]);
        assert_eq!(
            snap[1],
            format!("MASTER 127.0.0.1 {pm} state=up failover=none")
        );
        assert_eq!(snap.len(), 5, "{snap:?}");
        assert_eq!(snap[4], "END mymaster");
        let mut replicas: Vec<u16> = snap[2..4]
            .iter()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f[0], "REPLICA");
                assert_eq!(f[3], "state=up");
                assert!(f[4].starts_with("offset="));
                assert_eq!(f[5], "priority=100");
                f[2].parse().unwrap()
            })
            .collect();
        replicas.sort_unstable();
        let mut expected = vec![rp1, rp2];
        expected.sort_unstable();
        assert_eq!(replicas, expected);
        // Watching the same pattern again sends nothing new.
        assert_eq!(c.ask("WATCH mymaster\n"), "WATCHING 1");
        assert_eq!(c.ask("PING\n"), "PONG");

        // A line longer than the limit: an error, then the connection is
        // closed; other subscribers are not affected.
        let mut bad = Lines::connect(ip);
        bad.line().unwrap();
        bad.send(&"x".repeat(5000));
        assert_eq!(bad.line().unwrap(), "ERR limit line longer than 4096 bytes");
        assert_eq!(bad.line(), None);
        assert_eq!(c.ask("PING still\n"), "PONG still");
        assert_eq!(c.ask("QUIT\n"), "BYE");
        assert_eq!(c.line(), None);
    })
    .await;

    // Filters: a glob sees only its groups, in name order.
    let mut c = IndexClient::connect(("127.0.0.1", ip)).await.unwrap();
    assert_eq!(c.version(), 2);
    assert_eq!(c.watch(&["cache-*"]).await.unwrap(), 1);
    let mut seen = Vec::new();
    for _ in 0..2 {
        match c.next().await.unwrap() {
            Update::Snapshot(s) => {
                assert_eq!(s.master.port, po);
                assert_eq!(s.master.state, MasterState::Up);
                seen.push(s.group);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, ["cache-a", "cache-b"]);
    c.ping().await.unwrap();
    assert!(c.pending().is_none(), "mymaster must not be sent");
    // `?` matches one character; a second pattern adds to the set.
    assert_eq!(c.watch(&["my?aster"]).await.unwrap(), 2);
    match c.next().await.unwrap() {
        Update::Snapshot(s) => assert_eq!(s.group, "mymaster"),
        other => panic!("{other:?}"),
    }
    c.quit().await.unwrap();

    // `valkyrie watch --once --json`: one JSON object per matching group.
    let out = blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .args(["watch", "--once", "--json", "--addr"])
            .arg(format!("127.0.0.1:{ip}"))
            .args(["cache-*", "nosuch"])
            .output()
            .unwrap()
    })
    .await;
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["group"], "cache-a");
    assert_eq!(lines[1]["group"], "cache-b");
    assert_eq!(lines[1]["master"]["port"], po);
    assert_eq!(lines[1]["master"]["state"], "up");
    assert_eq!(lines[1]["replicas"], serde_json::json!([]));
    // Nothing listening: a clear error and a failure status.
    let out = blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .args(["watch", "--once", "--addr"])
            .arg(format!("127.0.0.1:{}", free_port()))
            .output()
            .unwrap()
    })
    .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error: i/o error"),
        "{out:?}"
    );
    d.stop().await.unwrap();
    drop((master, r1, r2, other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_after_failover_and_after_daemon_restart() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("valkyrie=info")
        .try_init();
    let bin = valkey_server();
    let tmp = TempDir::new("index-failover");
    let (mut master, r1, r2) = start_trio(&bin, &tmp.0);
    let (pm, p1, p2) = (master.port, r1.port, r2.port);
    let cfg = config(&tmp.0, &[("mymaster", pm)]);
    let d = Daemon::start(cfg.clone()).await.unwrap();
    let ip = d.index_addrs[0].port();
    let sp = d.sentinel_addrs[0].port();

    let mut c = IndexClient::connect(("127.0.0.1", ip)).await.unwrap();
    let mut view = View::new();
    view.set_run(&c.greeting().run);
    c.watch(&["mymaster"]).await.unwrap();
    let before = until(&mut c, Duration::from_secs(10), |s| s.replicas.len() == 2).await;
    assert_eq!(before.master.port, pm);
    assert_eq!(view.apply(before.clone()), Outcome::Changed);

    master.kill();
    let killed_at = std::time::Instant::now();
    let after = until(&mut c, Duration::from_secs(20), |s| s.master.port != pm).await;
    eprintln!("new master pushed {:?} after SIGKILL", killed_at.elapsed());
    assert!(
        after.master.port == p1 || after.master.port == p2,
        "{after:?}"
    );
    assert!(after.epoch > before.epoch, "{before:?} then {after:?}");
    assert!(after.version > before.version);
    assert_eq!(view.apply(after.clone()), Outcome::Changed);
    // The Sentinel port reports the master the index pushed.
    let np = after.master.port;
    let reported =
        blocking(move || call(sp, &["SENTINEL", "get-master-addr-by-name", "mymaster"])).await;
    assert_eq!(
        reported,
        Frame::Array(vec![Frame::bulk("127.0.0.1"), Frame::bulk(np.to_string())])
    );
    // An older snapshot offered again is refused.
    assert_eq!(view.apply(before.clone()), Outcome::Stale);

    // Daemon restart: subscribers are disconnected; a new connection gets
    // a new run id and a snapshot whose epoch is not lower than before.
    d.stop().await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match c.next().await {
                Ok(_) => {}
                Err(e) => return e,
            }
        }
    })
    .await
    .expect("subscriber not closed at daemon stop");
    assert!(
        matches!(closed, ClientError::Closed | ClientError::Io(_)),
        "{closed}"
    );
    let d2 = Daemon::start(cfg).await.unwrap();
    let mut c2 = IndexClient::connect(("127.0.0.1", ip)).await.unwrap();
    assert_ne!(c2.greeting().run, c.greeting().run);
    view.set_run(&c2.greeting().run);
    c2.watch(&["mymaster"]).await.unwrap();
    let again = match c2.next().await.unwrap() {
        Update::Snapshot(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(again.epoch >= after.epoch, "{after:?} then {again:?}");
    assert_eq!(again.master.port, after.master.port);
    // Versions restarted with the run; the view still takes the snapshot.
    assert_ne!(view.apply(again), Outcome::Stale);
    d2.stop().await.unwrap();
    drop((master, r1, r2));
}
