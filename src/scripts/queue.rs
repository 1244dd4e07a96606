//! The script queue, pure: jobs, Sentinel's limits, retries, timeouts and
//! the snapshot, with time passed in as the caller's monotonic
//! milliseconds. The runner carries out what it decides.

use std::collections::VecDeque;

use super::job::{Exit, Job, JobId, JobState, Outcome, SpawnError};
use super::pending::Pending;
use crate::core::{Channel, Event, Millis, Timers};

/// Jobs queued at most, running ones included (`SENTINEL_SCRIPT_MAX_QUEUE`).
pub const MAX_QUEUE: usize = 256;
/// Jobs running at most (`SENTINEL_SCRIPT_MAX_RUNNING`).
pub const MAX_RUNNING: usize = 16;
/// Runs of one job at most (`SENTINEL_SCRIPT_MAX_RETRY`).
pub const MAX_ATTEMPTS: u32 = 10;
/// The wait after a start that failed for lack of resources (Sentinel's
/// next tick).
pub const SPAWN_RETRY: Millis = 100;

/// `script-max-runtime` and `script-retry-delay`, in ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScriptTimers {
    /// A run longer than this is killed.
    pub max_runtime: Millis,
    /// The wait after a first failed run, doubled after each later one.
    pub retry_delay: Millis,
}

impl From<&Timers> for ScriptTimers {
    fn from(t: &Timers) -> ScriptTimers {
        ScriptTimers {
            max_runtime: t.script_max_runtime,
            retry_delay: t.script_retry_delay,
        }
    }
}

/// The jobs, oldest first.
#[derive(Debug)]
pub struct Queue {
    jobs: VecDeque<Job>,
    next: u64,
    timers: ScriptTimers,
}

impl Queue {
    /// An empty queue.
    pub fn new(timers: ScriptTimers) -> Queue {
        Queue {
            jobs: VecDeque::new(),
            next: 0,
            timers,
        }
    }

    /// New timers: `max_runtime` holds for running jobs too,
    /// `retry_delay` for later failures only (as in Sentinel).
    pub fn set_timers(&mut self, timers: ScriptTimers) {
        self.timers = timers;
    }

    /// The timers in force.
    pub fn timers(&self) -> ScriptTimers {
        self.timers
    }

    /// Jobs queued, running ones included.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Whether no job is queued.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Jobs running.
    pub fn running(&self) -> usize {
        self.jobs.iter().filter(|j| j.running()).count()
    }

    /// The jobs, oldest first.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.iter()
    }

    /// Queues a job, due now. Past [`MAX_QUEUE`] the oldest job not
    /// running is evicted and returned: Sentinel drops it silently, the
    /// caller logs and counts it.
    pub fn push(&mut self, argv: Vec<String>) -> Option<Job> {
        let id = JobId(self.next);
        self.next += 1;
        self.jobs.push_back(Job {
            id,
            argv,
            attempts: 0,
            state: JobState::Waiting { not_before: 0 },
        });
        if self.jobs.len() <= MAX_QUEUE {
            return None;
        }
        let at = self.jobs.iter().position(|j| !j.running())?;
        self.jobs.remove(at)
    }

    /// The oldest job due at `now`, if fewer than [`MAX_RUNNING`] run. The
    /// caller starts it and reports [`started`](Self::started) or
    /// [`spawn_failed`](Self::spawn_failed).
    pub fn next_due(&self, now: Millis) -> Option<(JobId, Vec<String>)> {
        if self.running() >= MAX_RUNNING {
            return None;
        }
        self.jobs
            .iter()
            .find(|j| matches!(j.state, JobState::Waiting { not_before } if not_before <= now))
            .map(|j| (j.id, j.argv.clone()))
    }

    /// The job `id` started as process `pid`: one more attempt.
    pub fn started(&mut self, id: JobId, pid: u32, now: Millis) {
        if let Some(job) = self.job_mut(id) {
            job.attempts += 1;
            job.state = JobState::Running {
                pid,
                started: now,
                killed: false,
            };
        }
    }

    /// The job `id` could not be started: tried again [`SPAWN_RETRY`] ms
    /// later for lack of resources (no attempt counted), else removed.
    /// `None` for an unknown job.
    pub fn spawn_failed(&mut self, id: JobId, error: SpawnError, now: Millis) -> Option<Outcome> {
        let at = self.position(id)?;
        match error {
            SpawnError::Resources => {
                let job = self.jobs.get_mut(at)?;
                job.state = JobState::Waiting {
                    not_before: now.saturating_add(SPAWN_RETRY),
                };
                Some(Outcome::SpawnRetried(script_error(job.path(), 99, 0)))
            }
            SpawnError::Other => {
                let job = self.jobs.remove(at)?;
                Some(Outcome::SpawnFailed(script_error(job.path(), 0, 2)))
            }
        }
    }

    /// The running job `id` ended with `exit` (sc:859-898): exit 0 removes
    /// it; exit 1 or a signal, with attempts left, retries it after
    /// `retry_delay · 2^(attempts-1)`; anything else removes it with a
    /// `-script-error`. `None` for a job unknown or not running.
    pub fn exited(&mut self, id: JobId, exit: Exit, now: Millis) -> Option<Outcome> {
        let at = self.position(id)?;
        let job = self.jobs.get_mut(at)?;
        if !job.running() {
            return None;
        }
        let retry = matches!(exit, Exit::Code(1) | Exit::Signal(_));
        if exit == Exit::Code(0) {
            self.jobs.remove(at);
            Some(Outcome::Ok)
        } else if retry && job.attempts < MAX_ATTEMPTS {
            let delay = retry_delay(self.timers.retry_delay, job.attempts);
            job.state = JobState::Waiting {
                not_before: now.saturating_add(delay),
            };
            Some(Outcome::Retried { delay })
        } else {
            let (signal, code) = match exit {
                Exit::Code(c) => (0, c),
                Exit::Signal(s) => (s, 0),
            };
            let job = self.jobs.remove(at)?;
            Some(Outcome::Failed(script_error(job.path(), signal, code)))
        }
    }

    /// The running jobs that ran longer than `max_runtime` at `now`
    /// (strictly, sc:911) and were not told yet: each is marked killed and
    /// returned with its `-script-timeout <path> <pid>` event. The caller
    /// kills them; their exit then counts as a signal.
    pub fn overdue(&mut self, now: Millis) -> Vec<(JobId, Event)> {
        let max = self.timers.max_runtime;
        let mut out = Vec::new();
        for job in &mut self.jobs {
            if let JobState::Running {
                pid,
                started,
                killed,
            } = &mut job.state
                && !*killed
                && now.saturating_sub(*started) > max
            {
                *killed = true;
                let payload = format!("{} {pid}", job.argv.first().map_or("", String::as_str));
                out.push((job.id, Event::new(Channel::ScriptTimeout, payload)));
            }
        }
        out
    }

    /// When something is next due: a running job's timeout, or a waiting
    /// job's start while a slot is free. `None` when nothing is, or only
    /// past the end of time (a saturated delay).
    pub fn next_wakeup(&self) -> Option<Millis> {
        let free = self.running() < MAX_RUNNING;
        self.jobs
            .iter()
            .filter_map(|j| match j.state {
                JobState::Running {
                    started,
                    killed: false,
                    ..
                } => Some(
                    started
                        .saturating_add(self.timers.max_runtime)
                        .saturating_add(1),
                ),
                JobState::Waiting { not_before } if free => Some(not_before),
                JobState::Running { .. } | JobState::Waiting { .. } => None,
            })
            .min()
            .filter(|&t| t != Millis::MAX)
    }

    /// Every job as `SENTINEL PENDING-SCRIPTS` shows it at `now`, oldest
    /// first.
    pub fn snapshot(&self, now: Millis) -> Vec<Pending> {
        self.jobs
            .iter()
            .map(|j| {
                let (running, pid, millis) = match j.state {
                    JobState::Running { pid, started, .. } => {
                        (true, pid, now.saturating_sub(started))
                    }
                    JobState::Waiting { not_before } => (false, 0, not_before.saturating_sub(now)),
                };
                Pending {
                    argv: j.argv.clone(),
                    running,
                    pid,
                    millis,
                    retry_num: j.attempts,
                }
            })
            .collect()
    }

    fn position(&self, id: JobId) -> Option<usize> {
        self.jobs.iter().position(|j| j.id == id)
    }

    fn job_mut(&mut self, id: JobId) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }
}

/// The wait after the `attempts`-th run failed: `base · 2^(attempts-1)`,
/// saturating (`script-retry-delay` may be `i64::MAX` ms).
pub fn retry_delay(base: Millis, attempts: u32) -> Millis {
    base.saturating_mul(2u64.saturating_pow(attempts.saturating_sub(1)))
}

/// `-script-error <path> <signal> <exit-code>`.
fn script_error(path: &str, signal: i32, code: i32) -> Event {
    Event::new(Channel::ScriptError, format!("{path} {signal} {code}"))
}
