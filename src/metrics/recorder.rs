//! Every metric's name, description, unit and buckets, and the recorder
//! built with them ([`recorder`], [`recorder_with`], [`describe`]).

use std::time::Duration;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusRecorder};

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
/// Failovers and switchovers held back, vetoed, given up or refused, by
/// operation, outcome and reason.
pub const FAILOVER_REFUSALS: &str = "valkyrie_failover_refusals_total";
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
/// The readiness verdict: 1 on the group's primary reason (`ready` when
/// nothing would hold a failover back), 0 on every other reason.
pub const GROUP_READY: &str = "valkyrie_group_ready";
/// How far the replica a failover would promote is behind the master.
pub const CANDIDATE_LAG_BYTES: &str = "valkyrie_group_candidate_lag_bytes";
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

/// How often [`PrometheusHandle::run_upkeep`](metrics_exporter_prometheus::PrometheusHandle::run_upkeep) must run: without it,
/// histogram samples pile up between scrapes.
pub const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// Metrics a module above this one records (the Kubernetes input's): its
/// histograms' buckets and its help texts, handed to [`install`](super::install) by the
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
    describe_counter!(
        FAILOVER_REFUSALS,
        "Failovers and switchovers held back, vetoed, given up or refused, by op, outcome \
         and reason (each also a valkyrie:failover-reason event)."
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
    describe_gauge!(
        GROUP_READY,
        "Readiness verdict: 1 on the reason a failover would be held back now (reason=\"ready\" when none), 0 on the others."
    );
    describe_gauge!(
        CANDIDATE_LAG_BYTES,
        Unit::Bytes,
        "How far the replica a failover would promote now is behind the master (approximate; NaN when unknown)."
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
    super::tls::describe();
    super::scripts::describe();
}
