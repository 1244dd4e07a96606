//! What a link is given: its [`LinkSpec`], its timers, the [`Job`]s the
//! runtime hands it, and where it sends what it learns ([`InputSender`]).

use std::time::Duration;

use tokio::sync::mpsc;

use super::client;
use super::hello::HelloJob;
use crate::config::Secret;
use crate::core::{Addr, Command, Input, Timers};

/// How one link behaves.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// The group the instance belongs to.
    pub group: String,
    /// The instance.
    pub addr: Addr,
    /// The group's `down-after`.
    pub down_after: Duration,
    /// `auth-user`, if any.
    pub auth_user: Option<String>,
    /// `auth-pass`, if any.
    pub auth_pass: Option<Secret>,
    /// The group's `rename-command` pairs, applied to every command sent.
    pub renamed: client::Renamed,
    /// Set by the runtime while the group's master is down or a failover
    /// is in progress: INFO is then asked every 100 ms instead of every
    /// `info-period`, so decisions and reconfigurations see fresh state.
    pub urgent: tokio::sync::watch::Receiver<bool>,
    /// The `SENTINEL DEBUG` timers (INFO and PING periods, the pub/sub
    /// link's idle rule): a change applies at once.
    pub timers: tokio::sync::watch::Receiver<Timers>,
    /// This daemon's run id: connections are named
    /// `sentinel-<first 8>-cmd|pubsub`, and our own hellos are recognised.
    pub myid: String,
    /// `tls-replication yes`: the link speaks TLS.
    pub tls: Option<crate::tls::Outbound>,
    /// Where its INFO answers are kept for `SENTINEL INFO-CACHE`.
    pub texts: super::texts::InfoTexts,
    /// Where each host name was reached (`announce-hostnames no`).
    pub resolved: super::resolved::Resolved,
}

impl LinkSpec {
    /// PING period: a tenth of down-after, at most `ping-period` (1 s by
    /// default), at least 10 ms.
    pub fn ping_period(&self) -> Duration {
        let down_after = u64::try_from(self.down_after.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.timers.borrow().link_ping_period(down_after))
    }

    /// The INFO period for a group in trouble (`urgent`) or not:
    /// `info-period` (1 s by default), or 100 ms in trouble (`info-period`
    /// if shorter).
    pub fn info_period(&self, urgent: bool) -> Duration {
        Duration::from_millis(self.timers.borrow().link_info_period(urgent))
    }

    /// How long a pub/sub link may carry nothing (three `publish-period`s)
    /// and how old it must be (`min-link-reconnect-period`) before it is
    /// reconnected.
    pub fn pubsub_idle(&self) -> (Duration, Duration) {
        let t = self.timers.borrow();
        (
            Duration::from_millis(t.pubsub_idle()),
            Duration::from_millis(t.min_link_reconnect_period),
        )
    }

    /// How long a reply may take before the connection is presumed dead:
    /// half of down-after, between 100 ms and 5 s.
    pub fn reply_timeout(&self) -> Duration {
        (self.down_after / 2).clamp(Duration::from_millis(100), Duration::from_secs(5))
    }
}

/// First reconnect delay after a connection that answered broke.
pub const RECONNECT_MIN: Duration = Duration::from_millis(10);
/// Longest delay while a connection that answered was lost recently (see
/// [`FAST_RETRY_WINDOW`]).
pub const RECONNECT_FAST_MAX: Duration = Duration::from_millis(100);
/// How long after a connection that answered broke reconnects stay fast:
/// a process that restarts must be seen (and its run id read) before its
/// replicas reconnect to it, which they do within about a second.
pub const FAST_RETRY_WINDOW: Duration = Duration::from_secs(2);
/// Longest reconnect delay: Sentinel's pace (it reconnects a link at most
/// once per `SENTINEL_PING_PERIOD`, one second). An instance that keeps
/// refusing or timing out costs one connect a second, not ten.
pub const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// Where links send what they learn (bounded, see [`INPUT_QUEUE`]).
pub type InputSender = mpsc::Sender<Input>;

/// Capacity of the channel from every link to the runtime. The runtime
/// drains it in batches; when it is full, links wait (their PINGs are
/// delayed) instead of memory growing.
pub const INPUT_QUEUE: usize = 8192;

/// What the runtime asks a link to do.
#[derive(Debug, Clone)]
pub enum Job {
    /// Execute a core command; its reply goes back as [`Input::Reply`].
    Command {
        /// Correlates the reply.
        token: u64,
        /// The command.
        command: Command,
    },
    /// Publish our hello on the instance's `__sentinel__:hello` channel.
    Hello(HelloJob),
}
