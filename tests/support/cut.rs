//! Real network cuts for partition tests: a monitor (Valkyrie or
//! valkey-sentinel) runs as an unprivileged uid of its own, and an
//! `iptables` owner match drops the packets *that uid* sends to chosen
//! ports on loopback. Its established connections go silent and its new
//! connects time out, while the test itself, the writer and the Valkey
//! servers (all root) keep talking to each other: the partition of a
//! failover daemon that runs in another zone.
//!
//! Needs root and `iptables` (scripts/deps.sh installs it). Anything
//! missing fails the test with a message; nothing is skipped.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The uid (and gid) the monitors under test run as. It needs no passwd
/// entry: the kernel matches the number.
pub const CUT_UID: u32 = 64_991;

/// `iptables`, or a panic that says how to get it.
fn iptables() -> PathBuf {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin"] {
        let p = Path::new(dir).join("iptables");
        if p.exists() {
            return p;
        }
    }
    panic!("iptables is missing: scripts/test installs it (Debian package iptables)");
}

/// The `iptables` binary, for tests that build rules of their own
/// (tests/support/peers.rs); a panic that says how to get it if missing.
pub fn iptables_bin() -> PathBuf {
    iptables()
}

/// Fails the test unless it runs as root (iptables and setuid need it).
pub fn require_root() {
    let out = Command::new("id").arg("-u").output().expect("run id -u");
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        uid, "0",
        "partition tests need root (iptables, running the monitor as uid {CUT_UID}); CI runs as root"
    );
}

/// Drop rules, removed on drop (the path heals).
pub struct Cut {
    /// Each rule: its table (`None`: filter) and its chain and matches.
    rules: Vec<(Option<&'static str>, Vec<String>)>,
}

/// The source address replicas connect from in [`Cut::isolate`]
/// (Valkey's `bind-source-addr`, see [`connect_from_isolated_side`]).
pub const REPLICA_SOURCE: &str = "127.0.0.2";

/// The connection mark of [`Cut::isolate`]'s connections.
const ISOLATED_MARK: &str = "0x7a1";

/// Makes the replica on `port` connect to its master from
/// [`REPLICA_SOURCE`] (and reconnect now), so that [`Cut::isolate`] can
/// tell its replication link from every other client of the master.
pub fn connect_from_isolated_side(port: u16) {
    let ok = |r: Result<valkyrie_protocol::Frame, String>| {
        matches!(
            r,
            Ok(valkyrie_protocol::Frame::Simple(_)) | Ok(valkyrie_protocol::Frame::Integer(_))
        )
    };
    // The master lists a replica at the address it connects from unless
    // it announces another: keep 127.0.0.1, where it listens.
    assert!(ok(super::try_call(
        port,
        &[
            "CONFIG",
            "SET",
            "bind-source-addr",
            REPLICA_SOURCE,
            "replica-announce-ip",
            "127.0.0.1",
        ]
    )));
    assert!(ok(super::try_call(
        port,
        &["CLIENT", "KILL", "TYPE", "master"]
    )));
}

impl Cut {
    /// Drops every packet `CUT_UID` sends to `127.0.0.1:<port>` for each
    /// of `ports`.
    pub fn new(ports: &[u16]) -> Cut {
        let tag = format!("valkyrie-test-{}", std::process::id());
        let mut cut = Cut { rules: Vec::new() };
        for port in ports {
            let rule: Vec<String> = [
                "OUTPUT",
                "-p",
                "tcp",
                "-d",
                "127.0.0.1",
                "--dport",
                &port.to_string(),
                "-m",
                "owner",
                "--uid-owner",
                &CUT_UID.to_string(),
                "-m",
                "comment",
                "--comment",
                &tag,
                "-j",
                "DROP",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            cut.insert(None, rule);
        }
        cut
    }

    /// Isolates the master at `127.0.0.1:<port>` from its replicas (which
    /// connect from [`REPLICA_SOURCE`]) and from every process of
    /// [`CUT_UID`] (the monitors): every packet of those connections is
    /// dropped, both directions, established ones included, and new
    /// connects time out. Every other client (the writers, as root, from
    /// 127.0.0.1) keeps reaching it: the master cut off with its clients.
    ///
    /// A connection is marked in the mangle table by the first packet
    /// either side sends after the rules are in, and the filter table
    /// drops every marked packet; on loopback both directions pass
    /// `OUTPUT`.
    pub fn isolate(port: u16) -> Cut {
        let tag = format!("valkyrie-test-{}", std::process::id());
        let port = port.to_string();
        let uid = CUT_UID.to_string();
        let mark = |matches: &[&str]| -> Vec<String> {
            let mut rule = vec!["OUTPUT", "-p", "tcp"];
            rule.extend_from_slice(matches);
            rule.extend_from_slice(&[
                "-m",
                "comment",
                "--comment",
                &tag,
                "-j",
                "CONNMARK",
                "--set-mark",
                ISOLATED_MARK,
            ]);
            rule.iter().map(|s| s.to_string()).collect()
        };
        let mut cut = Cut { rules: Vec::new() };
        let rules = [
            (
                Some("mangle"),
                mark(&["-s", REPLICA_SOURCE, "-d", "127.0.0.1", "--dport", &port]),
            ),
            (
                Some("mangle"),
                mark(&["-s", "127.0.0.1", "--sport", &port, "-d", REPLICA_SOURCE]),
            ),
            (
                Some("mangle"),
                mark(&[
                    "-d",
                    "127.0.0.1",
                    "--dport",
                    &port,
                    "-m",
                    "owner",
                    "--uid-owner",
                    &uid,
                ]),
            ),
            (
                None,
                [
                    "OUTPUT",
                    "-m",
                    "connmark",
                    "--mark",
                    ISOLATED_MARK,
                    "-m",
                    "comment",
                    "--comment",
                    &tag,
                    "-j",
                    "DROP",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ),
        ];
        for (table, rule) in rules {
            cut.insert(table, rule);
        }
        cut
    }

    /// Inserts `rule` first in its chain (ahead of any accepting rule).
    fn insert(&mut self, table: Option<&'static str>, rule: Vec<String>) {
        let mut cmd = Command::new(iptables());
        cmd.arg("-w");
        if let Some(t) = table {
            cmd.args(["-t", t]);
        }
        let status = cmd.arg("-I").args(&rule).status().expect("run iptables");
        assert!(status.success(), "iptables -I {rule:?} failed");
        self.rules.push((table, rule));
    }

    /// Removes the rules now.
    pub fn heal(mut self) {
        self.remove();
    }

    fn remove(&mut self) {
        for (table, rule) in self.rules.drain(..) {
            let mut cmd = Command::new(iptables());
            cmd.arg("-w");
            if let Some(t) = table {
                cmd.args(["-t", t]);
            }
            let _ = cmd.arg("-D").args(&rule).status();
        }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A monitor process running as [`CUT_UID`], killed on drop.
pub struct CutProcess {
    pub child: Child,
}

impl Drop for CutProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Makes `dir` usable by [`CUT_UID`] (it writes its state file there).
pub fn hand_over(dir: &Path) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{CUT_UID}:{CUT_UID}"))
        .arg(dir)
        .status()
        .expect("run chown");
    assert!(status.success(), "chown {} failed", dir.display());
}

/// Starts `bin args…` as [`CUT_UID`], its output in `dir/<log>`.
/// `bin` is copied into `dir` first: the build directory may sit under a
/// home directory the uid cannot enter.
pub fn spawn_as_cut_user(bin: &Path, args: &[&str], dir: &Path, log: &str) -> CutProcess {
    let name = bin.file_name().expect("binary name");
    let copy = dir.join(name);
    if !copy.exists() {
        std::fs::copy(bin, &copy).expect("copy the binary");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the binary");
    }
    hand_over(dir);
    let log = std::fs::File::create(dir.join(log)).expect("log file");
    // Another test thread that forks while the copy is being written hands
    // the copy's write descriptor to its child until that child execs, and
    // exec then fails with "text file busy": wait for it, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let child = loop {
        let spawned = Command::new(&copy)
            .args(args)
            .current_dir(dir)
            .uid(CUT_UID)
            .gid(CUT_UID)
            .stdout(Stdio::null())
            .stderr(log.try_clone().expect("log file"))
            .spawn();
        match spawned {
            Err(e)
                if e.kind() == std::io::ErrorKind::ExecutableFileBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => break other.expect("start the monitor"),
        }
    };
    CutProcess { child }
}
