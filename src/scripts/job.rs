//! One script job and what became of a run: the queue's vocabulary,
//! shared by the queue and the runner.

use crate::core::{Event, Millis};

/// A job's number in its queue, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub(super) u64);

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Waits to start, at `not_before` or later (0 before a first run).
    Waiting {
        /// When it is due.
        not_before: Millis,
    },
    /// Runs as process `pid` since `started`.
    Running {
        /// The child's process id.
        pid: u32,
        /// When it started.
        started: Millis,
        /// Whether it ran past `script-max-runtime` and was told to die.
        killed: bool,
    },
}

/// A queued script: Sentinel's `sentinelScriptJob`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// Its number.
    pub id: JobId,
    /// The program as configured, then its arguments.
    pub argv: Vec<String>,
    /// Runs started so far (Sentinel's `retry_num`).
    pub attempts: u32,
    /// Waiting or running.
    pub state: JobState,
}

impl Job {
    /// The program as configured (`argv[0]`), which the `-script-*`
    /// events name.
    pub fn path(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }

    /// Whether it runs now.
    pub fn running(&self) -> bool {
        matches!(self.state, JobState::Running { .. })
    }
}

/// How a run ended: the child's wait status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

/// Why a job could not be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// `EAGAIN` or `ENOMEM` (Sentinel's failed `fork`): tried again later.
    Resources,
    /// Anything else (Sentinel's failed `execve`, its child's exit 2):
    /// given up.
    Other,
}

/// What became of a run, or of an attempt to start one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0: the job is done.
    Ok,
    /// Exit 1 or a signal, with attempts left: it runs again after
    /// `delay` ms.
    Retried {
        /// The wait before the next run.
        delay: Millis,
    },
    /// Given up: removed, with its `-script-error` event.
    Failed(Event),
    /// Not started for lack of resources: `-script-error <path> 99 0`, and
    /// another try later, no attempt counted.
    SpawnRetried(Event),
    /// Could not be run at all: removed, with `-script-error <path> 0 2`.
    SpawnFailed(Event),
}

impl Outcome {
    /// The `outcome` label of `valkyrie_script_runs_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Retried { .. } => "retried",
            Outcome::Failed(_) => "failed",
            Outcome::SpawnRetried(_) => "spawn_retried",
            Outcome::SpawnFailed(_) => "spawn_failed",
        }
    }

    /// The event to publish, if any.
    pub fn event(&self) -> Option<&Event> {
        match self {
            Outcome::Failed(e) | Outcome::SpawnRetried(e) | Outcome::SpawnFailed(e) => Some(e),
            Outcome::Ok | Outcome::Retried { .. } => None,
        }
    }
}
