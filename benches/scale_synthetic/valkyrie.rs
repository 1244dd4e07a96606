//! The measured Valkyrie: a release binary started as its own process
//! with one `sentinel monitor` per synthetic group, and what `/proc` says
//! of a process (CPU ticks, RSS, descriptors, the open-file limit).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::client::Client;

pub(crate) struct Valkyrie {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) dir: PathBuf,
    pub(crate) started: Instant,
}

impl Valkyrie {
    pub(crate) fn start(
        bin: &Path,
        tag: &str,
        groups: &[[u16; 3]],
        fast: impl Fn(usize) -> bool,
    ) -> Valkyrie {
        let dir = std::env::temp_dir().join(format!(
            "valkyrie-scale-{}-{tag}-{}",
            std::process::id(),
            free_port()
        ));
        // The state directory holds only Valkyrie's state file.
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let port = free_port();
        let mut conf = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nindex-port 0\nadmin-port 0\n",
            dir.join("state").display()
        );
        for (k, [m, _, _]) in groups.iter().enumerate() {
            conf.push_str(&format!("sentinel monitor g{k} 127.0.0.1 {m} 1\n"));
            if fast(k) {
                conf.push_str(&format!("sentinel down-after-milliseconds g{k} 1000\n"));
            }
        }
        let conf_path = dir.join("sentinel.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let log = std::fs::File::create(dir.join("valkyrie.log")).unwrap();
        let child = Command::new(bin)
            .arg(&conf_path)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let started = Instant::now();
        let v = Valkyrie {
            child,
            port,
            dir,
            started,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Client::connect(port, Duration::from_secs(1)).is_err() {
            assert!(
                Instant::now() < deadline,
                "valkyrie did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        v
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Log lines at WARN or ERROR, and a few of them.
    pub(crate) fn warnings(&self) -> (usize, Vec<String>) {
        let log = std::fs::read_to_string(self.dir.join("valkyrie.log")).unwrap_or_default();
        let w: Vec<String> = log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .map(strip_ansi)
            .collect();
        (w.len(), w.into_iter().take(5).collect())
    }
}

impl Drop for Valkyrie {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A log line without its terminal colours.
pub(crate) fn strip_ansi(l: &str) -> String {
    let mut out = String::with_capacity(l.len());
    let mut chars = l.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn clk_tck() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// (utime, stime) of `pid`, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces: fields count from the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime field 14, stime field 15.
    let get = |n: usize| {
        f.get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (get(14), get(15))
}

pub(crate) fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The `valkyrie` binary: `VALKYRIE_BIN`, else a fresh `cargo build
/// --release --bin valkyrie`, else the one next to this bench binary.
pub(crate) fn valkyrie_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("VALKYRIE_BIN") {
        return PathBuf::from(p);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .args(["build", "--release", "--bin", "valkyrie", "-q"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status();
    if !matches!(built, Ok(s) if s.success()) {
        eprintln!(
            "cargo build --release --bin valkyrie failed; using the binary next to the bench"
        );
    }
    // target/release/deps/scale_synthetic-… → target/release/valkyrie
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("valkyrie");
    assert!(bin.exists(), "no valkyrie binary at {}", bin.display());
    bin
}
