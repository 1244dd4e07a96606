//! One child process: started as Sentinel starts a script, watched until
//! it ends, killed when told.
//!
//! The program runs directly (no shell, no `PATH` search): a relative
//! path is joined to the absolute `dir` (std leaves a relative program
//! with `current_dir` unspecified), `argv[0]` is the path as configured,
//! each argument is one argv element, the environment is
//! inherited whole, the working directory is `dir`, stdin is `/dev/null`
//! and stdout and stderr are Valkyrie's. Every fd Valkyrie opens is
//! close-on-exec, so the child holds 0-2 and what Valkyrie itself
//! inherited. SIGPIPE and SIGHUP are at their defaults (Sentinel ignores
//! both in its children). A child outlives Valkyrie (`kill_on_drop(false)`),
//! as in Sentinel.
//!
//! One difference from Sentinel remains: the kernel hands a `#!` script's
//! interpreter the program executed, not `argv[0]`, so such a script's
//! `$0` is the absolute path where Sentinel's is the path as configured.
//! A file that is neither a binary nor a `#!` script fails with ENOEXEC
//! and is not run through `/bin/sh` (std's `Command` does not fall back
//! as glibc's `execvp` does): `-script-error <path> 0 2`.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use super::job::{Exit, SpawnError};

/// Starts `argv[0]` with `argv[1..]` in `dir` (absolute).
pub fn start(dir: &Path, argv: &[String]) -> io::Result<Child> {
    let Some((path, args)) = argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no program"));
    };
    // `join` keeps an absolute path as it is.
    let mut command = Command::new(dir.join(path));
    command
        .arg0(path)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(false);
    command.spawn()
}

/// Sentinel's view of a failed start: a failed `fork` (`EAGAIN`,
/// `ENOMEM`) is tried again, anything else is the child's exit 2.
pub fn classify(error: &io::Error) -> SpawnError {
    match error.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::OutOfMemory => SpawnError::Resources,
        _ => SpawnError::Other,
    }
}

/// Waits for `child` to end, sending it SIGKILL (on its pid only) if
/// `kill` fires first. A failed wait counts as a child that could not be
/// run (exit 2).
pub async fn watch(mut child: Child, kill: oneshot::Receiver<()>) -> Exit {
    let status = tokio::select! {
        status = child.wait() => status,
        Ok(()) = kill => {
            if let Err(e) = child.start_kill() {
                tracing::debug!("script kill: {e}");
            }
            child.wait().await
        }
    };
    match status {
        Ok(status) => exit_of(status),
        Err(e) => {
            tracing::warn!("script wait: {e}");
            Exit::Code(2)
        }
    }
}

/// The exit code or the signal of a wait status.
pub fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(2),
    }
}
