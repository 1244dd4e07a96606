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

use metrics::{Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram};
use metrics::{gauge, histogram};
use metrics_exporter_prometheus::{
    BuildError, Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use valkyrie_core::FailoverResult;
use valkyrie_protocol::DecodeError;

mod tls;
pub use tls::{
    TLS_CERT_EXPIRY, TLS_HANDSHAKES, TLS_RELOADS, tls_cert_expiry, tls_group_cert_expiry,
    tls_handshake, tls_reloaded,
};

use crate::core::Millis;
use crate::core::select::eligibility;
use crate::core::{Addr, Channel, Core, Event, Role};

/// Build information: constant 1, labelled with the version.
pub const BUILD_INFO: &str = "valkyrie_build_info";
/// 1 once the daemon is ready (the `/readyz` latch), else 0.
pub const READY: &str = "valkyrie_ready";
/// Groups (masters) monitored.
pub const GROUPS_MONITORED: &str = "valkyrie_groups_monitored";
/// 1 while the link to an instance is connected and answering.
pub const INSTANCE_LINK_UP: &str = "valkyrie_instance_link_up";
/// 1 while an instance is subjectively down.
pub const INSTANCE_SDOWN: &str = "valkyrie_instance_sdown";
/// 1 for the role an instance reports (`master`, `replica`, `unknown`).
pub const INSTANCE_ROLE: &str = "valkyrie_instance_role";
/// PING round trip to an instance.
pub const PING_RTT: &str = "valkyrie_ping_rtt_seconds";
/// Replicas of a group that are up, linked to the master and eligible.
pub const HEALTHY_REPLICAS: &str = "valkyrie_group_healthy_replicas";
/// Transitions into SDOWN.
pub const SDOWN_EVENTS: &str = "valkyrie_sdown_events_total";
/// Sentinel events published, by channel.
pub const EVENTS: &str = "valkyrie_events_total";
/// Failovers that ended, by result.
pub const FAILOVERS: &str = "valkyrie_failovers_total";
/// How long failovers took, from the epoch bump to the end.
pub const FAILOVER_DURATION: &str = "valkyrie_failover_duration_seconds";
/// 1 while a failover of the group is in progress.
pub const FAILOVER_IN_PROGRESS: &str = "valkyrie_failover_in_progress";
/// A group's failover epoch.
pub const GROUP_EPOCH: &str = "valkyrie_group_epoch";
/// The last failover's bytes at risk, by group.
pub const FAILOVER_BYTES_AT_RISK: &str = "valkyrie_failover_bytes_at_risk";
/// Whether that figure is complete (1) or a lower bound (0).
pub const FAILOVER_AT_RISK_COMPLETE: &str = "valkyrie_failover_bytes_at_risk_complete";
/// `min-replicas-to-write` the write fence holds on the master (0: none).
pub const WRITE_FENCE_REPLICAS: &str = "valkyrie_write_fence_replicas";
/// The epoch the group's advertised master was adopted in.
pub const GROUP_CONFIG_EPOCH: &str = "valkyrie_group_config_epoch";
/// 1 while TILT (the mass-failure pause) holds failovers back.
pub const TILT: &str = "valkyrie_tilt";
/// Failed writes of the state file.
pub const STATE_WRITE_FAILURES: &str = "valkyrie_state_write_failures_total";
/// 1 while the last write of the state file succeeded.
pub const STATE_FILE_WRITABLE: &str = "valkyrie_state_file_writable";
/// Failed logins (`AUTH`, `HELLO … AUTH`) on the Sentinel port.
pub const SENTINEL_AUTH_FAILURES: &str = "valkyrie_sentinel_auth_failures_total";
/// Peers a group's full peer table could not keep, by reason.
pub const PEERS_REFUSED: &str = "valkyrie_peers_refused_total";
/// Clients connected to the Sentinel port.
pub const SENTINEL_CONNECTIONS: &str = "valkyrie_sentinel_connections";
/// Connections accepted on the Sentinel port.
pub const SENTINEL_CONNECTIONS_ACCEPTED: &str = "valkyrie_sentinel_connections_accepted_total";
/// Connections refused on the Sentinel port (`maxclients`).
pub const SENTINEL_CONNECTIONS_REJECTED: &str = "valkyrie_sentinel_connections_rejected_total";
/// Commands received on the Sentinel port, by name.
pub const SENTINEL_COMMANDS: &str = "valkyrie_sentinel_commands_total";
/// Sentinel-port clients subscribed to at least one channel or pattern.
pub const PUBSUB_SUBSCRIBERS: &str = "valkyrie_sentinel_pubsub_subscribers";
/// Subscribers disconnected for falling too far behind.
pub const PUBSUB_LAGGED: &str = "valkyrie_sentinel_pubsub_lagged_disconnects_total";
/// Subscribers connected to the index (topology-push) port.
pub const INDEX_SUBSCRIBERS: &str = "valkyrie_index_subscribers";
/// Index subscribers that proved they read (acknowledged their last mark).
pub const INDEX_PROVEN: &str = "valkyrie_index_proven_subscribers";
/// Snapshots pushed to index subscribers.
pub const INDEX_PUSHES: &str = "valkyrie_index_pushes_total";
/// Subscribers turned away by the index port, by the limit they met.
pub const INDEX_REFUSED: &str = "valkyrie_index_refused_total";
/// Failed accepts on a listening port, by port; the listener retries.
pub const ACCEPT_ERRORS: &str = "valkyrie_accept_errors_total";
/// Malformed requests, by listener and kind.
pub const PARSE_ERRORS: &str = "valkyrie_parse_errors_total";

/// PING round trips on loopback are tens of microseconds, across a
/// datacentre a millisecond or two; past a second a link is in trouble.
const RTT_BUCKETS: &[f64] = &[
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0,
];

/// Failovers take from well under a second (a dead master, fast
/// replicas) to `failover-timeout` (minutes).
const FAILOVER_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// How often [`PrometheusHandle::run_upkeep`] must run: without it,
/// histogram samples pile up between scrapes.
pub const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// Metrics a module above this one records (the Kubernetes input's): its
/// histograms' buckets and its help texts, handed to [`install`] by the
/// daemon, so this module names nothing above it.
#[derive(Clone, Copy, Debug)]
pub struct Extension {
    /// Histogram names and their buckets.
    pub buckets: &'static [(&'static str, &'static [f64])],
    /// Describes the extension's metrics (help text and unit).
    pub describe: fn(),
}

/// Builds the recorder with our buckets (real Prometheus histograms, not
/// summaries), without installing it. Fails only if a bucket list is
/// empty.
pub fn recorder() -> Result<PrometheusRecorder, BuildError> {
    recorder_with(&[])
}

/// [`recorder`], with the extensions' buckets too.
pub fn recorder_with(extensions: &[Extension]) -> Result<PrometheusRecorder, BuildError> {
    let mut builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(PING_RTT.into()), RTT_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(FAILOVER_DURATION.into()), FAILOVER_BUCKETS)?;
    for (name, buckets) in extensions.iter().flat_map(|e| e.buckets) {
        builder = builder.set_buckets_for_metric(Matcher::Full((*name).into()), buckets)?;
    }
    Ok(builder.build_recorder())
}

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

/// Describes every metric (help text and unit).
pub fn describe() {
    describe_gauge!(
        BUILD_INFO,
        "Build information; constant 1, labelled with the version."
    );
    describe_gauge!(
        READY,
        "1 once configuration is loaded, state restored and every configured instance probed once."
    );
    describe_gauge!(GROUPS_MONITORED, "Groups (masters) monitored.");
    describe_gauge!(
        INSTANCE_LINK_UP,
        "1 while the link to the instance is connected and answering, else 0."
    );
    describe_gauge!(
        INSTANCE_SDOWN,
        "1 while the instance is subjectively down (no valid reply for down-after-milliseconds)."
    );
    describe_gauge!(
        INSTANCE_ROLE,
        "1 for the role the instance last reported (master, replica, unknown), 0 for the others."
    );
    describe_histogram!(
        PING_RTT,
        Unit::Seconds,
        "Round trip of PING to a monitored instance."
    );
    describe_gauge!(
        HEALTHY_REPLICAS,
        "Replicas that are up, linked to the advertised master and could be promoted."
    );
    describe_counter!(
        SDOWN_EVENTS,
        "Instances entering subjective-down state (+sdown), by group and role."
    );
    describe_counter!(EVENTS, "Sentinel events published, by group and channel.");
    describe_counter!(
        FAILOVERS,
        "Failovers that ended, by result: succeeded (a new master was adopted) or aborted."
    );
    describe_histogram!(
        FAILOVER_DURATION,
        Unit::Seconds,
        "Duration of failovers from the epoch bump to the end, by result."
    );
    describe_gauge!(
        FAILOVER_IN_PROGRESS,
        "1 while a failover of the group runs."
    );
    describe_gauge!(GROUP_EPOCH, "The group's failover epoch (attempts so far).");
    describe_gauge!(
        GROUP_CONFIG_EPOCH,
        "The epoch in which the group's advertised master was adopted."
    );
    describe_gauge!(
        TILT,
        "1 while TILT (the mass-failure pause) holds every failover back."
    );
    describe_gauge!(
        SENTINEL_CONNECTIONS,
        "Clients connected to the Sentinel port."
    );
    describe_counter!(
        STATE_WRITE_FAILURES,
        "Failed writes of the state file: a refused administrative change, or a decision \
         not acted on until a later write succeeds."
    );
    describe_gauge!(
        STATE_FILE_WRITABLE,
        "1 while the last write of the state file succeeded; 0 while decisions wait for it."
    );
    describe_counter!(
        SENTINEL_CONNECTIONS_ACCEPTED,
        "Connections accepted on the Sentinel port."
    );
    describe_counter!(
        SENTINEL_AUTH_FAILURES,
        "Failed logins on the Sentinel port (AUTH or HELLO AUTH with a wrong password, or an \
         unknown or disabled user); each also slows its connection down."
    );
    describe_counter!(
        PEERS_REFUSED,
        "Peers a group's full table (32 peers) could not keep, by group and reason: evicted \
         (an unverified peer made room for a newcomer) or full (every peer is verified; the \
         newcomer was refused)."
    );
    describe_counter!(
        SENTINEL_CONNECTIONS_REJECTED,
        "Connections refused on the Sentinel port because maxclients was reached."
    );
    describe_counter!(
        SENTINEL_COMMANDS,
        "Commands received on the Sentinel port, by command (unknown names as \"unknown\")."
    );
    describe_gauge!(
        PUBSUB_SUBSCRIBERS,
        "Sentinel-port clients subscribed to at least one channel or pattern."
    );
    describe_counter!(
        PUBSUB_LAGGED,
        "Sentinel-port subscribers disconnected for falling too far behind the events."
    );
    describe_gauge!(
        INDEX_SUBSCRIBERS,
        "Subscribers connected to the topology-push (index) port."
    );
    describe_gauge!(
        INDEX_PROVEN,
        "Index subscribers that acknowledged their last batch of pushes (protocol version 2); \
         they are written first when a change is published."
    );
    describe_counter!(
        INDEX_PUSHES,
        "Topology snapshots pushed to index subscribers, by group."
    );
    describe_gauge!(
        FAILOVER_BYTES_AT_RISK,
        "Bytes of the old master's replication stream the last promoted replica lacks, by \
         group: a lower bound while valkyrie_failover_bytes_at_risk_complete is 0."
    );
    describe_gauge!(
        FAILOVER_AT_RISK_COMPLETE,
        "1 when the last failover's bytes at risk are final (the old master can have taken \
         nothing more), 0 when they are a lower bound."
    );
    describe_gauge!(
        WRITE_FENCE_REPLICAS,
        "min-replicas-to-write the write fence holds on the group's master (0: none in force)."
    );
    describe_counter!(
        INDEX_REFUSED,
        "Subscribers the index port turned away with ERR busy, by the limit met: \"total\" \
         (all subscribers) or \"address\" (one client address)."
    );
    describe_counter!(
        ACCEPT_ERRORS,
        "Failed accepts by port (sentinel, index, admin), e.g. out of file descriptors; the \
         listener backs off (10 ms doubling to 1 s) and accepts again."
    );
    describe_counter!(
        PARSE_ERRORS,
        "Malformed requests, by listener and kind; the connection is closed after each."
    );
    tls::describe();
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
