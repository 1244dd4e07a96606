//! The `logfile` writer: appends to a file, and follows log rotation by
//! reopening the path once it no longer names the file being written.
//!
//! Rotation is noticed without a signal: at most once a second, a write
//! first checks (device and inode) that the path still names the open
//! file, and reopens it (created if needed) when it does not. A tool that
//! moves the file away (logrotate's default, `mv`) thus needs no
//! `postrotate` step; at most the lines of that second go to the old file.
//! `copytruncate` works too, the file being opened for appending.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How often a write checks whether the file was moved away.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// A log file that follows rotation; write through `&LogFile`.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    open: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    file: File,
    /// (device, inode) of `file`.
    id: (u64, u64),
    checked: Instant,
}

fn open(path: &Path) -> io::Result<Open> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let meta = file.metadata()?;
    Ok(Open {
        file,
        id: (meta.dev(), meta.ino()),
        checked: Instant::now(),
    })
}

impl LogFile {
    /// Opens `path` for appending, creating it: an error here (a missing
    /// directory, no permission) stops the start, as in Valkey.
    pub fn open(path: &Path) -> io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            open: Mutex::new(open(path)?),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Open {
    /// Reopens the path if it names another file than the one open (or
    /// none). A failed reopen keeps the old file: a line written there
    /// beats a line lost.
    fn follow(&mut self, path: &Path) {
        if self.checked.elapsed() < CHECK_EVERY {
            return;
        }
        self.checked = Instant::now();
        let same = std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == self.id);
        if !same && let Ok(fresh) = open(path) {
            *self = fresh;
        }
    }
}

impl Write for &LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A poisoned lock only means a panic mid-write elsewhere; the
        // file itself is still fine to append to.
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.follow(&self.path);
        open.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        // One event, one locked write: lines of two threads never mix.
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.follow(&self.path);
        open.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.file.flush()
    }
}
