//! Sentinel's notification and client-reconfig scripts: the queue of
//! jobs, and the runner that starts, watches and kills their processes.
//!
//! This module owns how a script runs, not when: the core says which
//! events notify ([`Channel::notifies`](crate::core::Channel::notifies))
//! and the shell turns them, and client reconfigurations, into argvs
//! handed to [`Scripts`]. What happens to a job then is Sentinel's, as
//! Valkey 8.0.1's `sentinel.c` does it (sc:734-917; `docs/plans/scripts.md`
//! §4-§6), so that hooks written for Sentinel behave the same:
//!
//! - at most [`MAX_QUEUE`] jobs queued, running ones included (past it
//!   the oldest job not running is dropped, here logged and counted), and
//!   [`MAX_RUNNING`] running;
//! - exit 0 ends a job; exit 1 or a signal runs it again after
//!   `script-retry-delay · 2^(attempts-1)`, for at most [`MAX_ATTEMPTS`]
//!   runs; anything else ends it with `-script-error <path> <signal>
//!   <code>`;
//! - a run longer than `script-max-runtime` gets `-script-timeout <path>
//!   <pid>` and SIGKILL, then counts as a signal;
//! - a start failing for lack of resources gets `-script-error <path> 99
//!   0` and another try 100 ms later; any other failure, `… 0 2`.
//!
//! [`queue`] decides, pure, on the caller's milliseconds; [`runner`]
//! carries it out on tokio and [`spawn`] starts one child.

pub mod job;
pub mod pending;
pub mod queue;
pub mod runner;
pub mod spawn;

pub use job::{Exit, Job, JobId, JobState, Outcome, SpawnError};
pub use pending::{Field, Pending};
pub use queue::{MAX_ATTEMPTS, MAX_QUEUE, MAX_RUNNING, Queue, SPAWN_RETRY, ScriptTimers};
pub use runner::Scripts;

#[cfg(test)]
mod tests;
