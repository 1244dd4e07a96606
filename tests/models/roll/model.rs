//! The model of `tests/models/roll/mod.rs` over its world: the actions
//! each state allows, their effects, and the properties checked.

use stateright::{Model, Property};
use valkyrie::kube::controller::roll::plan::{Observed, Plan, PodState, Step, Wait};

use super::world::*;

/// One run's setting.
#[derive(Clone)]
pub struct Env {
    /// `spec.replicas`.
    pub want: i32,
    /// The StatefulSet's size at the start.
    pub size: i32,
    /// Where the master is at the start (one initial state each).
    pub masters: Vec<usize>,
    /// Whether the pods run the update revision at the start.
    pub new: bool,
    pub strict_need: Option<u64>,
    pub faults: Faults,
    pub max_faults: u8,
    pub max_writes: u8,
    /// The planner: `plan::plan`, or a broken one.
    pub planner: fn(&Observed) -> Plan,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A reconcile observes and plans (`roll::decide`): the plan is
    /// stored, the leaving and terminating pods marked retiring.
    Observe,
    /// The reconcile applies the stored plan's size and takes its step
    /// after `roll::act`'s re-check; a switchover it starts promotes this
    /// replica (the core's choice).
    Act(Option<usize>),
    /// A client write the master acknowledges.
    Write,
    /// A replica syncs (fully, or catches up) from the up master.
    Sync(usize),
    /// The StatefulSet controller creates a missing pod (update revision).
    Create(usize),
    /// The kubelet: the pod is Ready, its Valkey up, empty.
    Ready(usize),
    /// The StatefulSet controller deletes a pod past its size.
    Remove(usize),
    /// A terminating pod is gone (its preStop hook returned).
    Die(usize),
    /// The master's pod is terminating: the reconciler asks for a
    /// switchover (`handover`), to this replica.
    HandOver(usize),
    /// The master is down: the core starts a failover to this replica.
    Failover(usize),
    /// The running failover or switchover ends: promotes its replica if
    /// it still can, else gives up.
    Promote,
    /// The advertised master's pod restarted: it starts fenced, empty
    /// (a replica here: it takes no write, is never promoted). The core
    /// takes it back once no other Valkey holds keys (nothing was lost);
    /// until then the empty-restart guard fails it over.
    TakeBack,
    /// Fault: the reconciler crashes or the Lease moves.
    CrashReconciler,
    /// Fault: this starting pod never becomes Ready.
    Stuck(usize),
    /// Fault: the master's Valkey dies, its pod restarts.
    CrashMaster,
}

impl Env {
    pub fn observe(&self, s: &Sys) -> Observed {
        s.observe(self.want, self.strict_need)
    }

    /// Whether acting on `p` right after observing it (with `retiring`
    /// marked) would change anything: a plan that only waits is not
    /// stored, so a state where nothing else happens is final.
    fn effective(&self, s: &Sys, p: &Plan, retiring: u8) -> bool {
        let mut after = s.clone();
        after.retiring = retiring;
        p.size != s.size
            || retiring != s.retiring
            || match p.step {
                Step::Delete(n) => {
                    s.unchanged(s.master)
                        && matches!(
                            s.pods[n as usize].life,
                            PodState::Starting | PodState::Ready
                        )
                }
                Step::Switchover => {
                    s.unchanged(s.master) && !after.switchover_candidates().is_empty()
                }
                _ => false,
            }
    }

    /// Every pod below the size applied runs the update revision and is
    /// Ready, none is past it, and the plan is steady.
    pub fn rolled(&self, s: &Sys) -> bool {
        self.rolled_but(s, None)
    }

    /// As `rolled`, pod `but` (if any) Ready or not.
    fn rolled_but(&self, s: &Sys, but: Option<usize>) -> bool {
        let p = (self.planner)(&self.observe(s));
        p.step == Step::Steady
            && p.size == s.size
            && s.pods.iter().enumerate().all(|(n, pod)| {
                if (n as i32) < s.size {
                    pod.new && (pod.life == PodState::Ready || but == Some(n))
                } else {
                    pod.life == PodState::Missing
                }
            })
    }

    /// The pod that never comes back is still there, and the plan stalls
    /// (or waits) on it, or waits for a master when it is the master's, or
    /// it is the only one not Ready (on the new revision: the roll is
    /// done, the plan steady).
    fn stalled(&self, s: &Sys) -> bool {
        let p = (self.planner)(&self.observe(s));
        let no_master = Step::Wait {
            ordinal: None,
            why: Wait::NoMaster,
        };
        s.stuck.is_some_and(|k| {
            s.pods[k].life == PodState::Starting
                && (waits_on(&p.step, k)
                    || (k == s.master && p.step == no_master)
                    || self.rolled_but(s, Some(k)))
        })
    }

    fn is_final(&self, s: &Sys) -> bool {
        let mut actions = Vec::new();
        self.actions(s, &mut actions);
        actions.is_empty()
    }
}

impl Model for Env {
    type State = Sys;
    type Action = Event;

    fn init_states(&self) -> Vec<Sys> {
        self.masters
            .iter()
            .map(|&m| Sys::new(m, self.new, self.size))
            .collect()
    }

    fn actions(&self, s: &Sys, actions: &mut Vec<Event>) {
        if s.violation.is_some() {
            return;
        }
        match &s.stored {
            None => {
                let o = self.observe(s);
                let p = (self.planner)(&o);
                if self.effective(s, &p, Sys::retiring_for(&o, &p)) {
                    actions.push(Event::Observe);
                }
            }
            Some((p, seen)) => match p.step {
                Step::Switchover if s.unchanged(*seen) => {
                    let candidates = s.switchover_candidates();
                    if candidates.is_empty() {
                        actions.push(Event::Act(None));
                    }
                    actions.extend(candidates.into_iter().map(|c| Event::Act(Some(c))));
                }
                _ => actions.push(Event::Act(None)),
            },
        }
        let master = &s.pods[s.master];
        let up = s.master_up();
        if s.writes < self.max_writes && up && !matches!(s.running, Some(Running::Switchover(_))) {
            actions.push(Event::Write);
        }
        for (n, p) in s.pods.iter().enumerate() {
            match (p.life, p.valkey) {
                (PodState::Missing, _) if (n as i32) < s.size => actions.push(Event::Create(n)),
                (PodState::Starting, _) if s.stuck != Some(n) => actions.push(Event::Ready(n)),
                (PodState::Ready, Valkey::Replica(link))
                    if up && (link != Link::Up || p.data != master.data) =>
                {
                    actions.push(Event::Sync(n));
                }
                _ => {}
            }
            if (n as i32) >= s.size && matches!(p.life, PodState::Starting | PodState::Ready) {
                actions.push(Event::Remove(n));
            }
            // The preStop hook holds a master with a replica to hand over
            // to; the grace period ends it otherwise.
            let held = p.hook
                && p.valkey == Valkey::Master
                && (s.running.is_some() || !s.switchover_candidates().is_empty());
            if p.life == PodState::Terminating && !held {
                actions.push(Event::Die(n));
            }
        }
        match s.running {
            Some(_) => actions.push(Event::Promote),
            None if up && master.life == PodState::Terminating => {
                actions.extend(s.switchover_candidates().into_iter().map(Event::HandOver));
            }
            None if !up => {
                actions.extend(s.failover_candidates().into_iter().map(Event::Failover));
                let keys = (0..PODS).any(|n| n != s.master && s.pods[n].data != 0);
                if master.life == PodState::Ready && !keys {
                    actions.push(Event::TakeBack);
                }
            }
            None => {}
        }
        if s.faults < self.max_faults {
            if self.faults.reconciler && (s.stored.is_some() || s.retiring != 0) {
                actions.push(Event::CrashReconciler);
            }
            if self.faults.stuck && s.stuck.is_none() {
                for (n, p) in s.pods.iter().enumerate() {
                    if p.life == PodState::Starting {
                        actions.push(Event::Stuck(n));
                    }
                }
            }
            if self.faults.master && up && master.life == PodState::Ready {
                actions.push(Event::CrashMaster);
            }
        }
    }

    fn next_state(&self, last: &Sys, action: Event) -> Option<Sys> {
        let mut s = last.clone();
        match action {
            Event::Observe => {
                let o = self.observe(&s);
                let p = (self.planner)(&o);
                s.retiring = Sys::retiring_for(&o, &p);
                s.stored = Some((p, s.master));
            }
            Event::Act(candidate) => {
                let (p, seen) = s.stored.take().unwrap();
                s.size = p.size;
                match p.step {
                    Step::Delete(n) if s.unchanged(seen) => {
                        let n = n as usize;
                        // `roll::act` marks it retiring before it deletes.
                        s.retiring |= bit(n);
                        // One past the size is the StatefulSet's to remove.
                        if let Some(k) = s.stuck.filter(|k| {
                            *k != n && (*k as i32) < s.size && s.pods[*k].life == PodState::Starting
                        }) {
                            let what = format!("pod {n} deleted while pod {k} never came back");
                            s.violate(Kind::DeletedPastStuck, what);
                        }
                        let only = s.only_copies(n);
                        if only != 0 {
                            let what = format!("pod {n} deleted with the only copy of {only:02b}");
                            s.violate(Kind::OnlyCopyDeleted, what);
                        }
                        if matches!(s.pods[n].life, PodState::Starting | PodState::Ready) {
                            s.terminate(n);
                        }
                    }
                    Step::Switchover if s.unchanged(seen) => {
                        s.running = candidate.map(Running::Switchover);
                    }
                    _ => {}
                }
            }
            Event::Write => {
                let m = s.master;
                s.pods[m].data |= bit(usize::from(s.writes));
                s.writes += 1;
            }
            Event::Sync(n) => {
                s.pods[n].data = s.pods[s.master].data;
                s.pods[n].valkey = Valkey::Replica(Link::Up);
            }
            Event::Create(n) => {
                let p = &mut s.pods[n];
                p.life = PodState::Starting;
                p.new = true;
            }
            Event::Ready(n) => {
                let p = &mut s.pods[n];
                p.life = PodState::Ready;
                p.valkey = Valkey::Replica(Link::Never);
                p.data = 0;
            }
            Event::TakeBack => {
                let m = s.master;
                s.pods[m].valkey = Valkey::Master;
            }
            Event::Remove(n) => s.terminate(n),
            Event::Die(n) => {
                let only = s.only_copies(n);
                if s.pods[n].valkey == Valkey::Master && !s.crashed && only != 0 {
                    let what = format!("master pod {n} gone with the only copy of {only:02b}");
                    s.violate(Kind::OnlyCopyRemoved, what);
                }
                s.stop(n, PodState::Missing);
            }
            Event::HandOver(to) => s.running = Some(Running::Switchover(to)),
            Event::Failover(to) => s.running = Some(Running::Failover(to)),
            Event::Promote => match s.running {
                Some(Running::Switchover(to))
                    if s.master_up() && s.pods[to].valkey == Valkey::Replica(Link::Up) =>
                {
                    s.promote(to, true);
                }
                Some(Running::Failover(to))
                    if matches!(s.pods[to].valkey, Valkey::Replica(Link::Up | Link::Stale)) =>
                {
                    s.promote(to, false);
                }
                _ => s.running = None,
            },
            Event::CrashReconciler => {
                s.faults += 1;
                s.stored = None;
                s.retiring = 0;
            }
            Event::Stuck(n) => {
                s.faults += 1;
                s.stuck = Some(n);
            }
            Event::CrashMaster => {
                s.faults += 1;
                s.crashed = true;
                let m = s.master;
                s.stop(m, PodState::Starting);
            }
        }
        let masters = s.pods.iter().filter(|p| p.valkey == Valkey::Master).count();
        if masters > 1 {
            s.violate(Kind::TwoMasters, format!("{masters} masters"));
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::<Self>::always(
                "no deletion removes the only copy of an acknowledged write",
                |_, s| !s.violated(Kind::OnlyCopyDeleted),
            ),
            Property::<Self>::always(
                "with no crash, no master pod leaves with the only copy of a write",
                |_, s| !s.violated(Kind::OnlyCopyRemoved),
            ),
            Property::<Self>::always("never two masters", |_, s| !s.violated(Kind::TwoMasters)),
            Property::<Self>::always("nothing is deleted while a pod never came back", |_, s| {
                !s.violated(Kind::DeletedPastStuck)
            }),
            Property::<Self>::always(
                "every run ends rolled, or stalled on the pod that never came back",
                |m, s| s.violation.is_some() || !m.is_final(s) || m.rolled(s) || m.stalled(s),
            ),
            Property::<Self>::sometimes("a full roll completes", |m, s| m.rolled(s)),
        ];
        if self.strict_need.is_some() {
            properties.push(Property::<Self>::always(
                "the size never leaves fewer replicas than the strict fence needs",
                |m, s| m.strict_need.is_none_or(|need| (s.size - 1) as u64 >= need),
            ));
        }
        properties
    }
}
