//! The bytes at risk of every failover this daemon ran: how much of the
//! old master's replication stream the promoted replica may lack.
//!
//! At the promotion Valkyrie knows the promoted replica's offset (its last
//! report as a replica: where its new history forks) and the old master's
//! offset as last seen. Their difference is what the new master lacks of
//! what Valkyrie saw. It is **complete** only when the old master can have
//! taken nothing since: a planned switchover reads the offset the paused
//! master stopped at. Otherwise it is a lower bound — an unreachable
//! master may have acknowledged writes after its last report — until the
//! old master is seen again reporting the master role in the same process
//! (the cut healed, before its demotion): its final offset then makes the
//! figure complete. So the figure is 0 and complete exactly when no
//! acknowledged write can have been lost; whenever some may have been, it
//! is either non-zero or not complete. A replication stream also carries
//! the master's pings (14 bytes each), so a complete non-zero figure says
//! writes *may* be lost, not that they were.

use super::Group;
use crate::{Addr, InfoReport, Role, Step};

/// Failovers remembered per group.
pub const AT_RISK_KEPT: usize = 20;

/// How the old master was kept from taking writes beside the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fenced {
    /// Not at all: an unreachable master without the write fence.
    Not,
    /// Its writes were paused (a switchover, or a master that answered).
    Paused,
    /// The write fence was in force on it.
    WriteFence {
        /// `min-replicas-to-write`.
        replicas: u64,
        /// `min-replicas-max-lag`.
        lag_secs: u64,
    },
}

impl Fenced {
    /// How the status page and the log say it.
    pub fn describe(self) -> String {
        match self {
            Fenced::Not => "not fenced".into(),
            Fenced::Paused => "writes paused".into(),
            Fenced::WriteFence { replicas, lag_secs } => {
                format!("write fence ({replicas} replicas within {lag_secs} s)")
            }
        }
    }
}

/// One failover's bytes at risk.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AtRisk {
    /// The failover's epoch.
    pub epoch: u64,
    /// The master it replaced.
    pub old_master: Addr,
    /// The replica it promoted.
    pub promoted: Addr,
    /// The old master's offset: the last Valkyrie saw, or its final one.
    pub old_offset: u64,
    /// The process that offset is from.
    pub old_run: String,
    /// The promoted replica's offset when it was promoted.
    pub promoted_offset: u64,
    /// The old master can have taken nothing past `old_offset`.
    pub complete: bool,
    /// How the old master was fenced.
    pub fenced: Fenced,
}

impl AtRisk {
    /// Bytes of the old master's stream the new master lacks (a lower
    /// bound unless [`AtRisk::complete`]).
    pub fn bytes(&self) -> u64 {
        self.old_offset.saturating_sub(self.promoted_offset)
    }

    /// The figure in words, for the log.
    pub fn describe(&self) -> String {
        let bound = if self.complete { "" } else { "at least " };
        format!(
            "{bound}{} bytes at risk: {} promoted at offset {}, {} {} at offset {} ({})",
            self.bytes(),
            self.promoted,
            self.promoted_offset,
            self.old_master,
            if self.complete {
                "stopped"
            } else {
                "last seen"
            },
            self.old_offset,
            self.fenced.describe()
        )
    }
}

impl Group {
    /// Records the failover being confirmed (the advertised master is
    /// still the old one); `fork` is the promoted replica's offset. The
    /// log line follows `+switch-master` ([`Group::log_at_risk`]).
    pub(super) fn record_at_risk(&mut self, fork: u64) {
        let Some(f) = &self.failover else {
            return;
        };
        // A switchover read the offset the paused master stopped at.
        let switchover = f.paused_until.is_some() && f.paused_offset > 0;
        let old = self.instances.get(&f.old_master);
        let last = old
            .and_then(|o| o.info.as_ref())
            .filter(|i| matches!(i.role, Role::Master));
        let fenced = if f.paused_until.is_some() {
            Fenced::Paused
        } else if let Some(s) = self.fence_at_failover {
            Fenced::WriteFence {
                replicas: s.replicas,
                lag_secs: s.lag_secs,
            }
        } else {
            Fenced::Not
        };
        let record = AtRisk {
            epoch: f.epoch,
            old_master: f.old_master.clone(),
            promoted: f.promoted.clone(),
            old_offset: if switchover {
                f.paused_offset
            } else {
                last.map_or(0, |i| i.offset)
            },
            old_run: last.map(|i| i.run_id.clone()).unwrap_or_default(),
            promoted_offset: fork,
            complete: switchover,
            fenced,
        };
        self.remember(record);
    }

    /// Keeps a record, the oldest going past [`AT_RISK_KEPT`].
    fn remember(&mut self, record: AtRisk) {
        if self.at_risk.len() == AT_RISK_KEPT {
            self.at_risk.pop_front();
        }
        self.at_risk.push_back(record);
    }

    /// Records a failover someone else ran — a peer's configuration
    /// adopted, or a master found elsewhere — when this daemon switches to
    /// it: the old master's offset as last seen, the new one's last offset
    /// as a replica (its fork), and the fence this daemon had in force on
    /// the old master (a peer's own fencing is not known here). Nothing
    /// is recorded when the new master was never seen as a replica; the
    /// log says so.
    pub(crate) fn record_adopted(&mut self, cx: &mut Step<'_>, old: &Addr, new: &Addr) {
        let last = self
            .instances
            .get(old)
            .and_then(|o| o.info.as_ref())
            .filter(|i| matches!(i.role, Role::Master));
        let fork = self.instances.get(new).and_then(|n| n.replica_offset);
        let Some(fork) = fork else {
            let line = format!(
                "+switch-master epoch {}: bytes at risk unknown ({new} was never seen as a replica)",
                self.config_epoch
            );
            self.log(cx.out, line);
            return;
        };
        let fenced = match self.fence_setting() {
            Some(s) => Fenced::WriteFence {
                replicas: s.replicas,
                lag_secs: s.lag_secs,
            },
            None => Fenced::Not,
        };
        let record = AtRisk {
            epoch: self.config_epoch,
            old_master: old.clone(),
            promoted: new.clone(),
            old_offset: last.map_or(0, |i| i.offset),
            old_run: last.map(|i| i.run_id.clone()).unwrap_or_default(),
            promoted_offset: fork,
            complete: false,
            fenced,
        };
        self.remember(record);
        self.log_at_risk(cx);
    }

    /// Logs the failover just recorded, beside its `+switch-master`.
    pub(super) fn log_at_risk(&mut self, cx: &mut Step<'_>) {
        if let Some(r) = self.at_risk.back() {
            let line = format!("+switch-master epoch {}: {}", r.epoch, r.describe());
            self.log(cx.out, line);
        }
    }

    /// The old master of a failover seen again as master in the same
    /// process, before its demotion: its offset now is final.
    pub(super) fn settle_at_risk(&mut self, cx: &mut Step<'_>, addr: &Addr, info: &InfoReport) {
        if !matches!(info.role, Role::Master) || *addr == self.master {
            return;
        }
        let Some(r) = self
            .at_risk
            .iter_mut()
            .rev()
            .find(|r| r.old_master == *addr && !r.complete && r.old_run == info.run_id)
        else {
            return;
        };
        r.old_offset = r.old_offset.max(info.offset);
        r.complete = true;
        let line = format!("failover epoch {} settled: {}", r.epoch, r.describe());
        self.log(cx.out, line);
    }
}
