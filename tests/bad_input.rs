//! Bad input on the Sentinel port costs nothing else: garbage, huge
//! declared lengths, nesting, a slowloris client and 10,000 idle
//! connections get errors or nothing, memory stays bounded, and other
//! clients keep being served. The daemon runs as its own process here so
//! its memory and file descriptors can be measured.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{try_call, wait_until};
use valkyrie_protocol::Frame;

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

/// The soft limit on open files, from /proc/self/limits.
fn open_file_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

fn ask(s: &mut TcpStream, req: &[u8]) -> Vec<u8> {
    s.write_all(req).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.ends_with(b"\r\n") {
            break;
        }
    }
    out
}

fn ping_ok(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    ask(&mut s, b"*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n"
}

/// Whether the server closed the connection (EOF) within a second.
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(0))
}

#[test]
fn bad_input_is_contained() {
    let tmp = support::TempDir::new("bad-input");
    let port = support::free_port();
    let conf = tmp.0.join("v.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nmaxclients 20000\n",
            tmp.0.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
        .arg(&conf)
        .args(["--index-port", "0", "--admin-port", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let _d = Daemon(child);
    support::wait_until(Duration::from_secs(10), || ping_ok(port));

    // Garbage: an error, then the connection is closed.
    let mut g = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let r = ask(&mut g, b"*3\r\n\x00\x01garbage\xff\r\n");
    assert!(
        r.starts_with(b"-ERR Protocol error"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert!(closed(&mut g));
    // A huge declared bulk: refused before anything is allocated.
    let mut h = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        ask(&mut h, b"*1\r\n$2000000000\r\n"),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(closed(&mut h));
    // A huge declared argument count.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        ask(&mut c, b"*2000000000\r\n"),
        b"-ERR Protocol error: invalid multibulk length\r\n"
    );
    // Nesting is not part of a request.
    let mut n = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(
        ask(&mut n, b"*1\r\n*1\r\n*1\r\n"),
        b"-ERR Protocol error: expected '$', got '*'\r\n"
    );
    // An endless inline line is cut at 64 KiB.
    let mut l = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let r = ask(&mut l, &vec![b'a'; 70 * 1024]);
    assert_eq!(r, b"-ERR Protocol error: too big inline request\r\n");

    // A slowloris client trickling half a command does not block others.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(b"*1\r\n$4\r\nPI").unwrap();
    assert!(ping_ok(port));

    // 10,000 idle connections (fewer if this machine's open-file limit is
    // lower): memory stays bounded, others are served.
    let count = open_file_limit().saturating_sub(500).min(10_000);
    if count < 10_000 {
        eprintln!("open-file limit allows only {count} idle connections");
    }
    let before = rss_kib(pid);
    let start = Instant::now();
    let idle: Vec<TcpStream> = (0..count)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Wait until the daemon has accepted them all (each is a client).
    let connected = || {
        let Ok(Frame::Bulk(text)) = try_call(port, &["INFO", "clients"]) else {
            return 0;
        };
        String::from_utf8_lossy(&text)
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0)
    };
    wait_until(Duration::from_secs(30), || connected() > count);
    assert!(ping_ok(port), "served while 10,000 clients idle");
    let after = rss_kib(pid);
    let per_conn = (after.saturating_sub(before)) * 1024 / count.max(1) as u64;
    eprintln!(
        "{count} idle connections in {:?}: RSS {} KiB -> {} KiB ({} bytes each)",
        start.elapsed(),
        before,
        after,
        per_conn
    );
    assert!(per_conn < 8 * 1024, "{per_conn} bytes per idle connection");
    drop(idle);
    // The slow client finishes its command and is answered.
    slow.write_all(b"NG\r\n").unwrap();
    assert_eq!(ask(&mut slow, b""), b"+PONG\r\n");
}
