//! The write fence: a master cut off from its replicas stops
//! acknowledging writes that a failover would throw away.
//!
//! Valkey has the mechanism: with `min-replicas-to-write N` and
//! `min-replicas-max-lag L`, a master refuses writes (`-NOREPLICAS`) once
//! fewer than N replicas have acknowledged within L seconds (counted once
//! a second). Nobody sets it, because a static N stops every write while
//! a replica is legitimately away. The governor here keeps it in step
//! with the replicas the master itself lists:
//!
//! - **auto**: N is a majority of the replicas the master lists as online
//!   within the lag bound, retiring ones (on Kubernetes, pods on their
//!   way out, which are never promoted) not counted. A majority, not one: a master that keeps one
//!   replica of three while the monitors reach the other two would
//!   otherwise keep taking writes that the promoted replica never saw.
//!   It tightens as replicas arrive and relaxes as they leave, but only
//!   from the master's own report, so only while Valkyrie reaches the
//!   master: an isolated master is never relaxed (nothing reaches it).
//! - **strict**: N is a majority of every replica the group knows, and
//!   never relaxes: writes stop rather than risk loss.
//! - **off**: Valkyrie leaves the settings alone (Sentinel's behaviour).
//!
//! The governor also sets `repl-ping-replica-period` to
//! [`FENCE_PING_SECS`], so that a live master is heard by its replicas
//! every second even when idle. With both in force on the master's
//! current process (its run id; a restart forgets `CONFIG SET`), the
//! replicas' `master_last_io_seconds_ago` tells within seconds whether
//! the master is cut off, and the witness window shrinks from 11 s to
//! [`Group::witness_io_secs`] ([`detect`](super::detect)).
//!
//! A failover hands the fence on: the promoted replica is told its
//! setting before `REPLICAOF NO ONE` (auto: none yet, it has no replicas;
//! strict: the group's), and every reconfigured replica the setting the
//! new master will hold, so a node promoted by hand later is fenced too.

use super::Group;
use super::state::RETIRED_GRACE;
use crate::{Addr, Command, Millis, Role, Step};

/// `repl-ping-replica-period` while the fence is on: a live master pings
/// its replicas every second.
pub const FENCE_PING_SECS: u64 = 1;

/// Valkey's default `repl-ping-replica-period`, restored when the fence
/// is turned off.
pub const VALKEY_PING_SECS: u64 = 10;

/// The default `write-fence-lag` (Valkey's `min-replicas-max-lag`).
pub const DEFAULT_FENCE_LAG_SECS: u64 = 1;

/// How a group's masters are fenced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FenceMode {
    /// Settings left alone.
    #[default]
    Off,
    /// A majority of the replicas online now.
    Auto,
    /// A majority of every replica known; never relaxed.
    Strict,
}

impl FenceMode {
    /// The configuration word.
    pub fn as_str(self) -> &'static str {
        match self {
            FenceMode::Off => "off",
            FenceMode::Auto => "auto",
            FenceMode::Strict => "strict",
        }
    }

    /// Parses the configuration word (case-insensitive).
    pub fn parse(word: &str) -> Option<FenceMode> {
        match word.to_ascii_lowercase().as_str() {
            "off" => Some(FenceMode::Off),
            "auto" => Some(FenceMode::Auto),
            "strict" => Some(FenceMode::Strict),
            _ => None,
        }
    }
}

/// A group's fence configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteFence {
    /// The mode.
    pub mode: FenceMode,
    /// `min-replicas-max-lag`, in seconds (1 or more).
    pub lag_secs: u64,
}

impl Default for WriteFence {
    fn default() -> WriteFence {
        WriteFence {
            mode: FenceMode::Off,
            lag_secs: DEFAULT_FENCE_LAG_SECS,
        }
    }
}

/// What a node is told: `min-replicas-to-write`, `min-replicas-max-lag`
/// and `repl-ping-replica-period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FenceSetting {
    /// `min-replicas-to-write` (0: no fence).
    pub replicas: u64,
    /// `min-replicas-max-lag`.
    pub lag_secs: u64,
    /// `repl-ping-replica-period`.
    pub ping_secs: u64,
}

/// A setting acknowledged by (or sent to) a master process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FenceApplied {
    /// The node.
    pub addr: Addr,
    /// Its process (run id) when it was told.
    pub run_id: String,
    /// What it was told.
    pub setting: FenceSetting,
    /// When it was sent.
    pub sent_at: Millis,
    /// The command's token: only the answer to this very `CONFIG SET`
    /// acknowledges it (an earlier one of the same value may still be
    /// answered after a tighter one was sent).
    pub token: u64,
    /// The node answered it with an error (an ACL, a renamed `CONFIG`).
    pub refused: bool,
}

/// How long a refused fence waits before it is asked again: an ACL or a
/// rename does not change by itself, and each refusal is logged.
pub const RETRY_REFUSED_AFTER: Millis = 60_000;

/// A strict majority of `n` (0 for none).
pub fn majority(n: u64) -> u64 {
    if n == 0 { 0 } else { n / 2 + 1 }
}

impl Group {
    fn setting(&self, replicas: u64) -> FenceSetting {
        FenceSetting {
            replicas,
            lag_secs: self.spec.fence.lag_secs,
            ping_secs: FENCE_PING_SECS,
        }
    }

    /// Replicas of the group other than `master`, wherever they point:
    /// what strict mode requires a majority of.
    fn known_replicas(&self, master: &Addr) -> u64 {
        self.instances.keys().filter(|a| *a != master).count() as u64
    }

    /// The setting the advertised master should hold now, from its latest
    /// report; `None` when the mode is off or the master has not reported
    /// itself master.
    pub(crate) fn fence_wanted(&self, now: Millis) -> Option<FenceSetting> {
        let info = self.master_instance()?.info.as_ref()?;
        if !matches!(info.role, Role::Master) {
            return None;
        }
        let lag = self.spec.fence.lag_secs;
        match self.spec.fence.mode {
            FenceMode::Off => None,
            FenceMode::Auto => {
                // A retiring replica (its pod on its way out) is never
                // promoted, so its acknowledgement protects nothing: it
                // is not counted, and its planned departure stops no
                // write.
                let healthy = info
                    .replicas
                    .iter()
                    .filter(|r| r.online && r.lag.is_some_and(|l| l <= lag))
                    .filter(|r| {
                        !self.instances.get(&r.addr).is_some_and(|i| {
                            i.retiring
                                || i.retired_at
                                    .is_some_and(|t| now.saturating_sub(t) < RETIRED_GRACE)
                        })
                    })
                    .count() as u64;
                Some(self.setting(majority(healthy)))
            }
            FenceMode::Strict => Some(self.setting(majority(self.known_replicas(&self.master)))),
        }
    }

    /// The setting a node about to be promoted gets before `REPLICAOF NO
    /// ONE`: auto, none (it has no replicas yet; it tightens as they
    /// attach); strict, the group's.
    pub(crate) fn fence_for_promoted(&self, promoted: &Addr) -> Option<FenceSetting> {
        match self.spec.fence.mode {
            FenceMode::Off => None,
            FenceMode::Auto => Some(self.setting(0)),
            FenceMode::Strict => Some(self.setting(majority(self.known_replicas(promoted)))),
        }
    }

    /// The setting a replica gets when it is pointed at a new master: what
    /// that master will hold once every replica is back.
    pub(crate) fn fence_for_replica(&self) -> Option<FenceSetting> {
        match self.spec.fence.mode {
            FenceMode::Off => None,
            FenceMode::Auto | FenceMode::Strict => {
                Some(self.setting(majority(self.known_replicas(&self.master))))
            }
        }
    }

    /// Keeps the advertised master's fence in step with its latest
    /// report. Called on the master's own report, so it acts only while
    /// the master is reachable; never during a failover (which sets the
    /// promoted node's), nor towards a master that lost its data.
    pub(crate) fn govern_fence(&mut self, cx: &mut Step<'_>) {
        if self.failover.is_some() || self.master_lost.is_some() {
            return;
        }
        if self.spec.fence.mode == FenceMode::Off {
            self.release_fence(cx);
            return;
        }
        let Some(wanted) = self.fence_wanted(cx.now) else {
            return;
        };
        let Some(run_id) = self
            .master_instance()
            .and_then(|m| m.info.as_ref())
            .map(|i| i.run_id.clone())
        else {
            return;
        };
        let master = self.master.clone();
        let current = self
            .fence
            .as_ref()
            .filter(|f| f.addr == master && f.run_id == run_id);
        if let Some(f) = current {
            // In force already, sent and not yet answered, or refused
            // lately.
            let wait = if f.refused {
                RETRY_REFUSED_AFTER
            } else {
                super::RESEND_AFTER
            };
            if f.setting == wanted
                && (self.fence_confirmed || cx.now.saturating_sub(f.sent_at) < wait)
            {
                return;
            }
        }
        self.fence = Some(FenceApplied {
            addr: master.clone(),
            run_id,
            setting: wanted,
            sent_at: cx.now,
            token: *cx.token,
            refused: false,
        });
        self.fence_confirmed = false;
        self.send(cx, &master, Command::SetWriteFence(wanted));
    }

    /// A replica's link just failed (the first failure since it last
    /// answered). An `auto` fence that holds the master to any replica
    /// (in force, or sent and not yet answered) would refuse writes until
    /// the master's next periodic report relaxes it: ask for that report
    /// now. This is what a switchover that retires its old master (a
    /// deleted pod) needs, the old master leaving just after it attached
    /// as a replica. Strict never relaxes, and a failover sets fences of
    /// its own.
    pub(crate) fn fence_replica_lost(&mut self, cx: &mut Step<'_>, addr: &Addr) {
        let holds = self
            .fence
            .as_ref()
            .is_some_and(|f| f.addr == self.master && f.setting.replicas > 0 && !f.refused);
        if self.spec.fence.mode != FenceMode::Auto
            || *addr == self.master
            || self.failover.is_some()
            || !holds
        {
            return;
        }
        let master = self.master.clone();
        self.send(cx, &master, Command::AskInfo);
    }

    /// The mode was turned off: a fence Valkyrie set on the master is
    /// lifted once (Valkey's defaults: no replicas required, pings every
    /// 10 s), and the settings are left alone from then on.
    fn release_fence(&mut self, cx: &mut Step<'_>) {
        let master = self.master.clone();
        if self
            .fence
            .take()
            .is_some_and(|f| f.addr == master && f.setting.replicas > 0)
        {
            self.fence_confirmed = false;
            let release = FenceSetting {
                replicas: 0,
                lag_secs: self.spec.fence.lag_secs,
                ping_secs: VALKEY_PING_SECS,
            };
            self.send(cx, &master, Command::SetWriteFence(release));
        }
    }

    /// `CONFIG SET` of a fence answered (command `token`): in force if it
    /// is the one the governor last sent to the current master.
    pub(crate) fn fence_acknowledged(&mut self, addr: &Addr, token: u64, ok: bool) {
        if let Some(f) = &mut self.fence
            && f.addr == *addr
            && f.token == token
        {
            f.refused = !ok;
            self.fence_confirmed = ok;
        }
    }

    /// The fence is in force on the advertised master's current process:
    /// it acknowledged a setting of at least one replica, with the ping
    /// period, since it last started.
    pub fn fence_in_force(&self) -> bool {
        self.fence_confirmed
            && self.fence.as_ref().is_some_and(|f| {
                f.addr == self.master
                    && f.setting.replicas > 0
                    && self
                        .master_instance()
                        .and_then(|m| m.info.as_ref())
                        .is_some_and(|i| i.run_id == f.run_id)
            })
    }

    /// The setting this governor last sent to the advertised master, and
    /// whether the master acknowledged it; `None` when it sent none (the
    /// mode is off, or the master has not reported yet) or the master
    /// refused it. What a caller that waits for a relaxed fence waits on:
    /// a setting still on its way is not in force, and another one may be.
    pub fn fence_sent(&self) -> Option<(FenceSetting, bool)> {
        self.fence
            .as_ref()
            .filter(|f| f.addr == self.master && !f.refused)
            .map(|f| (f.setting, self.fence_confirmed))
    }

    /// The setting in force on the advertised master, if any.
    pub fn fence_setting(&self) -> Option<FenceSetting> {
        self.fence_in_force()
            .then(|| self.fence.as_ref().map(|f| f.setting))
            .flatten()
    }

    /// Before an unplanned promotion: the promoted node gets its setting,
    /// and an old master that still answers (it reports the wrong role,
    /// restarted without its data, or the peers elected us while it
    /// answers here) has its writes paused until it is demoted, as in a
    /// planned switchover, so it cannot take writes beside the new one.
    pub(crate) fn fence_before_promotion(&mut self, cx: &mut Step<'_>, promoted: &Addr) {
        if self.spec.fence.mode == FenceMode::Off {
            return;
        }
        self.fence_promoted(cx, promoted);
        self.fence_followers(cx, promoted);
        let down_after = self.spec.down_after;
        let answers = self
            .master_instance()
            .is_some_and(|m| m.failure.is_none() && cx.now.saturating_sub(m.last_ok) <= down_after);
        if !answers {
            return;
        }
        let pause = self.failover_deadline().min(super::PAUSE_MAX);
        if let Some(f) = &mut self.failover {
            f.paused_until = Some(cx.now.saturating_add(pause));
        }
        let master = self.master.clone();
        self.send(cx, &master, Command::PauseWrites { ms: pause });
    }

    /// Gives every replica that will follow `promoted` the setting that
    /// master will hold once they are back, before anything is advertised:
    /// whichever of them is promoted next is fenced from its first write,
    /// even while `parallel-syncs` holds its `REPLICAOF` back.
    pub(crate) fn fence_followers(&mut self, cx: &mut Step<'_>, promoted: &Addr) {
        if self.spec.fence.mode == FenceMode::Off {
            return;
        }
        let setting = self.setting(majority(self.known_replicas(promoted)));
        let followers: Vec<Addr> = self
            .instances
            .keys()
            .filter(|a| *a != promoted && **a != self.master)
            .cloned()
            .collect();
        for addr in followers {
            self.send(cx, &addr, Command::SetWriteFence(setting));
        }
    }

    /// Records a setting sent as part of a promotion: once the promoted
    /// node is confirmed and reports, the governor takes it from there.
    pub(crate) fn fence_promoted(
        &mut self,
        cx: &mut Step<'_>,
        promoted: &Addr,
    ) -> Option<FenceSetting> {
        let setting = self.fence_for_promoted(promoted)?;
        let run_id = self
            .instances
            .get(promoted)
            .and_then(|i| i.info.as_ref())
            .map(|i| i.run_id.clone())
            .unwrap_or_default();
        self.fence = Some(FenceApplied {
            addr: promoted.clone(),
            run_id,
            setting,
            sent_at: cx.now,
            token: *cx.token,
            refused: false,
        });
        self.fence_confirmed = false;
        self.send(cx, promoted, Command::SetWriteFence(setting));
        Some(setting)
    }
}

#[cfg(test)]
mod tests {
    use super::majority;

    #[test]
    fn majority_of_replicas() {
        assert_eq!(
            [0, 1, 2, 3, 4, 5].map(majority),
            [0, 1, 2, 2, 3, 3],
            "a strict majority, none of none"
        );
    }
}
