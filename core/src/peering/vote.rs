//! Answering `SENTINEL is-master-down-by-addr` and granting votes
//! (Sentinel's `sentinelVoteLeader`): one vote per group per epoch, first
//! come first served, persisted before the answer leaves.
//!
//! Unlike Sentinel (`docs/security.md`, "Votes"):
//!
//! - a vote goes only to a verified peer of the group (a 40-hex run id we
//!   know, that answered on its address) or to this daemon itself (as
//!   Sentinel, which a request naming its own id makes vote for itself),
//!   and only in peer mode: a lone daemon grants none, so nobody can hold
//!   its own candidacy back;
//! - only such a request moves our current epoch;
//! - a question is never taken as the asker's "down" report: anyone can
//!   name a connection after a peer, so peers' views come only from their
//!   answers to our own questions;
//! - no vote is granted while TILT holds (our view of the masters is then
//!   not to be trusted), and the epoch must be within
//!   [`MAX_EPOCH_JUMP`](super::MAX_EPOCH_JUMP) of ours.

use super::{DownAnswer, EpochError, is_runid, within_reach};
use crate::{Addr, Channel, Core, Group, Millis, Out, Output, Step};

impl Core {
    /// Answers `SENTINEL is-master-down-by-addr <master> <epoch>
    /// <candidate or *>`. The outputs (a `Persist` first when a vote was
    /// granted or the epoch moved) must be carried out before the answer
    /// is sent.
    pub fn is_master_down_by_addr(
        &mut self,
        now: Millis,
        master: &Addr,
        epoch: u64,
        candidate: Option<&str>,
    ) -> Result<(DownAnswer, Vec<Output>), EpochError> {
        within_reach(epoch, self.daemon.current_epoch)?;
        let Some((name, g)) = self.groups.iter_mut().find(|(_, g)| g.master == *master) else {
            return Ok((DownAnswer::unknown(), Vec::new()));
        };
        let mut out = Out::default();
        out.within(Some(name));
        let mut token = self.next_token;
        let cx = &mut Step::new(now, &mut self.daemon, &mut token, &mut out);
        let down = !cx.daemon.tilt && g.own_down(now);
        let answer = match candidate {
            None => DownAnswer {
                down,
                leader: None,
                leader_epoch: 0,
            },
            Some(c) => {
                g.vote(cx, epoch, c);
                DownAnswer {
                    down,
                    leader: g.leader.clone(),
                    leader_epoch: g.leader_epoch,
                }
            }
        };
        // What the question told us (a peer's view, an epoch) counts at
        // once, not at the next tick.
        let name = name.clone();
        self.tick_one(now, &name, &mut token, &mut out);
        self.next_token = token;
        Ok((answer, out.outputs))
    }
}

impl Group {
    /// Sentinel's vote, for a verified peer only (see the module docs):
    /// adopt a higher epoch; grant the vote if this group has none in
    /// `epoch` yet; persist before anyone hears of it. A vote for another
    /// candidate holds our own candidacy back for two failover timeouts.
    pub(crate) fn vote(&mut self, cx: &mut Step<'_>, epoch: u64, candidate: &str) {
        // Ourselves: a request anyone could send in a verified peer's
        // name as well, so it gives away nothing more.
        let eligible = self.peer_mode()
            && is_runid(candidate)
            && (candidate.eq_ignore_ascii_case(&cx.daemon.myid)
                || self
                    .peers
                    .get(&candidate.to_ascii_lowercase())
                    .is_some_and(|p| p.verified));
        if !eligible {
            return;
        }
        let mut new_epoch = false;
        if epoch > cx.daemon.current_epoch {
            cx.daemon.current_epoch = epoch;
            new_epoch = true;
        }
        let granted = !cx.daemon.tilt
            && !self.paused
            && self.leader_epoch < epoch
            && cx.daemon.current_epoch <= epoch;
        if granted {
            self.leader = Some(candidate.to_ascii_lowercase());
            self.leader_epoch = cx.daemon.current_epoch;
            if !candidate.eq_ignore_ascii_case(&cx.daemon.myid) {
                self.candidacy_at = None;
                let hold = self.failover_deadline().saturating_mul(2);
                self.retry_at = self
                    .retry_at
                    .max(cx.now.saturating_add(hold).saturating_add(cx.daemon.jitter));
            }
        }
        if new_epoch || granted {
            // Durable before the answer or any event.
            self.persist(cx.out);
        }
        if new_epoch {
            cx.out
                .event(Channel::NewEpoch, cx.daemon.current_epoch.to_string());
        }
        if granted {
            cx.out.event(
                Channel::VoteForLeader,
                format!("{} {}", candidate.to_ascii_lowercase(), self.leader_epoch),
            );
        }
    }
}
