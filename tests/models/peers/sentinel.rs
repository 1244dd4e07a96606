//! The Sentinel model: valkey-sentinel's election and failover as
//! `src/sentinel.c` runs them, beside the Valkyries.

use std::collections::BTreeMap;

use super::world::*;

impl Sys {
    /// `sentinelVoteLeader`.
    pub fn sen_vote(&mut self, epoch: u64, candidate: Id) -> (Option<Id>, u64) {
        if epoch > self.sen.current_epoch {
            self.sen.current_epoch = epoch;
        }
        if self.sen.leader_epoch < epoch && self.sen.current_epoch <= epoch {
            self.sen.leader = Some(candidate);
            self.sen.leader_epoch = self.sen.current_epoch;
            self.voted(SEN, candidate, self.sen.leader_epoch);
            if candidate != SEN {
                self.sen.failover_start = Some(self.now + self.sen.jitter);
            }
        }
        (self.sen.leader, self.sen.leader_epoch)
    }

    /// `sentinelGetLeader`: votes counted against the *current* epoch.
    pub fn sen_get_leader(&mut self, epoch: u64) -> Option<Id> {
        let current = self.sen.current_epoch;
        let mut counts: BTreeMap<Id, usize> = BTreeMap::new();
        for p in self.sen.peers.values() {
            if let Some(l) = p.leader
                && p.leader_epoch == current
            {
                *counts.entry(l).or_default() += 1;
            }
        }
        let (mut winner, mut max) = (None, 0);
        for (c, n) in &counts {
            if *n > max {
                (winner, max) = (Some(*c), *n);
            }
        }
        let (myvote, my_epoch) = self.sen_vote(epoch, winner.unwrap_or(SEN));
        if let Some(v) = myvote
            && my_epoch == epoch
        {
            let n = counts.entry(v).or_default();
            *n += 1;
            if *n > max {
                (winner, max) = (Some(v), *n);
            }
        }
        let voters = self.sen.peers.len() + 1;
        if max < voters / 2 + 1 || max < QUORUM {
            winner = None;
        }
        winner
    }

    pub fn sen_answer(&mut self, master: u16, epoch: u64, candidate: Option<Id>) -> Ans {
        if master != self.sen.master {
            return Ans {
                down: false,
                leader: None,
                leader_epoch: 0,
            };
        }
        let down = self.sen.sdown;
        match candidate {
            None => Ans {
                down,
                leader: None,
                leader_epoch: 0,
            },
            Some(c) => {
                let (leader, leader_epoch) = self.sen_vote(epoch, c);
                Ans {
                    down,
                    leader,
                    leader_epoch,
                }
            }
        }
    }

    pub fn sen_reply(&mut self, from: Id, ans: &Ans) {
        let now = self.now;
        let p = self.sen.peers.entry(from).or_default();
        p.reply_at = Some(now);
        p.master_down = ans.down;
        if let Some(l) = ans.leader {
            p.leader = Some(l);
            p.leader_epoch = ans.leader_epoch;
        }
    }

    pub fn sen_hello(&mut self, payload: &str) {
        let f: Vec<&str> = payload.split(',').collect();
        let cur: u64 = f[3].parse().unwrap();
        let master: u16 = f[6].parse().unwrap();
        let cfg: u64 = f[7].parse().unwrap();
        let s = &mut self.sen;
        if cur > s.current_epoch {
            s.current_epoch = cur;
        }
        if cfg > s.config_epoch {
            s.config_epoch = cfg;
            if master != s.master {
                s.master = master;
                self.sen_reset();
            }
        }
    }

    /// `sentinelResetPrimary`: any failover cancelled, may fail over again
    /// at once, its vote's run id freed (its epoch kept), a fresh master.
    pub fn sen_reset(&mut self) {
        let s = &mut self.sen;
        s.failover = None;
        s.failover_start = None;
        s.leader = None;
        s.last_ok = self.now;
        s.sdown = false;
    }

    /// `sentinelAskPrimaryStateToOtherSentinels`.
    pub fn sen_ask(&mut self, forced: bool) {
        let now = self.now;
        for p in self.sen.peers.values_mut() {
            if p.reply_at
                .is_some_and(|t| now.saturating_sub(t) > SEN_ANSWER_TTL)
            {
                p.master_down = false;
                p.leader = None;
            }
        }
        if !self.sen.sdown {
            return;
        }
        let candidate = self.sen.failover.as_ref().map(|_| SEN);
        let ids: Vec<Id> = self.sen.peers.keys().copied().collect();
        for p in ids {
            let recent = self.sen.peers[&p]
                .reply_at
                .is_some_and(|t| now.saturating_sub(t) < SEN_ASK_PERIOD);
            if !self.reachable(SEN, p) || (recent && !forced) {
                continue;
            }
            let msg = Msg::Ask {
                master: self.sen.master,
                epoch: self.sen.current_epoch,
                candidate,
            };
            self.send_msg(Kind::Ask, SEN, p, msg);
        }
    }

    pub fn sen_tick(&mut self) {
        let now = self.now;
        let sees = !self.cut(SEN);
        if sees && self.nodes[&self.sen.master].alive {
            self.sen.last_ok = now;
        }
        self.sen.sdown = now.saturating_sub(self.sen.last_ok) > DOWN_AFTER;
        self.sen_timer();
    }

    /// Sentinel's timer for its master (it runs ten times a second: also
    /// between the model's ticks), after the SDOWN check.
    pub fn sen_timer(&mut self) {
        let now = self.now;
        let agreeing = self.sen.peers.values().filter(|p| p.master_down).count();
        let odown = self.sen.sdown && 1 + agreeing >= QUORUM;
        let backed_off = self
            .sen
            .failover_start
            .is_none_or(|t| now.saturating_sub(t) >= 2 * FAILOVER_TIMEOUT);
        if odown && self.sen.failover.is_none() && backed_off {
            self.sen.current_epoch += 1;
            self.sen.failover = Some(SenFailover {
                epoch: self.sen.current_epoch,
                phase: SenPhase::WaitStart,
                changed: now,
            });
            self.sen.failover_start = Some(now + self.sen.jitter);
            self.sen_ask(true);
        }
        self.sen_failover_step();
        self.sen_ask(false);
    }

    /// Whether the Sentinel model's timer could do anything now besides
    /// asking (a cheap filter before trying it).
    pub fn sen_may_act(&self) -> bool {
        match &self.sen.failover {
            None => {
                let agreeing = self.sen.peers.values().filter(|p| p.master_down).count();
                self.sen.sdown
                    && 1 + agreeing >= QUORUM
                    && self
                        .sen
                        .failover_start
                        .is_none_or(|t| self.now.saturating_sub(t) >= 2 * FAILOVER_TIMEOUT)
            }
            Some(f) => match f.phase {
                SenPhase::WaitStart => true,
                SenPhase::WaitPromotion(p) => self.nodes[&p].master_of == 0,
            },
        }
    }

    pub fn sen_failover_step(&mut self) {
        let now = self.now;
        let Some(f) = self.sen.failover.clone() else {
            return;
        };
        let sees = !self.cut(SEN);
        match f.phase {
            SenPhase::WaitStart => {
                if self.sen_get_leader(f.epoch) == Some(SEN) {
                    let master = self.sen.master;
                    let chosen = NODES
                        .into_iter()
                        .filter(|p| *p != master && sees && self.nodes[p].alive)
                        .max_by(|x, y| {
                            self.nodes[x]
                                .offset
                                .cmp(&self.nodes[y].offset)
                                .then(y.cmp(x))
                        });
                    match chosen {
                        None => self.sen.failover = None,
                        Some(p) => {
                            self.promoted(SEN, f.epoch, p);
                            self.promote_node(p);
                            self.sen.failover = Some(SenFailover {
                                epoch: f.epoch,
                                phase: SenPhase::WaitPromotion(p),
                                changed: now,
                            });
                        }
                    }
                } else {
                    let start = self.sen.failover_start.unwrap_or(0);
                    if now.saturating_sub(start) > SEN_ELECTION_TIMEOUT {
                        self.sen.failover = None;
                    }
                }
            }
            SenPhase::WaitPromotion(p) => {
                let n = &self.nodes[&p];
                if sees && n.alive && n.master_of == 0 {
                    let old = self.sen.master;
                    self.sen.config_epoch = f.epoch;
                    self.sen.master = p;
                    for q in NODES {
                        if q != p && q != old && self.nodes[&q].alive {
                            self.follow(q, p);
                        }
                    }
                    self.sen_reset();
                    self.hellos_from(SEN);
                } else if now.saturating_sub(f.changed) > FAILOVER_TIMEOUT {
                    self.sen.failover = None;
                }
            }
        }
    }

    // ----- time -----
}
