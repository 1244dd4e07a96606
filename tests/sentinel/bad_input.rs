//! Bad input on the Sentinel port costs nothing else: garbage, huge
//! declared lengths, nesting, a slowloris client and 10,000 idle
//! connections get errors or nothing, memory stays bounded, and other
//! clients keep being served. The daemon runs as its own process here so
//! its memory and file descriptors can be measured.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::try_call;
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

/// Idle connections the capacity check opens.
const IDLE: usize = 10_000;
/// Descriptors this test process needs beyond the idle connections (its
/// other sockets, the test harness, stdio).
const MARGIN: u64 = 500;

/// Raises this process's soft open-file limit to its hard limit (allowed
/// without privileges) and returns (soft, hard) after the attempt. The
/// daemon, a child, inherits the raised limit, and raises its own to the
/// hard limit at start as well.
fn raise_open_file_limit() -> (Option<u64>, Option<u64>) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            eprintln!("cannot raise the open-file limit to the hard limit: {e}");
        }
    }
    let now = getrlimit(Resource::Nofile);
    (now.current, now.maximum)
}

/// The "Max open files" line of /proc/PID/limits (soft and hard).
fn limits_line(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
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
    // The open-file limit raised before the daemon starts, so that it
    // inherits it. 10,000 idle connections below: fewer would test less
    // than this test says, so a limit that cannot be raised far enough
    // fails it.
    let (soft, hard) = raise_open_file_limit();
    let need = IDLE as u64 + MARGIN;
    assert!(
        soft.is_none_or(|s| s >= need),
        "{IDLE} idle connections need an open-file limit of at least {need}; this process \
         has soft {soft:?}, hard {hard:?} (None is unlimited) after raising the soft \
         limit to the hard one: raise the hard limit (ulimit -Hn, LimitNOFILE=)"
    );
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

    // 10,000 idle connections: memory stays bounded, others are served.
    let count = IDLE;
    let clients = || {
        let Ok(Frame::Bulk(text)) = try_call(port, &["INFO", "clients"]) else {
            return (0, 0);
        };
        let field = |name: &str| {
            String::from_utf8_lossy(&text)
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0)
        };
        (field("connected_clients:"), field("maxclients:"))
    };
    // The connections above that got a protocol error are closed by the
    // daemon; once they are gone, the slow client and the asking one are
    // all that is connected, so the count below is exact.
    drop((g, h, c, n, l));
    let baseline = 2;
    support::wait_until(Duration::from_secs(10), || clients().0 == baseline);
    // The daemon caps its clients by its own open-file limit; it must
    // have room for all of them besides those already connected.
    let maxclients = clients().1;
    assert!(
        maxclients >= baseline + count,
        "the daemon allows {maxclients} clients, fewer than {baseline} + {count}; its \
         open-file limit: {}",
        limits_line(pid)
    );
    let before = rss_kib(pid);
    let start = Instant::now();
    let idle: Vec<TcpStream> = (0..count)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Wait until the daemon has accepted them all (each is a client).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut connected = clients().0;
    while connected < baseline + count {
        assert!(
            Instant::now() < deadline,
            "the daemon holds {connected} clients, not {baseline} + {count} idle; its \
             open-file limit: {}",
            limits_line(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
        connected = clients().0;
    }
    assert!(ping_ok(port), "served while {count} clients idle");
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
