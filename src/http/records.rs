//! What the status hub keeps and the API shows: events, failover
//! timelines and their steps, the config epochs of each group.

/// One event as the API shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EventRecord {
    /// Its number, from 1, growing.
    pub id: u64,
    /// When the hub received it, in ms since the Unix epoch.
    pub time_ms: u64,
    /// The Sentinel channel, e.g. `+switch-master`.
    pub channel: &'static str,
    /// The group it concerns, if any.
    pub group: Option<String>,
    /// The message, as on the Sentinel channel.
    pub payload: String,
}

/// One step of a failover.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    /// The event's channel.
    pub channel: &'static str,
    /// When, in ms since the Unix epoch.
    pub time_ms: u64,
    /// The event's message.
    pub payload: String,
}

/// A failover (or an SDOWN that may become one), as its events show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Timeline {
    /// The first step's time.
    pub start_ms: u64,
    /// The last step's time once over, else `null`.
    pub end_ms: Option<u64>,
    /// `running`, `done` (failover ended), `aborted`; without any
    /// `+try-failover`, `vetoed` or `held` (the last reason's outcome),
    /// and `refused` for a refused `SENTINEL FAILOVER`.
    pub outcome: &'static str,
    /// The steps, oldest first.
    pub steps: Vec<Step>,
    /// The latest `valkyrie:failover-reason` payload of the timeline (why
    /// it was held back, vetoed, given up or refused), else `null`.
    pub reason: Option<serde_json::Value>,
}

/// One config epoch a group's master was adopted in.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EpochRecord {
    /// The epoch.
    pub epoch: u64,
    /// The master adopted in it, `host:port`.
    pub master: String,
    /// When the hub first saw it, in ms since the Unix epoch.
    pub time_ms: u64,
}
