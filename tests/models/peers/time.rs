//! Time: ticks, deadlines, fair rounds, and a state's summary.

use std::fmt::Write as _;

use valkyrie::core::{Input, Millis};

use super::world::*;

impl Sys {
    /// Time passes: every live sentinel runs its timer, `first` first.
    pub fn tick(&mut self, first: Id) {
        self.now = (self.now / TICK + 1) * TICK;
        let mut order = self.sentinels();
        order.sort_by_key(|i| *i != first);
        for i in order {
            if i == SEN {
                self.sen_tick();
            } else if self.up(i) {
                self.tick_val(i);
            }
        }
        if self.now.is_multiple_of(HELLO_PERIOD) {
            for i in self.sentinels() {
                self.hellos_from(i);
            }
        }
    }

    /// The Valkyrie whose candidacy (its random delay after ODOWN) falls
    /// first before the next tick, and when: the shell steps a core at
    /// its `next_deadline`, between regular ticks.
    pub fn deadline(&self) -> Option<(Millis, Id)> {
        let next_tick = (self.now / TICK + 1) * TICK;
        (0..u8::try_from(self.vals.len()).unwrap())
            .filter(|d| self.up(*d))
            .filter_map(|d| {
                let t = self.vals[usize::from(d)].core.next_deadline()?;
                (t > self.now && t < next_tick).then_some((t, d))
            })
            .min()
    }

    /// A Valkyrie's core is stepped at its deadline.
    pub fn step_at_deadline(&mut self, t: Millis, d: Id) {
        self.now = t;
        self.feed(d, Input::Tick);
    }

    /// One fair round: time passes, then everything in flight is
    /// delivered (in a fixed order) until nothing is left, and cores are
    /// stepped at their deadlines (each followed by deliveries).
    pub fn round(&mut self) {
        let ids = self.sentinels();
        let first = ids[usize::try_from(self.now / TICK).unwrap() % ids.len()];
        self.tick(first);
        self.settle();
        while let Some((t, d)) = self.deadline() {
            self.step_at_deadline(t, d);
            self.settle();
        }
    }

    /// Delivers everything in flight, in a fixed order, until nothing is
    /// left.
    pub fn settle(&mut self) {
        for _ in 0..40 {
            let mut busy = false;
            let keys: Vec<(Kind, Id, Id)> = self.net.keys().copied().collect();
            for k in keys {
                if self.net.contains_key(&k) {
                    self.deliver(k, false, false);
                    busy = true;
                }
            }
            for d in 0..u8::try_from(self.vals.len()).unwrap() {
                while !self.cmds[usize::from(d)].is_empty() {
                    self.run_command(d);
                    busy = true;
                }
            }
            if !busy {
                break;
            }
        }
    }

    pub fn summary(&self) -> String {
        let mut s = format!("t={}", self.now);
        for i in self.sentinels() {
            let (e, m) = self.view(i);
            let _ = write!(s, " | {}", name(i));
            if !self.up(i) {
                s.push_str(" DOWN");
                continue;
            }
            if self.cut(i) {
                s.push_str(" CUT");
            }
            let _ = write!(s, " cur={} cfg={e}:{m}", self.current_epoch(i));
            if i == SEN {
                let x = &self.sen;
                let _ = write!(s, " vote={:?}@{}", x.leader.map(name), x.leader_epoch);
                if let Some(f) = &x.failover {
                    let _ = write!(s, " fo={}:{:?}", f.epoch, f.phase);
                }
            } else {
                let g = &self.vals[usize::from(i)].core.groups()[G];
                let _ = write!(
                    s,
                    " vote={:?}@{}",
                    g.leader.as_deref().map(index_of).map(name),
                    g.leader_epoch
                );
                if let Some(e) = &g.election {
                    let _ = write!(s, " el={}{}", e.epoch, if e.won { "won" } else { "" });
                }
                if let Some(f) = &g.failover {
                    let _ = write!(s, " fo={}:{}:{:?}", f.epoch, f.promoted.port, f.phase);
                }
            }
        }
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|(p, n)| format!("{p}{}{}", if n.alive { "" } else { "x" }, n.master_of))
            .collect();
        let _ = write!(s, " | nodes {}", nodes.join(" "));
        let net: Vec<String> = self
            .net
            .iter()
            .map(|((k, f, t), m)| format!("{k:?} {}->{}: {m:?}", name(*f), name(*t)))
            .collect();
        if !net.is_empty() {
            let _ = write!(s, " | net {}", net.join("; "));
        }
        s
    }
}
