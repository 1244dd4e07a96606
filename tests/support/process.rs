//! The daemon's own binary as a child process, for the tests that stop,
//! crash or restart it from its state file.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use valkyrie_protocol::Frame;

use super::try_call;

/// A running `valkyrie <conf>`, killed and reaped when dropped.
pub struct DaemonProcess(Child);

impl DaemonProcess {
    /// Starts it on `conf`, its standard error appended to `log` (a
    /// restart keeps the log of the run before).
    pub fn start(conf: &Path, log: &Path) -> DaemonProcess {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        DaemonProcess(child)
    }

    /// Its exit status, once it exited (within `limit`).
    pub fn exited(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `SENTINEL REPLICAS mymaster` on `port` lists `n` replicas.
pub fn replicas_listed(port: u16, n: usize) -> bool {
    matches!(
        try_call(port, &["SENTINEL", "REPLICAS", "mymaster"]),
        Ok(Frame::Array(r)) if r.len() == n
    )
}
