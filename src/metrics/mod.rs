//! Prometheus metrics: every metric name, its description and unit, the
//! recorder, and the helpers the shell records through.
//!
//! Nothing under `core/` records a metric: the core stays pure. The
//! runtime derives group, instance and failover series from the core's
//! outputs and state after each step ([`CoreObserver`]); the links record
//! PING round trips; the Sentinel port records connections, commands,
//! subscribers and parse errors; the index port records subscribers and
//! pushes.
//!
//! Names follow Prometheus conventions: a `valkyrie_` prefix, the unit in
//! the name (`_seconds`), `_total` on counters. Labels are bounded: group
//! and instance names come from the configuration and from discovery (the
//! monitored servers), command names from a fixed list, error kinds from a
//! fixed enum; no client address is ever a label.
//!
//! When the admin port is disabled no recorder is installed and every
//! helper here is a no-op, so histograms never accumulate unrendered.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Histogram, counter};
use metrics::{gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use valkyrie_core::FailoverResult;
use valkyrie_protocol::DecodeError;

mod recorder;
mod scripts;
mod tls;
pub use scripts::{
    SCRIPT_RUNS, SCRIPTS_DROPPED, SCRIPTS_QUEUED, SCRIPTS_RUNNING, script_dropped, script_run,
    scripts_queue,
};
pub use tls::{
    TLS_CERT_EXPIRY, TLS_HANDSHAKES, TLS_RELOADS, tls_cert_expiry, tls_group_cert_expiry,
    tls_handshake, tls_reloaded,
};

pub use recorder::*;

use crate::core::Millis;
use crate::core::select::eligibility;
use crate::core::{Addr, Channel, Core, Event, Readiness, Reason, Role};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

pub mod groups;
pub use groups::render;

/// Installs the process-wide recorder (once; later calls return the same
/// handle) and describes every metric. The caller runs upkeep.
pub fn install(extensions: &[Extension]) -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = recorder_with(extensions).unwrap_or_else(|e| {
                // Histograms then render as summaries: degraded, not fatal.
                tracing::error!("metrics buckets: {e}");
                PrometheusBuilder::new().build_recorder()
            });
            let handle = recorder.handle();
            let router = groups::Router::new(recorder, groups::Groups::global());
            if metrics::set_global_recorder(router).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics stays empty");
            }
            describe();
            for e in extensions {
                (e.describe)();
            }
            gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            handle
        })
        .clone()
}

/// Sets the readiness gauge.
pub fn set_ready(ready: bool) {
    gauge!(READY).set(if ready { 1.0 } else { 0.0 });
}

/// A link's PING round-trip histogram, looked up once per link.
pub fn ping_rtt(group: &str, instance: &Addr) -> Histogram {
    histogram!(PING_RTT, "group" => group.to_string(), "instance" => instance.to_string())
}

/// Counts a published event (and an SDOWN transition, by role).
pub fn event(event: &Event) {
    let group = event.group.clone().unwrap_or_default();
    if event.channel == Channel::Sdown {
        let role = if event.about_master() {
            "master"
        } else {
            "replica"
        };
        counter!(SDOWN_EVENTS, "group" => group.clone(), "role" => role).increment(1);
    }
    counter!(EVENTS, "group" => group, "event" => event.channel.as_str()).increment(1);
}

/// Sets the group and instance series from the core. Keeps only this
/// runtime's key among the runtimes of the process, for the per-group
/// series ([`groups::retain`]).
#[derive(Debug)]
pub struct CoreObserver {
    id: u64,
}

impl Default for CoreObserver {
    fn default() -> CoreObserver {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        CoreObserver {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }
}

impl Drop for CoreObserver {
    fn drop(&mut self) {
        groups::retain(self.id, None::<std::iter::Empty<&String>>);
    }
}

/// A failover this daemon runs began (the core's `FailoverStarted`).
pub fn failover_started(group: &str) {
    gauge!(FAILOVER_IN_PROGRESS, "group" => group.to_string()).set(1.0);
}

/// A failover or switchover held back, vetoed, given up or refused (the
/// core's `Refused`): every label is bounded (`reason` is one of
/// `Refusal::LABELS`).
pub fn failover_refused(
    group: &str,
    op: &'static str,
    outcome: &'static str,
    reason: &'static str,
) {
    counter!(FAILOVER_REFUSALS, "group" => group.to_string(), "op" => op, "outcome" => outcome, "reason" => reason)
        .increment(1);
}

/// A failover this daemon ran ended (the core's `FailoverEnded`), after
/// `duration`.
pub fn failover_ended(group: &str, result: FailoverResult, duration: Duration) {
    let group = group.to_string();
    counter!(FAILOVERS, "group" => group.clone(), "result" => result.label()).increment(1);
    histogram!(FAILOVER_DURATION, "group" => group.clone(), "result" => result.label())
        .record(duration.as_secs_f64());
    gauge!(FAILOVER_IN_PROGRESS, "group" => group).set(0.0);
}

impl CoreObserver {
    /// Sets the gauges that describe the groups and their instances, as of
    /// `now` (the core's milliseconds).
    pub fn gauges(&self, core: &Core, now: Millis) {
        // Series of removed groups are freed (`groups`).
        groups::retain(self.id, Some(core.groups().keys()));
        gauge!(GROUPS_MONITORED).set(core.groups().len() as f64);
        gauge!(TILT).set(if core.tilted() { 1.0 } else { 0.0 });
        for (name, g) in core.groups() {
            gauge!(GROUP_EPOCH, "group" => name.clone()).set(g.epoch as f64);
            gauge!(GROUP_CONFIG_EPOCH, "group" => name.clone()).set(g.config_epoch as f64);
            if let Some(r) = g.at_risk.back() {
                gauge!(FAILOVER_BYTES_AT_RISK, "group" => name.clone()).set(r.bytes() as f64);
                gauge!(FAILOVER_AT_RISK_COMPLETE, "group" => name.clone()).set(if r.complete {
                    1.0
                } else {
                    0.0
                });
            }
            let fence = g.fence_setting().map_or(0, |f| f.replicas);
            gauge!(WRITE_FENCE_REPLICAS, "group" => name.clone()).set(fence as f64);
            gauge!(FAILOVER_IN_PROGRESS, "group" => name.clone()).set(if g.failover.is_some() {
                1.0
            } else {
                0.0
            });
            let mut healthy = 0u32;
            for inst in g.instances.values() {
                let instance = inst.addr.to_string();
                gauge!(INSTANCE_LINK_UP, "group" => name.clone(), "instance" => instance.clone())
                    .set(if inst.failure.is_none() { 1.0 } else { 0.0 });
                gauge!(INSTANCE_SDOWN, "group" => name.clone(), "instance" => instance.clone())
                    .set(if inst.sdown { 1.0 } else { 0.0 });
                let role = match inst.info.as_ref().map(|i| &i.role) {
                    Some(Role::Master) => "master",
                    Some(Role::Replica { .. }) => "replica",
                    None => "unknown",
                };
                for r in ["master", "replica", "unknown"] {
                    gauge!(INSTANCE_ROLE, "group" => name.clone(), "instance" => instance.clone(), "role" => r)
                        .set(if r == role { 1.0 } else { 0.0 });
                }
                // A candidate a failover could promote now (the core's
                // own rule) that also follows the advertised master over
                // an up link.
                let linked = matches!(
                    inst.info.as_ref().map(|i| &i.role),
                    Some(Role::Replica { master, link_up: true, .. }) if *master == g.master
                );
                if inst.addr != g.master && linked && eligibility(g, inst, now).is_ok() {
                    healthy += 1;
                }
            }
            gauge!(HEALTHY_REPLICAS, "group" => name.clone()).set(f64::from(healthy));
        }
    }

    /// Sets each group's readiness verdict: every reason's series, so the
    /// labels stay the bounded set of [`Reason::LABELS`].
    pub fn verdicts<'a>(&self, verdicts: impl IntoIterator<Item = (&'a String, &'a Readiness)>) {
        for (name, r) in verdicts {
            let primary = r.label();
            for &reason in Reason::LABELS {
                gauge!(GROUP_READY, "group" => name.clone(), "reason" => reason)
                    .set(if reason == primary { 1.0 } else { 0.0 });
            }
            let lag = r.candidate.as_ref().and_then(|c| c.lag_bytes);
            gauge!(CANDIDATE_LAG_BYTES, "group" => name.clone())
                .set(lag.map_or(f64::NAN, |l| l as f64));
        }
    }
}

/// A client connected to the Sentinel port; counted until dropped.
#[derive(Debug)]
pub struct SentinelConnection(());

/// Counts an accepted Sentinel-port connection for as long as the guard
/// lives.
pub fn sentinel_connected() -> SentinelConnection {
    counter!(SENTINEL_CONNECTIONS_ACCEPTED).increment(1);
    gauge!(SENTINEL_CONNECTIONS).increment(1.0);
    SentinelConnection(())
}

impl Drop for SentinelConnection {
    fn drop(&mut self) {
        gauge!(SENTINEL_CONNECTIONS).decrement(1.0);
    }
}

/// Counts a failed login on the Sentinel port.
pub fn sentinel_auth_failure() {
    counter!(SENTINEL_AUTH_FAILURES).increment(1);
}

/// A group's full peer table refused or evicted a peer.
pub fn peer_refused(group: &str, reason: &'static str) {
    counter!(PEERS_REFUSED, "group" => group.to_string(), "reason" => reason).increment(1);
}

/// Counts a failed write of the state file and shows it as unwritable.
pub fn state_write_failed() {
    counter!(STATE_WRITE_FAILURES).increment(1);
    set_state_file_writable(false);
}

/// Sets `valkyrie_state_file_writable`.
pub fn set_state_file_writable(writable: bool) {
    gauge!(STATE_FILE_WRITABLE).set(if writable { 1.0 } else { 0.0 });
}

/// Counts a connection refused for `maxclients`.
pub fn sentinel_rejected() {
    counter!(SENTINEL_CONNECTIONS_REJECTED).increment(1);
}

/// A subscribed Sentinel-port client; counted until dropped.
#[derive(Debug)]
pub struct PubsubSubscriber(());

/// Counts a client that subscribed, for as long as the guard lives.
pub fn pubsub_subscribed() -> PubsubSubscriber {
    gauge!(PUBSUB_SUBSCRIBERS).increment(1.0);
    PubsubSubscriber(())
}

impl Drop for PubsubSubscriber {
    fn drop(&mut self) {
        gauge!(PUBSUB_SUBSCRIBERS).decrement(1.0);
    }
}

/// Counts a failed accept on `port` (`sentinel`, `index`, `admin`).
pub fn accept_error(port: &'static str) {
    counter!(ACCEPT_ERRORS, "port" => port).increment(1);
}

/// Counts a subscriber disconnected for lagging.
pub fn pubsub_lagged() {
    counter!(PUBSUB_LAGGED).increment(1);
}

/// A subscriber of the index port; counted until dropped.
#[derive(Debug)]
pub struct IndexSubscriber(());

/// Counts an index-port subscriber for as long as the guard lives.
pub fn index_subscriber_connected() -> IndexSubscriber {
    gauge!(INDEX_SUBSCRIBERS).increment(1.0);
    IndexSubscriber(())
}

impl Drop for IndexSubscriber {
    fn drop(&mut self) {
        gauge!(INDEX_SUBSCRIBERS).decrement(1.0);
    }
}

/// Moves the count of proven index subscribers by `delta`.
pub fn index_proven(delta: f64) {
    gauge!(INDEX_PROVEN).increment(delta);
}

/// Counts one snapshot of `group` pushed to one index subscriber.
pub fn index_push(group: &str) {
    counter!(INDEX_PUSHES, "group" => group.to_string()).increment(1);
}

/// Which listener a parse error happened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    /// The Sentinel port.
    Sentinel,
    /// The index (topology-push) port.
    Index,
}

impl Listener {
    fn label(self) -> &'static str {
        match self {
            Listener::Sentinel => "sentinel",
            Listener::Index => "index",
        }
    }
}

/// Counts a subscriber the index port turned away: at the per-address
/// limit when `per_address`, else at the total one.
pub fn index_refused(per_address: bool) {
    let limit = if per_address { "address" } else { "total" };
    counter!(INDEX_REFUSED, "limit" => limit).increment(1);
}

/// Counts a malformed index-port command, by its error code (`syntax`,
/// `limit`, `unknown-command`, `version`).
pub fn index_error(code: &'static str) {
    counter!(PARSE_ERRORS, "listener" => Listener::Index.label(), "kind" => code).increment(1);
}

/// Counts a malformed request, by kind ([`DecodeError::metric_label`]).
pub fn parse_error(listener: Listener, error: &DecodeError) {
    counter!(PARSE_ERRORS, "listener" => listener.label(), "kind" => error.metric_label())
        .increment(1);
}

#[cfg(test)]
mod tests;
