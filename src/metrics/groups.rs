//! Per-group metric series that are freed when the group is removed.
//!
//! metrics-exporter-prometheus keeps every series it ever saw, and its
//! idle timeout works per metric *kind*, not per series: it would also
//! drop live counters that merely did not change. So the process-wide
//! recorder is a [`Router`]: a series with a non-empty `group` label is
//! kept in a recorder of its own group, everything else in the main
//! recorder. When a group is no longer monitored,
//! [`CoreObserver::gauges`](super::CoreObserver::gauges) calls
//! [`retain`], which drops that group's recorder and with it all its
//! series (link, role, epoch, events, PING histograms…). `/metrics` is
//! [`render`]: the main recorder's text with every group's series merged
//! into their families, one `# HELP`/`# TYPE` per family.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio::time::Instant;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

/// The group recorders, by group name.
#[derive(Debug, Default)]
pub struct Groups {
    recorders: Mutex<BTreeMap<String, Arc<PrometheusRecorder>>>,
    /// The groups each runtime monitors, by owner: a group's series are
    /// freed only when no runtime in the process monitors it any more
    /// (several daemons share one process in tests and benchmarks, and
    /// one must never free, and so keep re-creating, another's series).
    owners: Mutex<BTreeMap<u64, BTreeSet<String>>>,
    last_upkeep: Mutex<Option<Instant>>,
}

static GROUPS: OnceLock<Arc<Groups>> = OnceLock::new();

/// The process-wide recorder: group series to their group's recorder.
#[derive(Debug)]
pub struct Router {
    main: PrometheusRecorder,
    groups: Arc<Groups>,
}

impl Router {
    /// Wraps `main`; group series go to the shared [`Groups`].
    pub fn new(main: PrometheusRecorder, groups: Arc<Groups>) -> Router {
        Router { main, groups }
    }

    fn target(&self, key: &Key) -> Option<Arc<PrometheusRecorder>> {
        let group = key
            .labels()
            .find(|l| l.key() == "group" && !l.value().is_empty())?;
        Some(self.groups.recorder(group.value()))
    }
}

impl Groups {
    /// The shared set the installed [`Router`] uses (created once).
    pub fn global() -> Arc<Groups> {
        GROUPS.get_or_init(Arc::default).clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<PrometheusRecorder>>> {
        self.recorders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn recorder(&self, group: &str) -> Arc<PrometheusRecorder> {
        let mut map = self.lock();
        if let Some(r) = map.get(group) {
            return r.clone();
        }
        let r = Arc::new(
            super::recorder::recorder()
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder()),
        );
        metrics::with_local_recorder(r.as_ref(), super::recorder::describe);
        map.insert(group.to_string(), r.clone());
        r
    }

    /// Records that `owner` monitors exactly `live` (`None`: nothing any
    /// more), drops the recorders (and so every series) of groups no owner
    /// monitors, and runs the group recorders' upkeep every
    /// [`super::recorder::UPKEEP_PERIOD`].
    pub fn retain(&self, owner: u64, live: Option<BTreeSet<String>>) {
        let all: BTreeSet<String> = {
            let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            if owners.get(&owner) == live.as_ref() {
                // Nothing changed for this owner: only the upkeep below.
                owners.values().flatten().cloned().collect()
            } else {
                match live {
                    Some(l) => owners.insert(owner, l),
                    None => owners.remove(&owner),
                };
                owners.values().flatten().cloned().collect()
            }
        };
        let handles: Vec<PrometheusHandle> = {
            let mut map = self.lock();
            map.retain(|name, _| all.contains(name));
            let mut last = self
                .last_upkeep
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|t| t.elapsed() < super::recorder::UPKEEP_PERIOD) {
                return;
            }
            *last = Some(Instant::now());
            map.values().map(|r| r.handle()).collect()
        };
        for h in handles {
            h.run_upkeep();
        }
    }

    /// The groups that have series.
    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn renders(&self) -> Vec<String> {
        let handles: Vec<PrometheusHandle> = self.lock().values().map(|r| r.handle()).collect();
        handles.iter().map(PrometheusHandle::render).collect()
    }
}

impl Recorder for Router {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.main.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.main.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.main.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        match self.target(key) {
            Some(r) => r.register_counter(key, metadata),
            None => self.main.register_counter(key, metadata),
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        match self.target(key) {
            Some(r) => r.register_gauge(key, metadata),
            None => self.main.register_gauge(key, metadata),
        }
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        match self.target(key) {
            Some(r) => r.register_histogram(key, metadata),
            None => self.main.register_histogram(key, metadata),
        }
    }
}

/// `owner` monitors exactly `live` now (`None`: it stopped): drops the
/// series of every group no owner monitors (no-op without a recorder).
pub fn retain<'a>(owner: u64, live: Option<impl IntoIterator<Item = &'a String>>) {
    if let Some(groups) = GROUPS.get() {
        let live = live.map(|l| l.into_iter().cloned().collect());
        groups.retain(owner, live);
    }
}

/// `/metrics`: the main recorder's text with every group's series.
pub fn render(main: &PrometheusHandle) -> String {
    let mut texts = vec![main.render()];
    if let Some(groups) = GROUPS.get() {
        texts.extend(groups.renders());
    }
    merge(&texts)
}

/// Merges Prometheus texts: each family once, its `# HELP`/`# TYPE` first,
/// then the samples of every text, families in order of first appearance.
pub fn merge(texts: &[String]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut families: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for text in texts {
        let mut current = String::new();
        for line in text.lines() {
            if line.is_empty() {
                continue;
            }
            let header = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "));
            if let Some(rest) = header {
                current = rest.split(' ').next().unwrap_or_default().to_string();
            }
            let family = families.entry(current.clone()).or_insert_with(|| {
                order.push(current.clone());
                (Vec::new(), Vec::new())
            });
            if header.is_some() {
                if !family.0.iter().any(|h| h == line) {
                    family.0.push(line.to_string());
                }
            } else {
                family.1.push(line.to_string());
            }
        }
    }
    let mut out = String::new();
    for name in order {
        if let Some((headers, samples)) = families.get(&name) {
            for l in headers.iter().chain(samples) {
                out.push_str(l);
                out.push('\n');
            }
            out.push('\n');
        }
    }
    out
}
