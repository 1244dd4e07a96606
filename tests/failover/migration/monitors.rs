//! The monitors of the migration test: a real valkey-sentinel started from
//! the file an operator writes, stopped as a service manager stops it
//! (SIGTERM, then waiting for it to exit), and the Valkyrie started in its
//! place — the real binary on that same file, as the sentinel left it.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::peers::{poll, tail, text};
use crate::support::sentinel::valkey_sentinel;
use crate::support::{free_port, try_call};

/// What runs behind a monitor's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sentinel,
    Valkyrie,
}

/// Valkyrie's own ports, which a `sentinel.conf` does not name: three
/// Valkyries on one host (and other tests on it) would all want the
/// defaults, 12120 and 9126. Flags, so the file stays as Sentinel left it.
pub const VALKYRIE_FLAGS: [&str; 6] = [
    "--index-port",
    "0",
    "--admin-port",
    "0",
    // The sentinel's `logfile` line would take Valkyrie's log away from
    // the stderr the test keeps as its log.
    "--logfile",
    "",
];

/// One monitor of `mymaster`: a sentinel, later the Valkyrie replacing it,
/// at the same port, directory and configuration file.
pub struct Monitor {
    pub idx: usize,
    pub port: u16,
    pub dir: PathBuf,
    pub conf: PathBuf,
    pub kind: Kind,
    /// Its run id (`SENTINEL MYID`).
    pub myid: String,
    child: Option<Child>,
}

impl Monitor {
    /// Writes the `sentinel.conf` an operator writes for sentinel `idx`
    /// (quorum 2, down-after 2 s, failover-timeout 6 s, a log file) and
    /// starts valkey-sentinel on it. Returns once it answers `SENTINEL
    /// MYID`.
    ///
    /// Not down-after 1 s: runs at 1 s saw a just-promoted master failed
    /// over a second time (2 of 7, before the empty-restart guard stopped
    /// counting a restarted replica against its master; 0 of 6 after),
    /// and 1 s is also a real sentinel's ping period. 2 s keeps the test
    /// away from that edge.
    pub fn sentinel(root: &Path, idx: usize, master: u16) -> Monitor {
        let port = free_port();
        let dir = root.join(format!("sentinel-{idx}"));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\n\
                 bind 127.0.0.1\n\
                 dir {dir}\n\
                 logfile {dir}/sentinel.log\n\
                 sentinel monitor mymaster 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds mymaster 2000\n\
                 sentinel failover-timeout mymaster 6000\n\
                 sentinel parallel-syncs mymaster 1\n",
                dir = dir.display()
            ),
        )
        .unwrap();
        let child = Command::new(valkey_sentinel())
            .arg(&conf)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start valkey-sentinel");
        let mut m = Monitor {
            idx,
            port,
            dir,
            conf,
            kind: Kind::Sentinel,
            myid: String::new(),
            child: Some(child),
        };
        m.myid = m.wait_myid();
        m
    }

    /// `sentinel#0:port` / `valkyrie#0:port`, for messages.
    pub fn label(&self) -> String {
        let k = match self.kind {
            Kind::Sentinel => "sentinel",
            Kind::Valkyrie => "valkyrie",
        };
        format!("{k}#{}:{}", self.idx, self.port)
    }

    /// Its log: the one its `logfile` line names for a sentinel, stderr
    /// for a Valkyrie.
    pub fn log(&self) -> PathBuf {
        match self.kind {
            Kind::Sentinel => self.dir.join("sentinel.log"),
            Kind::Valkyrie => self.dir.join("valkyrie.log"),
        }
    }

    /// `valkyrie check-config` on the file, with the flags it will start
    /// with: its output, or the failure with the output.
    pub fn check_config(&self) -> Result<String, String> {
        let out = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg("check-config")
            .arg(&self.conf)
            .args(VALKYRIE_FLAGS)
            .output()
            .expect("run valkyrie check-config");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!(
                "check-config {} failed ({}):\n{text}",
                self.conf.display(),
                out.status
            ))
        }
    }

    /// Stops the valkey-sentinel as a service manager does: SIGTERM, and
    /// a bounded wait for it to exit.
    pub fn stop(&mut self) {
        assert_eq!(self.kind, Kind::Sentinel, "{}", self.label());
        let mut child = self.child.take().expect("a running sentinel");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a process id");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        let status = poll(Duration::from_secs(10), || match child.try_wait() {
            Ok(Some(s)) => Ok(s),
            other => Err(format!("{} still running: {other:?}", self.label())),
        });
        match status {
            Ok(s) => assert!(
                s.success() || s.signal() == Some(libc_sigterm()),
                "{} exited with {s}",
                self.label()
            ),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{e}");
            }
        }
    }

    /// Starts Valkyrie on the file the stopped sentinel left, unchanged,
    /// from the sentinel's directory. Returns once it answers `SENTINEL
    /// MYID`.
    pub fn start_valkyrie(&mut self) {
        assert!(self.child.is_none(), "{} is still running", self.label());
        self.kind = Kind::Valkyrie;
        let log = std::fs::File::create(self.log()).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg(&self.conf)
            .args(VALKYRIE_FLAGS)
            .current_dir(&self.dir)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start valkyrie");
        self.child = Some(child);
        self.myid = self.wait_myid();
    }

    fn wait_myid(&mut self) -> String {
        let port = self.port;
        let id = poll(Duration::from_secs(15), || {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!("exited with {status}"));
            }
            match try_call(port, &["SENTINEL", "MYID"]) {
                Ok(f) if text(&f).len() == 40 => Ok(text(&f)),
                other => Err(format!("SENTINEL MYID: {other:?}")),
            }
        });
        id.unwrap_or_else(|e| {
            panic!(
                "{} did not start: {e}\n--- log tail ---\n{}",
                self.label(),
                tail(&self.log(), 30)
            )
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// SIGTERM's number, as an exit status reports it.
fn libc_sigterm() -> i32 {
    rustix::process::Signal::TERM.as_raw()
}

/// Every monitor's log tail, for a failure message.
pub fn logs(monitors: &[Monitor]) -> String {
    let mut out = String::new();
    for m in monitors {
        out.push_str(&format!(
            "--- {} ({}) ---\n{}\n",
            m.label(),
            m.log().display(),
            tail(&m.log(), 25)
        ));
    }
    out
}
