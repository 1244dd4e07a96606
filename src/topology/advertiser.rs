//! Keeping the advertised [`Topology`] current: the [`Advertiser`] is fed
//! the groups that changed, rebuilds only those, counts each group's
//! revisions, and wakes the readers exactly when something they show
//! changed. It also keeps the labels of the groups `ValkeyCluster`
//! resources own (the core knows nothing of them), which the runtime sets
//! ([`Advertiser::set_labels`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::{Core, Millis};

use super::build::{self, Labels};
use super::readiness::Verdict;
use super::views::{GroupView, Topology};

/// How often every group is rebuilt without a change, at most (the ages
/// and offsets that `SENTINEL MASTER` reports).
pub const VIEW_REFRESH: Duration = Duration::from_millis(100);

/// The periodic rebuild waits at least this many times what it took: at
/// most 5 % of a core, whatever the number of groups.
const REFRESH_COST_RATIO: u32 = 20;

/// Which groups a step changed.
#[derive(Debug, Default)]
pub struct Changed {
    /// Every group (a held-back group became visible again).
    pub all: bool,
    /// These groups.
    pub groups: BTreeSet<String>,
}

impl Changed {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.all && self.groups.is_empty()
    }
}

/// The writer of the advertised topology.
#[derive(Debug)]
pub struct Advertiser {
    sender: watch::Sender<Arc<Topology>>,
    revisions: Revisions,
    /// When every group was last rebuilt.
    refreshed: Instant,
    /// How long the periodic rebuild waits: [`VIEW_REFRESH`], longer when
    /// a rebuild is costly (many groups).
    period: Duration,
    /// The labels of the groups resources own; the groups of the
    /// configuration are absent.
    labels: BTreeMap<String, Arc<Labels>>,
    /// Groups whose labels changed since the last refresh.
    relabeled: BTreeSet<String>,
}

impl Advertiser {
    /// The topology of `core` at `now`, every group at revision 1, no
    /// group owned by a resource.
    pub fn new(core: &Core, now: Millis) -> Advertiser {
        Advertiser::with_labels(core, now, BTreeMap::new())
    }

    /// The topology of `core` at `now`, every group at revision 1; the
    /// groups in `labels` are owned by resources with these labels.
    pub fn with_labels(
        core: &Core,
        now: Millis,
        labels: BTreeMap<String, BTreeMap<String, String>>,
    ) -> Advertiser {
        let labels: BTreeMap<String, Arc<Labels>> =
            labels.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
        let shared = build::shared(core);
        let mut revisions = Revisions::default();
        let groups = core
            .groups()
            .iter()
            .map(|(name, g)| {
                let mut view = build::group(g, &shared, labels.get(name));
                revisions.stamp(name, None, &mut view);
                (name.clone(), Arc::new(view))
            })
            .collect();
        let topology = Topology {
            groups,
            tilt: core.tilted(),
            tilt_since: core.tilt_since(),
            peer_links: shared.len(),
            readiness: core
                .groups()
                .keys()
                .filter_map(|name| {
                    Some((
                        name.clone(),
                        Arc::new(Verdict::judge(core, name, now, false)?),
                    ))
                })
                .collect(),
        };
        Advertiser {
            sender: watch::channel(Arc::new(topology)).0,
            revisions,
            refreshed: Instant::now(),
            period: VIEW_REFRESH,
            labels,
            relabeled: BTreeSet::new(),
        }
    }

    /// Sets the labels of group `group`'s resource (`None`: the group is
    /// the configuration's, or gone). Its view shows them from the next
    /// [`refresh`](Advertiser::refresh); labels are not advertised, so
    /// the revision stays. Whether they changed.
    pub fn set_labels(&mut self, group: &str, labels: Option<BTreeMap<String, String>>) -> bool {
        let changed = self.labels.get(group).map(|l| &**l) != labels.as_ref();
        if changed {
            match labels {
                Some(l) => self.labels.insert(group.to_string(), Arc::new(l)),
                None => self.labels.remove(group),
            };
            self.relabeled.insert(group.to_string());
        }
        changed
    }

    /// The topology advertised now.
    pub fn topology(&self) -> Arc<Topology> {
        self.sender.borrow().clone()
    }

    /// A reader of the advertised topology.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Topology>> {
        self.sender.subscribe()
    }

    /// Rebuilds the groups in `changed` (and those relabelled) at once,
    /// and every group each refresh period (ages and offsets); a TILT
    /// flip is published at once. The groups in `held` keep what they advertised (their last
    /// decision is not durable yet). Groups not rebuilt are shared with
    /// the topology before: a step costs its changed groups' views plus
    /// one map of pointers. The verdicts of the rebuilt groups, and of
    /// the held ones, are judged at `now`.
    pub fn refresh(
        &mut self,
        core: &Core,
        now: Millis,
        changed: &Changed,
        held: &BTreeSet<String>,
    ) {
        let due = self.refreshed.elapsed() >= self.period;
        let tilt_flipped = self.sender.borrow().tilt != core.tilted();
        if !due && changed.is_empty() && !tilt_flipped && self.relabeled.is_empty() {
            return;
        }
        let started = Instant::now();
        let all = due || changed.all;
        let relabeled = std::mem::take(&mut self.relabeled);
        let rebuild = |name: &str| all || changed.groups.contains(name) || relabeled.contains(name);
        self.advertise(core, now, rebuild, held);
        if all {
            self.refreshed = Instant::now();
            self.period = VIEW_REFRESH.max(started.elapsed() * REFRESH_COST_RATIO);
        }
    }

    /// Publishes the topology of `core`, rebuilding the groups `rebuild`
    /// names. Readers are woken only when a group came, went or changed
    /// revision, or TILT flipped; the value is replaced either way, so
    /// they always read the latest ages.
    fn advertise(
        &mut self,
        core: &Core,
        now: Millis,
        rebuild: impl Fn(&str) -> bool,
        held: &BTreeSet<String>,
    ) {
        let current = self.sender.borrow().clone();
        let shared = build::shared(core);
        let mut woken = current.tilt != core.tilted()
            || current.groups.len() != core.groups().len()
            || current.groups.keys().ne(core.groups().keys());
        let mut groups = BTreeMap::new();
        let mut readiness = BTreeMap::new();
        for (name, g) in core.groups() {
            let verdict = match current.readiness.get(name) {
                Some(v) if !held.contains(name) && !rebuild(name) => Some(v.clone()),
                _ => Verdict::judge(core, name, now, held.contains(name)).map(Arc::new),
            };
            if let Some(v) = verdict {
                readiness.insert(name.clone(), v);
            }
            let old = current.groups.get(name);
            let view = match old {
                Some(old) if held.contains(name) || !rebuild(name) => old.clone(),
                _ => {
                    let mut view = build::group(g, &shared, self.labels.get(name));
                    woken |= self.revisions.stamp(name, old.map(|v| &**v), &mut view);
                    // Not advertised, but questions held on the Sentinel
                    // port wait for its end (a switchover given up keeps
                    // the master and its revision).
                    woken |= old.is_some_and(|o| o.masterless != view.masterless);
                    Arc::new(view)
                }
            };
            groups.insert(name.clone(), view);
        }
        let next = Arc::new(Topology {
            groups,
            tilt: core.tilted(),
            tilt_since: core.tilt_since(),
            peer_links: shared.len(),
            readiness,
        });
        self.sender.send_if_modified(|t| {
            *t = next;
            woken
        });
    }
}

/// The revision counter of every group name, kept after the group goes so
/// that a group monitored again goes on from its last revision.
#[derive(Debug, Default)]
pub struct Revisions(BTreeMap<String, u64>);

impl Revisions {
    /// Stamps `view`, the new view of group `name`, with its revision:
    /// `old`'s when both advertise the same, else the next one. Returns
    /// whether it is a new revision.
    pub fn stamp(&mut self, name: &str, old: Option<&GroupView>, view: &mut GroupView) -> bool {
        let counter = self.0.entry(name.to_string()).or_insert(0);
        match old {
            Some(old) if old.advertises_same(view) => {
                view.revision = old.revision;
                false
            }
            _ => {
                *counter += 1;
                view.revision = *counter;
                true
            }
        }
    }
}
