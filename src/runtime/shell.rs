//! The shell's actor: one loop that owns the [`Core`] and everything the
//! core's outputs act on (links, state file, topology, events), stamps
//! each input with monotonic milliseconds and feeds it — link results in
//! batches, ticks, requests from the ports (`request.rs`) — then has the
//! outputs carried out (`execute.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::{Health, Request, RuntimeError, SAVE_RETRY, millis};
use crate::config::Config;
use crate::core::{Addr, Core, Input, Millis, State};
use crate::link::{self, Job};
use crate::metrics::CoreObserver;
use crate::state::{RuntimeConfig, StateFile};

/// How many inputs one step of the runtime takes from the links.
const BATCH: usize = 512;

pub(super) struct Shell {
    pub(super) config: Config,
    pub(super) core: Core,
    pub(super) start: Instant,
    pub(super) file: StateFile,
    /// Monitoring as changed at runtime; `None` until it first is.
    pub(super) runtime_config: Option<RuntimeConfig>,
    pub(super) state: State,
    pub(super) links: BTreeMap<(String, Addr), mpsc::UnboundedSender<Job>>,
    /// Per group: whether links should poll INFO fast.
    pub(super) urgent: BTreeMap<String, watch::Sender<bool>>,
    pub(super) input_tx: link::InputSender,
    pub(super) inputs: mpsc::Receiver<Input>,
    /// The advertised topology.
    pub(super) advertiser: crate::topology::Advertiser,
    pub(super) events: crate::events::EventBus,
    /// When the metrics' gauges were last set from the core.
    pub(super) gauges_set: Instant,
    /// Instances still waiting for their first probe outcome.
    pub(super) probing: BTreeSet<(String, Addr)>,
    pub(super) ready: watch::Sender<bool>,
    pub(super) observer: CoreObserver,
    /// Shown by `/healthz`.
    pub(super) health: watch::Sender<Health>,
    /// Groups whose last decision could not be written: they do not act
    /// until a write succeeds (`execute.rs`).
    pub(super) unsaved: BTreeSet<String>,
    /// The state in memory is newer than the file.
    pub(super) dirty: bool,
    /// The link tasks.
    pub(super) tasks: TaskTracker,
    /// Test hook: panic at this time.
    pub(super) panic_at: Option<Millis>,
    /// Peer links, by run id.
    pub(super) peers: super::peering::PeerLinks,
    /// Where random delays for the core come from.
    pub(super) jitter: crate::backoff::Rng,
    /// `tls-replication yes`: links to instances and peers speak TLS.
    pub(super) tls: Option<crate::tls::Outbound>,
    /// The links' TLS of the groups with their own (a CR's `spec.tls`), by
    /// group: one context per group, shared by its links.
    pub(super) group_tls: BTreeMap<String, crate::tls::Outbound>,
    /// Run on a managed group's master change (`hooks.rs`).
    pub(super) role_hook: Option<Arc<dyn super::hooks::RoleHook>>,
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
        let mut hellos = tokio::time::interval(super::peering::HELLO_EVERY);
        hellos.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.reconcile_peers();
        let mut batch = Vec::with_capacity(BATCH);
        tokio::pin!(shutdown);
        loop {
            if self.panic_at.is_some_and(|at| self.now() >= at) {
                panic!("test hook VALKYRIE_TEST_RUNTIME_PANIC_AFTER_MS: the runtime panics");
            }
            let deadline = self
                .core
                .next_deadline()
                .map(|at| self.start + Duration::from_millis(at));
            tokio::select! {
                _ = &mut shutdown => break,
                _ = ticker.tick() => {
                    self.core.set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
                    let outputs = self.core.handle(self.now(), Input::Tick);
                    self.execute(outputs).await;
                }
                // A candidacy due before the next tick.
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    self.core.set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
                    let outputs = self.core.handle(self.now(), Input::Tick);
                    self.execute(outputs).await;
                }
                _ = hellos.tick() => self.publish_hellos(None),
                n = self.inputs.recv_many(&mut batch, BATCH) => {
                    // The shell holds a sender: the channel never closes.
                    if n == 0 {
                        break;
                    }
                    let now = self.now();
                    let mut outputs = Vec::new();
                    for input in batch.drain(..) {
                        self.probed(Some(&input));
                        if !self.known(&input) {
                            self.core.set_jitter(self.jitter.below(crate::core::JITTER_RANGE));
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
                Some(req) = requests.recv() => self.serve(req).await,
                _ = retry.tick(), if self.dirty => self.retry_save().await,
            }
        }
        tracing::info!("runtime stopped");
        // Dropping the job senders ends the links.
        self.links.clear();
        self.peers.clear();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(1), self.tasks.wait()).await;
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
