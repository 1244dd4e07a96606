//! Event bursts on the Sentinel port: a subscriber that reads is never
//! disconnected and gets every event of its channels in order; the only
//! disconnect is the per-subscriber output limit in bytes, counting only
//! what it subscribed to; a closed subscriber's buffers are released at
//! once. The `SENTINEL SET` burst is run against a real valkey-sentinel
//! 8.0.1 too, which delivers all 4,080 events and disconnects nobody.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::wire::*;
use support::*;
use valkyrie::config::{GroupConfig, OutputLimit};
use valkyrie::core::{Channel, Event};
use valkyrie::daemon::Daemon;

const PAYLOAD_PAD: usize = 170;

fn payload(i: usize) -> String {
    format!("master g{i:06} 127.0.0.1 6379 {}", "x".repeat(PAYLOAD_PAD))
}

/// Reads pub/sub messages of `channel` (RESP2 `message` or `pmessage`)
/// until `n` arrived, EOF, or 20 s passed; returns their payloads and
/// whether the connection was closed.
fn read_messages(sub: &mut Raw, channel: &str, n: usize) -> (Vec<String>, bool) {
    sub.0
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let head = format!("${}\r\n{channel}\r\n", channel.len());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = vec![0u8; 1 << 16];
    let mut data: Vec<u8> = Vec::new();
    let mut got = Vec::new();
    let mut closed = false;
    while got.len() < n && Instant::now() < deadline {
        match sub.0.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(k) => data.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            Err(_) => {}
        }
        // Cut whole messages: `... $len channel $len payload\r\n`.
        loop {
            let text = String::from_utf8_lossy(&data).into_owned();
            let Some(at) = text.find(&head) else { break };
            let rest = &text[at + head.len()..];
            let Some(nl) = rest.find("\r\n") else { break };
            let len: usize = rest[1..nl].parse().unwrap();
            if rest.len() < nl + 2 + len + 2 {
                break;
            }
            got.push(rest[nl + 2..nl + 2 + len].to_string());
            let used = at + head.len() + nl + 2 + len + 2;
            data.drain(..used);
        }
    }
    (got, closed)
}

/// A subscriber in subscribed mode answers PING with `pong ""`.
fn answers_ping(c: &mut Raw) -> bool {
    c.ask(&cmd(&["PING"]))
        .ends_with("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
}

/// Whether the daemon still has a socket from `port` to `peer`.
fn socket_exists(port: u16, peer: u16) -> bool {
    let out = Command::new("ss")
        .args(["-tnH", "state", "all"])
        .arg(format!("( sport = :{port} and dport = :{peer} )"))
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

/// Sends `n` events on `channel` without yielding: on this test's
/// single-threaded runtime no connection runs until the burst is over.
fn burst(d: &Daemon, channel: Channel, n: usize) {
    for i in 0..n {
        d.handle.events.send(Event::new(channel, payload(i)));
    }
}

/// 5,000 events in one burst (more than any channel capacity): readers of
/// `+sdown` and of `+sd*` get all of them in order; a subscriber of a quiet
/// channel that never reads is not disconnected; a subscriber that stopped
/// reading and then half-closed its socket is closed at once and its
/// socket released (it used to sit in CLOSE-WAIT with megabytes queued).
#[tokio::test(flavor = "current_thread")]
async fn a_burst_reaches_every_reader_and_disconnects_nobody() {
    const N: usize = 5_000;
    let tmp = TempDir::new("burst");
    let d = Daemon::start(daemon_config(&tmp.0, vec![])).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    let (quiet, reader, preader, half) = tokio::task::spawn_blocking(move || {
        let mut quiet = Raw::connect(sp);
        quiet.ask(&cmd(&["SUBSCRIBE", "+switch-master"]));
        let mut reader = Raw::connect(sp);
        reader.ask(&cmd(&["SUBSCRIBE", "+sdown"]));
        let mut preader = Raw::connect(sp);
        preader.ask(&cmd(&["PSUBSCRIBE", "+sd*"]));
        let mut half = Raw::connect(sp);
        half.ask(&cmd(&["SUBSCRIBE", "+odown"]));
        (quiet, reader, preader, half)
    })
    .await
    .unwrap();
    let readers = std::thread::spawn(move || {
        let (mut reader, mut preader) = (reader, preader);
        let a = read_messages(&mut reader, "+sdown", N);
        let b = read_messages(&mut preader, "+sdown", N);
        (a, b)
    });
    burst(&d, Channel::Sdown, N);
    // 6 MB for `half`, more than the kernel's socket buffers take.
    let big = "y".repeat(4096);
    for _ in 0..1_500 {
        d.handle
            .events
            .send(Event::new(Channel::Odown, big.clone()));
    }
    let ((got, closed), (pgot, pclosed)) =
        tokio::task::spawn_blocking(move || readers.join().unwrap())
            .await
            .unwrap();
    let want: Vec<String> = (0..N).map(payload).collect();
    assert!(!closed && !pclosed, "no reader was disconnected");
    assert_eq!(got.len(), N, "every event reached the +sdown reader");
    assert!(got == want, "in order");
    assert_eq!(pgot.len(), N, "every event reached the +sd* reader");
    assert!(pgot == want, "in order");

    let (quiet_alive, half_released) = tokio::task::spawn_blocking(move || {
        let mut quiet = quiet;
        let alive = answers_ping(&mut quiet);
        // `half` read nothing of 6 MB: it stops sending and waits.
        let half_port = half.0.local_addr().unwrap().port();
        half.0.shutdown(Shutdown::Write).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while socket_exists(sp, half_port) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        (alive, !socket_exists(sp, half_port))
    })
    .await
    .unwrap();
    assert!(quiet_alive, "the quiet subscriber is still connected");
    assert!(
        half_released,
        "a subscriber that went away is closed and released at once"
    );
    d.stop().await.unwrap();
}

/// Under a 256 KiB limit, the same burst closes a subscriber of `+sdown`
/// that does not read, releasing its socket at once, and leaves alone a
/// non-reading subscriber of a channel with no events: the limit counts
/// only what a subscriber subscribed to.
#[tokio::test(flavor = "current_thread")]
async fn the_limit_counts_only_subscribed_channels() {
    const N: usize = 20_000;
    let tmp = TempDir::new("burst-limit");
    let mut cfg = daemon_config(&tmp.0, vec![]);
    cfg.pubsub_limit = OutputLimit {
        hard: 256 * 1024,
        soft: 0,
        soft_secs: 0,
    };
    let d = Daemon::start(cfg).await.unwrap();
    let sp = d.sentinel_addrs[0].port();
    let (quiet, stalled) = tokio::task::spawn_blocking(move || {
        let mut quiet = Raw::connect(sp);
        quiet.ask(&cmd(&["SUBSCRIBE", "+switch-master"]));
        let mut stalled = Raw::connect(sp);
        stalled.ask(&cmd(&["SUBSCRIBE", "+sdown"]));
        (quiet, stalled)
    })
    .await
    .unwrap();
    burst(&d, Channel::Sdown, N);
    // Let the connections run.
    tokio::task::yield_now().await;
    let (quiet_alive, stalled_released) = tokio::task::spawn_blocking(move || {
        let mut quiet = quiet;
        let stalled_port = stalled.0.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_secs(5);
        while socket_exists(sp, stalled_port) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let released = !socket_exists(sp, stalled_port);
        (answers_ping(&mut quiet), released)
    })
    .await
    .unwrap();
    assert!(quiet_alive, "a subscriber of a quiet channel stays");
    assert!(
        stalled_released,
        "the stalled subscriber was closed and its buffers released"
    );
    d.stop().await.unwrap();
}

/// The steps: `SUBSCRIBE +switch-master`, a `+set` reader, then
/// 8 pipelined `SENTINEL SET mymaster` with 510 `quorum 1` pairs each.
/// Returns (events the reader got, whether the quiet subscriber still
/// answers).
fn set_burst(port: u16) -> (usize, bool) {
    let mut quiet = Raw::connect(port);
    quiet.ask(&cmd(&["SUBSCRIBE", "+switch-master"]));
    let mut reader = Raw::connect(port);
    reader.ask(&cmd(&["SUBSCRIBE", "+set"]));
    let mut args = vec!["SENTINEL", "SET", "mymaster"];
    for _ in 0..510 {
        args.extend(["quorum", "1"]);
    }
    let one = cmd(&args);
    let mut c = Raw::connect(port);
    let counting = std::thread::spawn(move || read_messages(&mut reader, "+set", 8 * 510));
    c.0.write_all(one.repeat(8).as_bytes()).unwrap();
    let (got, _) = counting.join().unwrap();
    let want = "master mymaster 127.0.0.1 6999 quorum 1";
    assert!(got.iter().all(|p| p == want), "{:?}", got.first());
    (got.len(), answers_ping(&mut quiet))
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Valkyrie and valkey-sentinel 8.0.1 on the same steps: both deliver all
/// 4,080 `+set` events and keep the quiet subscriber.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_set_burst_same_as_valkey_sentinel() {
    let tmp = TempDir::new("burst-set");
    let group = GroupConfig::new("mymaster", "127.0.0.1", 6999, 2);
    let d = Daemon::start(daemon_config(&tmp.0, vec![group]))
        .await
        .unwrap();
    let sp = d.sentinel_addrs[0].port();
    let ours = tokio::task::spawn_blocking(move || set_burst(sp))
        .await
        .unwrap();
    assert_eq!(ours, (4080, true), "Valkyrie: every +set, nobody closed");
    d.stop().await.unwrap();

    let bin = support::sentinel::valkey_sentinel();
    let port = free_port();
    let conf = tmp.0.join("vs.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 6999 2\n",
            tmp.0.display()
        ),
    )
    .unwrap();
    let _vs = Killed(
        Command::new(bin)
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let theirs = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        set_burst(port)
    })
    .await
    .unwrap();
    assert_eq!(theirs, (4080, true), "valkey-sentinel");
}
