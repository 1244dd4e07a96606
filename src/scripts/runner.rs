//! The runner: a tokio task owning the [`Queue`], and [`Scripts`], its
//! handle. It starts due jobs on arrival, kills overdue ones, reports
//! exits to the queue and publishes the `-script-*` events through the
//! caller's callback.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::job::{Exit, JobId, Outcome};
use super::pending::Pending;
use super::queue::{Queue, ScriptTimers};
use super::spawn;
use crate::core::{Channel, Event, Millis};
use crate::metrics;

/// Where the runner publishes its `-script-*` events.
type Publish = Arc<dyn Fn(Event) + Send + Sync>;

/// What the handle asks of the runner.
enum Message {
    Run(Vec<String>),
    Timers(ScriptTimers),
    Snapshot(oneshot::Sender<Vec<Pending>>),
}

/// The counts INFO shows, kept by the runner.
#[derive(Debug, Default)]
struct Counts {
    running: AtomicUsize,
    queued: AtomicUsize,
}

/// The handle of the script runner. Cheap to clone; the runner stops when
/// every handle is dropped, leaving running children alone and losing the
/// waiting jobs, as Sentinel does at shutdown.
#[derive(Debug, Clone)]
pub struct Scripts {
    tx: mpsc::UnboundedSender<Message>,
    counts: Arc<Counts>,
}

impl Scripts {
    /// Starts the runner on the current tokio runtime. `dir` (made
    /// absolute here) is the children's working directory and the base of
    /// relative paths. Fails only if `dir` cannot be made absolute.
    pub fn spawn(
        dir: PathBuf,
        timers: ScriptTimers,
        publish: impl Fn(Event) + Send + Sync + 'static,
    ) -> io::Result<Scripts> {
        let dir = std::path::absolute(dir)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (exits_tx, exits) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let runner = Runner {
            dir,
            queue: Queue::new(timers),
            epoch: Instant::now(),
            publish: Arc::new(publish),
            counts: counts.clone(),
            kills: HashMap::new(),
            exits_tx,
            exits,
        };
        tokio::spawn(runner.run(rx));
        Ok(Scripts { tx, counts })
    }

    /// Queues the notification script `path` for an event:
    /// `<path> <channel> <payload>`.
    pub fn notify(&self, path: &str, channel: Channel, payload: &str) {
        self.run(vec![
            path.to_string(),
            channel.as_str().to_string(),
            payload.to_string(),
        ]);
    }

    /// Queues `argv[0]` with the arguments `argv[1..]`.
    pub fn run(&self, argv: Vec<String>) {
        if argv.is_empty() {
            tracing::warn!("script job without a program, ignored");
            return;
        }
        let _ = self.tx.send(Message::Run(argv));
    }

    /// New `script-max-runtime` and `script-retry-delay`.
    pub fn set_timers(&self, timers: ScriptTimers) {
        let _ = self.tx.send(Message::Timers(timers));
    }

    /// The jobs, oldest first, for `SENTINEL PENDING-SCRIPTS` (none once
    /// the runner is gone).
    pub async fn snapshot(&self) -> Vec<Pending> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Message::Snapshot(tx)).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Jobs running (INFO's `sentinel_running_scripts`).
    pub fn running(&self) -> usize {
        self.counts.running.load(Ordering::Relaxed)
    }

    /// Jobs queued, running ones included (INFO's
    /// `sentinel_scripts_queue_length`).
    pub fn queued(&self) -> usize {
        self.counts.queued.load(Ordering::Relaxed)
    }
}

/// The runner's task.
struct Runner {
    dir: PathBuf,
    queue: Queue,
    /// The runner's zero: the queue's milliseconds count from it.
    epoch: Instant,
    publish: Publish,
    counts: Arc<Counts>,
    /// How to kill each running job.
    kills: HashMap<JobId, oneshot::Sender<()>>,
    exits_tx: mpsc::UnboundedSender<(JobId, Exit)>,
    exits: mpsc::UnboundedReceiver<(JobId, Exit)>,
}

impl Runner {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Message>) {
        loop {
            let now = self.now();
            self.kill_overdue(now);
            self.start_due(now);
            self.count();
            let wake = self
                .queue
                .next_wakeup()
                .and_then(|ms| self.epoch.checked_add(Duration::from_millis(ms)));
            tokio::select! {
                message = rx.recv() => match message {
                    Some(message) => self.handle(message),
                    None => break,
                },
                Some((id, exit)) = self.exits.recv() => self.exited(id, exit),
                () = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }

    fn now(&self) -> Millis {
        let elapsed = Instant::now().saturating_duration_since(self.epoch);
        Millis::try_from(elapsed.as_millis()).unwrap_or(Millis::MAX)
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Run(argv) => {
                if let Some(dropped) = self.queue.push(argv) {
                    tracing::warn!(
                        argv = ?dropped.argv,
                        "script queue full: dropped the oldest job not running"
                    );
                    metrics::script_dropped();
                }
            }
            Message::Timers(timers) => self.queue.set_timers(timers),
            Message::Snapshot(reply) => {
                let _ = reply.send(self.queue.snapshot(self.now()));
            }
        }
    }

    fn kill_overdue(&mut self, now: Millis) {
        for (id, event) in self.queue.overdue(now) {
            tracing::warn!(
                "{} {}: ran past script-max-runtime, killed",
                event.channel,
                event.payload
            );
            if let Some(kill) = self.kills.remove(&id) {
                let _ = kill.send(());
            }
            (self.publish)(event);
        }
    }

    fn start_due(&mut self, now: Millis) {
        while let Some((id, argv)) = self.queue.next_due(now) {
            match spawn::start(&self.dir, &argv) {
                Ok(child) => {
                    let pid = child.id().unwrap_or(0);
                    self.queue.started(id, pid, now);
                    tracing::debug!(?argv, pid, "+script-child");
                    let (kill, killed) = oneshot::channel();
                    self.kills.insert(id, kill);
                    let exits = self.exits_tx.clone();
                    tokio::spawn(async move {
                        let exit = spawn::watch(child, killed).await;
                        let _ = exits.send((id, exit));
                    });
                }
                Err(e) => {
                    tracing::warn!(?argv, "script could not be started: {e}");
                    let error = spawn::classify(&e);
                    if let Some(outcome) = self.queue.spawn_failed(id, error, now) {
                        self.report(outcome);
                    }
                }
            }
        }
    }

    fn exited(&mut self, id: JobId, exit: Exit) {
        self.kills.remove(&id);
        let now = self.now();
        if let Some(outcome) = self.queue.exited(id, exit, now) {
            tracing::debug!(?exit, outcome = outcome.label(), "-script-child");
            self.report(outcome);
        }
    }

    /// Counts an outcome and publishes its event, if any.
    fn report(&self, outcome: Outcome) {
        metrics::script_run(outcome.label());
        if let Outcome::Failed(e) | Outcome::SpawnRetried(e) | Outcome::SpawnFailed(e) = outcome {
            tracing::warn!("{} {}", e.channel, e.payload);
            (self.publish)(e);
        }
    }

    fn count(&self) {
        let (running, queued) = (self.queue.running(), self.queue.len());
        self.counts.running.store(running, Ordering::Relaxed);
        self.counts.queued.store(queued, Ordering::Relaxed);
        metrics::scripts_queue(running, queued);
    }
}

/// Sleeps until `wake` (forever without one; the caller then disables
/// the branch).
async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
