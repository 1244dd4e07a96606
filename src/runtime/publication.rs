//! The shell's third part: what the daemon shows — the advertised
//! topology, the events, the gauges, the readiness latch and the role
//! hook.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::{Addr, Core, Input, Millis};
use crate::metrics::CoreObserver;
use crate::topology::{Advertiser, Changed};

/// How often the metrics' gauges are set from the core: a scrape is
/// seconds apart, and setting every series of every instance is as costly
/// as building the view.
pub(super) const GAUGES_REFRESH: Duration = Duration::from_secs(1);

/// What the daemon shows of the core.
pub(super) struct Publication {
    /// The advertised topology.
    pub(super) advertiser: Advertiser,
    /// Events, published after the topology of their step.
    pub(super) events: crate::events::EventBus,
    /// When the metrics' gauges were last set from the core.
    pub(super) gauges_set: Instant,
    pub(super) observer: CoreObserver,
    /// Instances still waiting for their first probe outcome.
    pub(super) probing: BTreeSet<(String, Addr)>,
    /// The readiness latch ([`Handle::ready`](super::Handle::ready)).
    pub(super) ready: watch::Sender<bool>,
    /// Run on a managed group's master change (`hooks.rs`).
    pub(super) role_hook: Option<Arc<dyn super::role_hook::RoleHook>>,
    /// `announce-hostnames`, as the Sentinel port reads it
    /// ([`Handle::announce_hostnames`](super::Handle::announce_hostnames)).
    pub(super) announce_hostnames: Arc<std::sync::atomic::AtomicBool>,
}

impl Publication {
    /// Ticks off an instance's first probe outcome; releases the
    /// readiness latch when none is left.
    pub(super) fn probed(&mut self, input: Option<&Input>) {
        if *self.ready.borrow() {
            return;
        }
        if let Some(
            Input::PingOk { group, addr }
            | Input::PingRefused { group, addr }
            | Input::Report { group, addr, .. }
            | Input::LinkDown { group, addr, .. },
        ) = input
        {
            self.probing.remove(&(group.clone(), addr.clone()));
        }
        if self.probing.is_empty() {
            tracing::info!("ready: every configured instance probed once");
            crate::metrics::set_ready(true);
            self.ready.send_replace(true);
        }
    }

    /// Rebuilds the advertised views of the groups that changed at once,
    /// and of every group each refresh period (`topology::Advertiser`);
    /// the groups in `held` keep showing what was last durable. The
    /// metrics' gauges are set every [`GAUGES_REFRESH`], after the
    /// topology, whose verdicts they show.
    pub(super) fn refresh(
        &mut self,
        core: &Core,
        now: Millis,
        changed: &Changed,
        held: &BTreeSet<String>,
        group_tls: &BTreeMap<String, crate::tls::Outbound>,
    ) {
        self.advertiser.refresh(core, now, changed, held);
        if self.gauges_set.elapsed() >= GAUGES_REFRESH {
            self.set_gauges(core, now, group_tls);
        }
    }

    /// Sets every gauge from the core, and the expiry of the groups' own
    /// TLS certificates.
    pub(super) fn set_gauges(
        &mut self,
        core: &Core,
        now: Millis,
        group_tls: &BTreeMap<String, crate::tls::Outbound>,
    ) {
        self.gauges_set = Instant::now();
        self.observer.gauges(core, now);
        // The topology may still hold a group the core just removed (its
        // series were freed above): only the core's groups.
        let topology = self.advertiser.topology();
        self.observer.verdicts(
            topology
                .readiness
                .iter()
                .filter(|(name, _)| core.groups().contains_key(*name))
                .map(|(name, v)| (name, &v.readiness)),
        );
        for (group, outbound) in group_tls {
            crate::tls::group::record_expiry(group, outbound);
        }
    }
}
