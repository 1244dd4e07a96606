//! The daemon-wide timers Sentinel tunes with `SENTINEL DEBUG`, as plain
//! data: one [`Timers`] per daemon, every value in milliseconds.
//!
//! The core reads the ones its rules run on — `ask-period`,
//! `publish-period` (through [`Timers::stale_window`]), `tilt-trigger`,
//! `tilt-period`, `slave-reconf-timeout` and `election-timeout` — from
//! [`crate::Settings`] or [`crate::Core::set_timers`], never from a global.
//! The shell reads the rest (the links' INFO and PING periods, the hello
//! schedule, the pub/sub link's idle rule, the defaults of `SENTINEL
//! MONITOR`) from the same value, so that one `SENTINEL DEBUG` changes
//! every timer it names. Names, validation and the reply are the Sentinel
//! port's (`src/sentinel/cmd/sentinel/debug.rs`).

use crate::Millis;

/// Sentinel's `SENTINEL DEBUG` timers, in milliseconds. Every value is at
/// least 1 when set through `SENTINEL DEBUG`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timers {
    /// `info-period`: how often a link asks its instance for INFO while
    /// the group is not in trouble (Valkyrie's default 1 s; Sentinel's
    /// 10 s). A group in trouble is polled every 100 ms, or every
    /// `info-period` if that is shorter.
    pub info_period: Millis,
    /// `ping-period`: the longest PING period. A link PINGs every tenth of
    /// its group's `down-after`, at most this often (1 s, as Sentinel's
    /// default) and at least every 10 ms.
    pub ping_period: Millis,
    /// `ask-period`: how often a peer that said the master is down is
    /// asked again (one that has not said so yet: every 100 ms, or this if
    /// shorter); its answer is forgotten after five of these.
    pub ask_period: Millis,
    /// `publish-period`: the hello period. Four of them are the stale
    /// window of the peer protocol ([`Timers::stale_window`]), three the
    /// pub/sub link's idle limit.
    pub publish_period: Millis,
    /// `default-down-after`: `down-after-milliseconds` of a group added by
    /// `SENTINEL MONITOR`.
    pub default_down_after: Millis,
    /// `default-failover-timeout`: `failover-timeout` of a group added by
    /// `SENTINEL MONITOR`.
    pub default_failover_timeout: Millis,
    /// `tilt-trigger`: a gap longer than this between two turns of the
    /// shell's loop (which turns at least every 100 ms) means the daemon
    /// did not run — stopped, starved, frozen — and enters TILT.
    pub tilt_trigger: Millis,
    /// `tilt-period`: how long that TILT lasts after the last such gap.
    pub tilt_period: Millis,
    /// `slave-reconf-timeout`: a replica told `REPLICAOF <new master>`
    /// during a failover that has not acknowledged it within this long is
    /// given up on (`-slave-reconf-sent-timeout`), and fixed later.
    pub replica_reconf_timeout: Millis,
    /// `min-link-reconnect-period`: a pub/sub link is not reconnected for
    /// silence before it is this old.
    pub min_link_reconnect_period: Millis,
    /// `election-timeout`: an election not won within this long (or the
    /// failover timeout, if shorter) is abandoned.
    pub election_timeout: Millis,
    /// `script-max-runtime`: kept and reported; Valkyrie runs no scripts
    /// yet.
    pub script_max_runtime: Millis,
    /// `script-retry-delay`: kept and reported; Valkyrie runs no scripts
    /// yet.
    pub script_retry_delay: Millis,
}

/// How often a peer that has not said "down" yet is asked again, at most.
pub const ASK_PERIOD_FAST: Millis = 100;

impl Default for Timers {
    /// Valkyrie's defaults: Sentinel's, except `info-period` (1 s, not
    /// 10 s) and `min-link-reconnect-period` (6 s, not 15 s: the pub/sub
    /// link's idle limit, so that by default only that limit counts).
    fn default() -> Timers {
        Timers {
            info_period: 1_000,
            ping_period: 1_000,
            ask_period: 1_000,
            publish_period: crate::peering::HELLO_PERIOD,
            default_down_after: 30_000,
            default_failover_timeout: 180_000,
            tilt_trigger: 2_000,
            tilt_period: 30_000,
            replica_reconf_timeout: 10_000,
            min_link_reconnect_period: 6_000,
            election_timeout: 10_000,
            script_max_runtime: 60_000,
            script_retry_delay: 30_000,
        }
    }
}

impl Timers {
    /// How often a peer is asked whether the master is down: every
    /// `ask-period` once it said so, else every [`ASK_PERIOD_FAST`] (or
    /// `ask-period`, if shorter).
    pub fn ask_period(&self, agreed: bool) -> Millis {
        if agreed {
            self.ask_period
        } else {
            self.ask_period.min(ASK_PERIOD_FAST)
        }
    }

    /// Sentinel's `ask-period × 5`: a peer's "master down" answer and the
    /// vote it reported are forgotten this long after its last answer.
    pub fn answer_ttl(&self) -> Millis {
        self.ask_period.saturating_mul(5)
    }

    /// Sentinel's `publish-period × 4`: how long a peer's newer
    /// configuration holds our candidacy after it was last heard, and how
    /// long a restarted daemon waits in peer mode before correcting
    /// anyone (it hears the newer hellos first).
    pub fn stale_window(&self) -> Millis {
        self.publish_period.saturating_mul(4)
    }

    /// Sentinel's `publish-period × 3`: a pub/sub link that carries
    /// nothing for this long (and is at least `min-link-reconnect-period`
    /// old) is reconnected.
    pub fn pubsub_idle(&self) -> Millis {
        self.publish_period.saturating_mul(3)
    }

    /// The PING period of a link whose group has `down_after`: a tenth of
    /// it, at most `ping-period`, at least 10 ms.
    pub fn link_ping_period(&self, down_after: Millis) -> Millis {
        (down_after / 10).min(self.ping_period).max(10)
    }

    /// The INFO period of a link, for a group in trouble (`urgent`) or
    /// not.
    pub fn link_info_period(&self, urgent: bool) -> Millis {
        if urgent {
            self.info_period.min(URGENT_INFO_PERIOD)
        } else {
            self.info_period
        }
    }
}

/// INFO period while the group is in trouble (a failover, or its master
/// down or unknown), unless `info-period` is shorter.
pub const URGENT_INFO_PERIOD: Millis = 100;

impl crate::Core {
    /// Replaces the `SENTINEL DEBUG` timers; every rule uses the new
    /// values from the next input on.
    pub fn set_timers(&mut self, timers: Timers) {
        self.daemon.timers = timers;
    }

    /// The `SENTINEL DEBUG` timers in force.
    pub fn timers(&self) -> &Timers {
        &self.daemon.timers
    }
}

/// The timers by their `SENTINEL DEBUG` names, in the order Sentinel
/// lists them (`SENTINEL DEBUG` without arguments shows them upper-case).
pub const NAMES: [&str; 13] = [
    "info-period",
    "ping-period",
    "ask-period",
    "publish-period",
    "default-down-after",
    "default-failover-timeout",
    "tilt-trigger",
    "tilt-period",
    "slave-reconf-timeout",
    "min-link-reconnect-period",
    "election-timeout",
    "script-max-runtime",
    "script-retry-delay",
];

impl Timers {
    fn slot(&mut self, name: &str) -> Option<&mut Millis> {
        Some(match name {
            "info-period" => &mut self.info_period,
            "ping-period" => &mut self.ping_period,
            "ask-period" => &mut self.ask_period,
            "publish-period" => &mut self.publish_period,
            "default-down-after" => &mut self.default_down_after,
            "default-failover-timeout" => &mut self.default_failover_timeout,
            "tilt-trigger" => &mut self.tilt_trigger,
            "tilt-period" => &mut self.tilt_period,
            "slave-reconf-timeout" => &mut self.replica_reconf_timeout,
            "min-link-reconnect-period" => &mut self.min_link_reconnect_period,
            "election-timeout" => &mut self.election_timeout,
            "script-max-runtime" => &mut self.script_max_runtime,
            "script-retry-delay" => &mut self.script_retry_delay,
            _ => return None,
        })
    }

    /// The timer named `name` (one of [`NAMES`]).
    pub fn get(&self, name: &str) -> Option<Millis> {
        let mut copy = *self;
        copy.slot(name).map(|v| *v)
    }

    /// Sets the timer named `name` (one of [`NAMES`]); whether it exists.
    pub fn set(&mut self, name: &str, value: Millis) -> bool {
        self.slot(name).map(|v| *v = value).is_some()
    }
}
