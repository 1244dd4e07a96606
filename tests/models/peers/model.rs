//! The model over the world: actions, fault choice, properties.

use std::collections::BTreeMap;

use stateright::{Model, Property};
use valkyrie::core::{Core, HelloVia, Input, Millis, State};

use super::world::*;

impl Action {
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Action::Delay(_)
                | Action::Drop(..)
                | Action::Duplicate(..)
                | Action::LoseAnswer(..)
                | Action::CrashAnswering(..)
                | Action::LoseCommand(_)
                | Action::Crash(_)
                | Action::Partition(_)
                | Action::CrashReplica
                | Action::ReviveMaster
        )
    }
}

/// Random walks that take a fault about once in `FAULT_ODDS` choices
/// (xorshift: no random crate needed).
#[derive(Clone)]
pub struct FaultChooser;

pub const FAULT_ODDS: u64 = 12;

impl stateright::Chooser<Env> for FaultChooser {
    type State = u64;

    fn new_state(&self, seed: u64) -> u64 {
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }

    fn choose_initial_state(&self, rng: &mut u64, initial: &[Sys]) -> usize {
        usize::try_from(next(rng) % initial.len() as u64).unwrap()
    }

    fn choose_action(&self, rng: &mut u64, _: &Sys, actions: &[Action]) -> usize {
        let (faults, normal): (Vec<usize>, Vec<usize>) =
            (0..actions.len()).partition(|i| actions[*i].is_fault());
        let pick =
            |rng: &mut u64, v: &[usize]| v[usize::try_from(next(rng) % v.len() as u64).unwrap()];
        if !faults.is_empty() && (normal.is_empty() || next(rng).is_multiple_of(FAULT_ODDS)) {
            pick(rng, &faults)
        } else {
            pick(rng, &normal)
        }
    }
}

pub fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

impl Env {
    pub fn init(&self, jitters: &[Millis], sen_jitter: Millis) -> Sys {
        let mut nodes = BTreeMap::new();
        for (p, master_of, offset) in [(1, 0, 10), (2, 1, 10), (3, 1, 8)] {
            nodes.insert(
                p,
                Node {
                    alive: true,
                    master_of,
                    offset,
                    replid: 0,
                },
            );
        }
        let n = self.valkyries;
        let mut s = Sys {
            now: 0,
            nodes,
            vals: Vec::new(),
            sen: Sen {
                current_epoch: 0,
                config_epoch: 0,
                master: 1,
                leader: None,
                leader_epoch: 0,
                peers: (0..n).map(|i| (i, SenPeer::default())).collect(),
                last_ok: 0,
                sdown: false,
                failover: None,
                failover_start: None,
                jitter: sen_jitter,
            },
            net: BTreeMap::new(),
            cmds: vec![Vec::new(); usize::from(n)],
            partitioned: None,
            partition_epoch: 0,
            faults: 0,
            persist_epoch: self.persist_epoch,
            votes: BTreeMap::new(),
            promotions: BTreeMap::new(),
            configs: BTreeMap::new(),
            views: BTreeMap::new(),
            violation: None,
        };
        let mut outs = Vec::new();
        for i in 0..n {
            let (mut core, out) = Core::new(settings(i), vec![spec()], None, 0);
            core.set_jitter(jitters[usize::from(i)]);
            s.vals.push(Val {
                core,
                persisted: State::default(),
                up: true,
                jitter: jitters[usize::from(i)],
            });
            outs.push(out);
        }
        for (i, out) in outs.into_iter().enumerate() {
            s.apply(u8::try_from(i).unwrap(), out);
        }
        // Everyone hears everyone's hello once and sees the data nodes.
        for i in 0..n {
            for j in s.sentinels() {
                if j != i {
                    let payload = s.hello_payload(j);
                    s.feed(
                        i,
                        Input::Hello {
                            payload,
                            via: HelloVia::Channel,
                        },
                    );
                }
            }
            s.tick_val(i);
        }
        // The master dies; two quiet rounds follow (nobody suspects yet).
        s.nodes.get_mut(&1).unwrap().alive = false;
        s.round();
        s.round();
        s.net.clear();
        s.check_views();
        s
    }
}

impl Model for Env {
    type State = Sys;
    type Action = Action;

    fn init_states(&self) -> Vec<Sys> {
        self.jitters
            .iter()
            .flat_map(|c| self.sen_jitters.iter().map(|j| self.init(c, *j)))
            .collect()
    }

    fn actions(&self, s: &Sys, actions: &mut Vec<Action>) {
        if s.violation.is_some() || s.now >= self.horizon {
            return;
        }
        if s.sentinels()
            .iter()
            .any(|i| s.current_epoch(*i) > EPOCH_CAP)
        {
            return;
        }
        let vals: Vec<Id> = (0..self.valkyries).collect();
        let can_fault = s.faults < self.max_faults;
        if let Some(window) = self.liveness {
            actions.push(Action::Round(None));
            if s.now < window && can_fault {
                for i in s.sentinels() {
                    if self.faults.partition && s.partitioned.is_none() {
                        actions.push(Action::Round(Some(Fault::Partition(i))));
                    }
                }
                for &d in &vals {
                    if self.faults.crash && s.vals[usize::from(d)].up {
                        actions.push(Action::Round(Some(Fault::Crash(d))));
                    }
                }
                if self.faults.silence {
                    actions.push(Action::Round(Some(Fault::Silence)));
                }
            }
            if s.partitioned.is_some() {
                actions.push(Action::Round(Some(Fault::Heal)));
            }
            for &d in &vals {
                if !s.vals[usize::from(d)].up {
                    actions.push(Action::Round(Some(Fault::Restart(d))));
                }
            }
            return;
        }
        let quiet = s.net.is_empty() && s.cmds.iter().all(Vec::is_empty);
        if quiet {
            for i in s.sentinels() {
                actions.push(Action::Tick(i));
            }
        } else if self.faults.delay && can_fault {
            // Time passes with messages in flight: a delay (a fault).
            actions.push(Action::Delay(SEN));
        }
        if !s.cut(SEN) && s.sen_may_act() {
            let mut t = s.clone();
            t.sen_timer();
            if t.sen != s.sen {
                actions.push(Action::SenStep);
            }
        }
        // With one fault, faults that involve V0 stand for those of any
        // Valkyrie (the model is symmetric in them: every jitter
        // combination, every tick order).
        let faulty = |i: Id| !self.v0_faults || i == 0;
        if self.batched {
            let mut senders: Vec<Id> = s.net.keys().map(|(_, f, _)| *f).collect();
            senders.sort_unstable();
            senders.dedup();
            for f in senders {
                actions.push(Action::DeliverFrom(f));
            }
        }
        for &(k, f, t) in s.net.keys() {
            if !self.batched {
                actions.push(Action::Deliver(k, f, t));
            }
            if can_fault && (faulty(f) || faulty(t)) {
                if self.faults.drop {
                    actions.push(Action::Drop(k, f, t));
                }
                if self.faults.duplicate {
                    actions.push(Action::Duplicate(k, f, t));
                }
                if self.faults.lose_answer && k == Kind::Ask {
                    actions.push(Action::LoseAnswer(f, t));
                }
                if self.faults.crash && k == Kind::Ask && t != SEN && faulty(t) {
                    actions.push(Action::CrashAnswering(f, t));
                }
            }
        }
        for &d in &vals {
            if !s.cmds[usize::from(d)].is_empty() {
                actions.push(Action::Command(d));
                if self.faults.lose_command && can_fault && faulty(d) {
                    actions.push(Action::LoseCommand(d));
                }
            }
            if self.faults.crash {
                if s.vals[usize::from(d)].up {
                    if can_fault && faulty(d) {
                        actions.push(Action::Crash(d));
                    }
                } else if quiet {
                    actions.push(Action::Restart(d));
                }
            }
        }
        if self.faults.partition {
            match s.partitioned {
                None if can_fault => {
                    for i in s.sentinels() {
                        if faulty(i) || i == SEN {
                            actions.push(Action::Partition(i));
                        }
                    }
                }
                Some(_) if quiet => actions.push(Action::Heal),
                Some(_) => {}
                None => {}
            }
        }
        if self.faults.replica && can_fault && s.nodes[&2].alive {
            actions.push(Action::CrashReplica);
        }
        if self.faults.revive && can_fault && !s.nodes[&1].alive {
            actions.push(Action::ReviveMaster);
        }
    }

    fn next_state(&self, last: &Sys, action: Action) -> Option<Sys> {
        let mut s = last.clone();
        match action {
            Action::Tick(i) => s.tick(i),
            Action::SenStep => s.sen_timer(),
            Action::Delay(i) => {
                s.faults += 1;
                s.tick(i);
            }
            Action::Deliver(k, f, t) => s.deliver((k, f, t), false, false),
            Action::DeliverFrom(i) => {
                let keys: Vec<(Kind, Id, Id)> =
                    s.net.keys().filter(|(_, f, _)| *f == i).copied().collect();
                for k in keys {
                    if s.net.contains_key(&k) {
                        s.deliver(k, false, false);
                    }
                }
            }
            Action::Duplicate(k, f, t) => {
                s.faults += 1;
                s.deliver((k, f, t), true, false);
            }
            Action::LoseAnswer(f, t) => {
                s.faults += 1;
                s.deliver((Kind::Ask, f, t), false, true);
            }
            Action::CrashAnswering(f, t) => {
                s.faults += 1;
                s.deliver((Kind::Ask, f, t), false, true);
                s.crash(t);
            }
            Action::Drop(k, f, t) => {
                s.faults += 1;
                s.net.remove(&(k, f, t));
            }
            Action::Command(d) => s.run_command(d),
            Action::LoseCommand(d) => {
                s.faults += 1;
                s.cmds[usize::from(d)].remove(0);
            }
            Action::Crash(d) => {
                s.faults += 1;
                s.crash(d);
            }
            Action::Restart(d) => s.restart(d),
            Action::Partition(i) => {
                s.faults += 1;
                s.partitioned = Some(i);
                s.partition_epoch = s.current_epoch(i);
                s.purge(i);
            }
            Action::Heal => s.partitioned = None,
            Action::CrashReplica => {
                s.faults += 1;
                s.nodes.get_mut(&2).unwrap().alive = false;
            }
            Action::ReviveMaster => {
                s.faults += 1;
                s.nodes.get_mut(&1).unwrap().alive = true;
            }
            Action::Round(fault) => {
                match fault {
                    Some(Fault::Partition(i)) => {
                        s.faults += 1;
                        s.partitioned = Some(i);
                        s.partition_epoch = s.current_epoch(i);
                        s.purge(i);
                    }
                    Some(Fault::Heal) => s.partitioned = None,
                    Some(Fault::Crash(d)) => {
                        s.faults += 1;
                        s.crash(d);
                    }
                    Some(Fault::Restart(d)) => s.restart(d),
                    Some(Fault::Silence) => {
                        s.faults += 1;
                        s.net.clear();
                    }
                    None => {}
                }
                // After the fault window the network is stable: healed,
                // everyone running.
                if self.liveness.is_some_and(|w| s.now >= w) {
                    s.partitioned = None;
                    for d in 0..self.valkyries {
                        if !s.vals[usize::from(d)].up {
                            s.restart(d);
                        }
                    }
                }
                s.round();
            }
        }
        s.check_views();
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![Property::<Self>::always("safety", |_, s: &Sys| {
            s.violation.is_none()
        })];
        if self.liveness.is_some() {
            properties.push(Property::<Self>::eventually(
                "every sentinel advertises the same live new master",
                |env, s: &Sys| {
                    s.now >= env.liveness.unwrap_or(0)
                        && s.partitioned.is_none()
                        && agreed_on_new_master(s)
                },
            ));
            return properties;
        }
        properties.push(Property::<Self>::sometimes(
            "a Valkyrie promotes",
            |_, s: &Sys| s.promotions.values().any(|(w, _)| *w != SEN),
        ));
        properties.push(Property::<Self>::sometimes(
            "the Sentinel model promotes",
            |_, s: &Sys| s.promotions.values().any(|(w, _)| *w == SEN),
        ));
        properties.push(Property::<Self>::sometimes(
            "every sentinel advertises the same new master",
            |_, s: &Sys| agreed_on_new_master(s),
        ));
        properties
    }
}

/// Every sentinel runs and advertises the same (config epoch, master), a
/// live node other than the dead master that reports the master role.
pub fn agreed_on_new_master(s: &Sys) -> bool {
    let ids = s.sentinels();
    if !ids.iter().all(|i| s.up(*i)) {
        return false;
    }
    let (e, m) = s.view(SEN);
    let n = &s.nodes[&m];
    m != 1 && n.alive && n.master_of == 0 && ids.iter().all(|i| s.view(*i) == (e, m))
}
