//! Starting the `valkyrie` binary from ordinary `sentinel.conf` files:
//! two daemons on one host, and the `logfile` directive.

// Real processes and real time: no paused clock to honour.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon may take to answer, or a line to appear.
const LIMIT: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "valkyrie-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `valkyrie` process, killed on drop; its stderr goes to a file.
struct Daemon {
    child: Child,
    stderr: PathBuf,
}

impl Daemon {
    fn start(conf: &Path) -> Daemon {
        let stderr = conf.with_extension("stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg(conf)
            .env_remove("VALKYRIE_LOG")
            .env_remove("VALKYRIE_LOGFILE")
            .env_remove("VALKYRIE_INDEX_PORT")
            .env_remove("VALKYRIE_ADMIN_PORT")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Daemon { child, stderr }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until the Sentinel port answers PING; fails at once if the
    /// process exits.
    fn wait_ready(&mut self, port: u16) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("valkyrie exited ({status}): {}", self.stderr());
            }
            if pong(port) {
                return;
            }
            assert!(start.elapsed() < LIMIT, "no PONG: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pong(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Sends one inline command and returns the first line of the reply.
fn command(port: u16, line: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Polls `f` until it holds, or fails with `what`.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_daemons_from_ordinary_confs_differing_in_port_both_start() {
    let root = scratch("two-daemons");
    let mut daemons = Vec::new();
    let ports = [free_port(), free_port()];
    for (i, port) in ports.iter().enumerate() {
        // No index-port or admin-port line: both ask for the defaults.
        let dir = root.join(format!("sentinel_{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = root.join(format!("sentinel_{i}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor m 127.0.0.1 1 1\n",
                dir.display()
            ),
        )
        .unwrap();
        let mut d = Daemon::start(&conf);
        d.wait_ready(*port);
        daemons.push(d);
    }
    // Both serve; the defaults are held by at most one of them (or by
    // some other process on this host): each one that lost them says so.
    for (d, port) in daemons.iter().zip(ports) {
        assert!(pong(port), "{}", d.stderr());
    }
    let second = daemons[1].stderr();
    assert!(
        second.contains("index-port is off") && second.contains("admin-port is off"),
        "{second}"
    );
    drop(daemons);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_default_port_asked_for_explicitly_stays_fatal() {
    let root = scratch("taken-index");
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    let port = free_port();
    let conf = root.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nindex-port {taken}\nadmin-port 0\n",
            root.display()
        ),
    )
    .unwrap();
    let mut d = Daemon::start(&conf);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < LIMIT, "still running: {}", d.stderr());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert!(
        d.stderr()
            .contains(&format!("cannot listen on 127.0.0.1:{taken}")),
        "{}",
        d.stderr()
    );
    drop(holder);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn logfile_gets_the_lines_and_follows_rotation() {
    let root = scratch("logfile");
    let port = free_port();
    let conf = root.join("sentinel.conf");
    // As in Valkey's test suite: a relative `logfile`, under `dir`.
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\nindex-port 0\nadmin-port 0\ndir {}\nlogfile log.txt\n",
            root.display()
        ),
    )
    .unwrap();
    let log = root.join("log.txt");
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let mut d = Daemon::start(&conf);
    d.wait_ready(port);
    wait_for("the start in log.txt", || {
        read(&log).contains("Sentinel protocol on")
    });
    assert!(
        !d.stderr().contains("Sentinel protocol on"),
        "{}",
        d.stderr()
    );
    // Rotation: the file is moved away; later lines go to a new file at
    // the path, none of them to the old one.
    let rotated = root.join("log.txt.1");
    std::fs::rename(&log, &rotated).unwrap();
    let mut n = 0;
    wait_for("a line in the new log.txt", || {
        // Each new group is logged; one a round until the reopen is seen.
        n += 1;
        let reply = command(port, &format!("SENTINEL MONITOR g{n} 127.0.0.1 1 1"));
        assert!(reply.starts_with("+OK"), "{reply}");
        read(&log).contains(&format!("g{n}"))
    });
    // One event can log several lines, some written before the reopen
    // was due; a group monitored after the new file was seen must log to
    // it only.
    let reply = command(port, "SENTINEL MONITOR rotated-after 127.0.0.1 1 1");
    assert!(reply.starts_with("+OK"), "{reply}");
    wait_for("the next group in the new log.txt", || {
        read(&log).contains("rotated-after")
    });
    assert!(!read(&rotated).contains("rotated-after"));
    assert!(!d.stderr().contains("g1"), "{}", d.stderr());
    drop(d);
    let _ = std::fs::remove_dir_all(&root);
}
