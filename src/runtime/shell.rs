//! The shell's actor: one loop that owns the [`Core`] and the three parts
//! the core's outputs act on — the state file ([`Persistence`]), the links
//! ([`Links`]) and what is shown ([`Publication`]) — stamps each input
//! with monotonic milliseconds and feeds it — link results in batches,
//! ticks, requests from the ports (`request.rs`) — then has the outputs
//! carried out (`execute.rs`).
//!
//! Every turn of the loop is first a pulse ([`Core::pulse`]): the loop
//! turns at least every tick (100 ms at most), so a long gap between two
//! turns means the daemon did not run, and the core enters TILT before
//! it sees anything the gap made look late.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::handle::RuntimeError;
use super::links::Links;
use super::persistence::Persistence;
use super::persistence::SAVE_RETRY;
use super::publication::Publication;
use super::requests::Request;
use super::spec::millis;
use crate::config::Config;
use crate::core::{Core, Input, Millis};

/// How many inputs one step of the runtime takes from the links.
const BATCH: usize = 512;

pub(super) struct Shell {
    pub(super) config: Config,
    pub(super) core: Core,
    /// The clock origin: core times are milliseconds since it.
    pub(super) start: Instant,
    /// The state file (`persistence.rs`).
    pub(super) persistence: Persistence,
    /// The links to instances and peers (`links.rs`).
    pub(super) links: Links,
    /// What is shown: topology, events, gauges, readiness, role hook
    /// (`publication.rs`).
    pub(super) publication: Publication,
    /// What the links hear.
    pub(super) inputs: mpsc::Receiver<Input>,
    /// Where random delays for the core come from.
    pub(super) jitter: crate::backoff::Rng,
    /// Test hook: panic at this time.
    pub(super) panic_at: Option<Millis>,
    /// The notification and client-reconfig scripts' runner.
    pub(super) scripts: crate::scripts::Scripts,
    /// Each managed group's route being moved (`route.rs`).
    pub(super) routes: std::collections::BTreeMap<String, tokio::task::AbortHandle>,
}

impl Drop for Shell {
    fn drop(&mut self) {
        // Stopped (shutdown, or the state file could not be written): no
        // longer monitoring, whatever the latch said.
        crate::metrics::set_ready(false);
    }
}

impl Shell {
    pub(super) fn now(&self) -> Millis {
        millis(self.start.elapsed())
    }

    pub(super) async fn run(
        mut self,
        tick: Duration,
        mut requests: mpsc::Receiver<Request>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), RuntimeError> {
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retry = tokio::time::interval(SAVE_RETRY);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut hello_period = self.core.timers().publish_period;
        let mut hellos = tokio::time::interval(Duration::from_millis(hello_period));
        hellos.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.reconcile_peers();
        let mut batch = Vec::with_capacity(BATCH);
        tokio::pin!(shutdown);
        loop {
            if self.panic_at.is_some_and(|at| self.now() >= at) {
                panic!("test hook VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS: the runtime panics");
            }
            // `SENTINEL DEBUG publish-period` changed it.
            if self.core.timers().publish_period != hello_period {
                hello_period = self.core.timers().publish_period;
                let every = Duration::from_millis(hello_period);
                hellos = tokio::time::interval_at(Instant::now() + every, every);
                hellos.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            }
            let deadline = self
                .core
                .next_deadline()
                .map(|at| self.start + Duration::from_millis(at));
            let wake = tokio::select! {
                _ = &mut shutdown => break,
                _ = ticker.tick() => Wake::Tick,
                // A candidacy due before the next tick.
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => Wake::Tick,
                _ = hellos.tick() => Wake::Hellos,
                n = self.inputs.recv_many(&mut batch, BATCH) => Wake::Inputs(n),
                Some(req) = requests.recv() => Wake::Request(req),
                _ = retry.tick(), if self.persistence.dirty => Wake::Retry,
            };
            let pulse = self.core.pulse(self.now());
            if !pulse.is_empty() {
                tracing::warn!(
                    "TILT: the daemon did not run for longer than tilt-trigger ({} ms); \
                     no failover starts and no vote is given for tilt-period ({} ms)",
                    self.core.timers().tilt_trigger,
                    self.core.timers().tilt_period
                );
                self.execute(pulse).await;
            }
            match wake {
                Wake::Tick => {
                    self.core
                        .set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
                    let outputs = self.core.handle(self.now(), Input::Tick);
                    self.execute(outputs).await;
                }
                Wake::Hellos => self.publish_hellos(None),
                Wake::Inputs(n) => {
                    // The shell holds a sender: the channel never closes.
                    if n == 0 {
                        break;
                    }
                    let now = self.now();
                    let mut outputs = Vec::new();
                    for input in batch.drain(..) {
                        self.publication.probed(Some(&input));
                        if !self.known(&input) {
                            self.core
                                .set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
                            outputs.extend(self.core.handle(now, input));
                        }
                    }
                    // A batch that decided nothing (the steady state: PING
                    // and INFO answers that change nothing) has nothing to
                    // carry out. `execute` also walks every group (failover
                    // ends, the urgent-INFO flags, the view's refresh), and
                    // doing that per batch cost O(groups) per answer: 6 % of
                    // a core at 1,000 instances. Whatever changes those
                    // walks report comes with an output (an event, a
                    // topology change), and the next tick walks them anyway.
                    if !outputs.is_empty() {
                        self.execute(outputs).await;
                    }
                }
                Wake::Request(req) => self.serve(req).await,
                Wake::Retry => self.retry_save().await,
            }
        }
        tracing::info!("runtime stopped");
        self.links.close().await;
        Ok(())
    }

    /// Whether an input tells the core nothing new: a link failure of the
    /// kind the core already holds for that instance. An unreachable
    /// instance reports one per reconnect attempt; feeding each to the
    /// core (which then steps every group) would make one group's trouble
    /// every group's cost.
    fn known(&self, input: &Input) -> bool {
        let Input::LinkDown {
            group,
            addr,
            failure,
        } = input
        else {
            return false;
        };
        self.core
            .groups()
            .get(group)
            .and_then(|g| g.instances.get(addr))
            .is_some_and(|i| i.failure == Some(*failure))
    }
}

/// What woke the loop.
enum Wake {
    /// The tick, or a candidacy due before it.
    Tick,
    /// The hello schedule.
    Hellos,
    /// Inputs from the links (how many were taken).
    Inputs(usize),
    /// A request from a port.
    Request(Request),
    /// A state-file write to retry.
    Retry,
}
