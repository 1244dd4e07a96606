//! The model of `tests/models/lease/mod.rs` over its world: the actions
//! each state allows, their effects, and the properties checked.

use stateright::{Model, Property};

use super::world::*;

impl Env {
    fn fair(&self, s: &Sys) -> bool {
        self.fair_from.is_some_and(|f| s.now >= f)
    }

    fn faults_left(&self, s: &Sys) -> bool {
        s.faults < self.max_faults && !self.fair(s)
    }
}

impl Model for Env {
    type State = Sys;
    type Action = Act;

    fn init_states(&self) -> Vec<Sys> {
        let mut s = Sys {
            now: 0,
            lease: None,
            version: 0,
            electors: vec![
                Elector {
                    incarnation: 0,
                    run: Run::Down,
                    cut: false,
                    local: None,
                    seq: 0,
                    phase: Phase::Idle,
                };
                self.electors
            ],
            net: Vec::new(),
            faults: 0,
            top: None,
            violation: None,
        };
        for i in 0..self.electors {
            s.restart(i, self.timings);
        }
        s.settle();
        vec![s]
    }

    fn actions(&self, s: &Sys, actions: &mut Vec<Act>) {
        if s.violation.is_some() {
            return;
        }
        let blocking = |m: &Msg| s.due(m);
        let quiet = s.quiet();
        if s.now < self.horizon && quiet {
            actions.push(Act::Tick);
        }
        let faults = self.faults_left(s);
        let network = faults && self.faults.network;
        let process = faults && self.faults.process;
        let deadline = secs(self.timings.renew_deadline);
        for (k, m) in s.net.iter().enumerate() {
            if !blocking(m) {
                continue;
            }
            if !m.to_store {
                actions.push(Act::Take(k));
                continue;
            }
            actions.push(Act::Serve(k));
            if network {
                // An answer later than the attempt's deadline is a lost one.
                for d in 1..deadline {
                    actions.push(Act::ServeAnswerLate(k, d));
                }
                actions.push(Act::ServeAnswerLost(k));
                actions.push(Act::Lose(k));
                // A request may land after its attempt gave up.
                for d in 1..=deadline + 1 {
                    actions.push(Act::Delay(k, d));
                }
                actions.push(Act::Refuse(k));
            }
        }
        if self.fair(s) {
            return;
        }
        for (i, e) in s.electors.iter().enumerate() {
            match e.run {
                Run::Up => {
                    if process {
                        actions.push(Act::Stall(i));
                        actions.push(Act::Crash(i));
                        actions.push(Act::Release(i));
                    }
                    if network && !e.cut {
                        actions.push(Act::Cut(i));
                    }
                }
                // Ends of faults come at quiet moments (the next second
                // starts with them).
                Run::Stalled if quiet => actions.push(Act::Resume(i)),
                Run::Down if quiet => actions.push(Act::Restart(i)),
                Run::Stalled | Run::Down => {}
            }
            if e.cut && quiet {
                actions.push(Act::Heal(i));
            }
        }
    }

    fn next_state(&self, last: &Sys, action: Act) -> Option<Sys> {
        let mut s = last.clone();
        match action {
            Act::Tick => {
                s.now += 1;
                if self.fair(&s) {
                    // From now on every elector runs and reaches the API
                    // server.
                    for i in 0..s.electors.len() {
                        s.electors[i].cut = false;
                        match s.electors[i].run {
                            Run::Down => s.restart(i, self.timings),
                            Run::Stalled => s.electors[i].run = Run::Up,
                            Run::Up => {}
                        }
                    }
                }
                for i in 0..s.electors.len() {
                    s.poll(i);
                }
            }
            Act::Serve(k) => s.serve_and_answer(k, self.store, None),
            Act::ServeAnswerLate(k, d) => {
                s.faults += 1;
                s.serve_and_answer(k, self.store, Some(d));
            }
            Act::ServeAnswerLost(k) => {
                s.faults += 1;
                let m = s.net.remove(k);
                s.serve(&m, self.store);
            }
            Act::Take(k) => {
                let m = s.net.remove(k);
                s.take(m.elector, m.body);
            }
            Act::Lose(k) => {
                s.faults += 1;
                s.net.remove(k);
            }
            Act::Delay(k, d) => {
                s.faults += 1;
                s.net[k].at = s.now + d;
            }
            Act::Refuse(k) => {
                s.faults += 1;
                let m = s.net.remove(k);
                s.answer(m, Body::Failed, None);
            }
            Act::Stall(i) => {
                s.faults += 1;
                s.electors[i].run = Run::Stalled;
            }
            Act::Resume(i) => {
                // Its timers fire first; an answer waiting for it may still
                // be taken before its next step.
                s.electors[i].run = Run::Up;
                let now = at(s.now);
                s.local(i).expire(now);
            }
            Act::Crash(i) => {
                s.faults += 1;
                let e = &mut s.electors[i];
                e.run = Run::Down;
                e.local = None;
                e.phase = Phase::Idle;
            }
            Act::Release(i) => {
                s.faults += 1;
                if let Some(mut held) = s.local(i).release() {
                    let on = held.resource_version.clone();
                    held.holder = None;
                    held.lease_duration_seconds = Some(1);
                    held.renew_time = Some(wall(s.now));
                    s.electors[i].seq = s.fresh_seq(i);
                    s.send(i, Body::Put { on, record: held });
                }
                let e = &mut s.electors[i];
                e.run = Run::Down;
                e.local = None;
                e.phase = Phase::Idle;
            }
            Act::Restart(i) => s.restart(i, self.timings),
            Act::Cut(i) => {
                s.faults += 1;
                s.electors[i].cut = true;
            }
            Act::Heal(i) => s.electors[i].cut = false,
        }
        s.settle();
        s.check(self.published_check);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::<Self>::always("at most one elector leads at any instant", |_, s| {
                !s.violated(Kind::TwoLeaders)
            }),
            Property::<Self>::always(
                "a running elector never publishes a leadership past its deadline",
                |_, s| !s.violated(Kind::Stale),
            ),
            Property::<Self>::always(
                "terms never decrease and each term has one leader",
                |_, s| !s.violated(Kind::Term),
            ),
        ];
        if self.published_check {
            properties.push(Property::<Self>::always(
                "at most one live elector publishes Leading",
                |_, s| !s.violated(Kind::Published),
            ));
        }
        if self.fair_from.is_some() {
            properties.push(Property::<Self>::eventually(
                "some elector leads once faults stop",
                |m, s| m.fair(s) && s.someone_leads(),
            ));
            properties.push(Property::<Self>::always(
                "an elector leads at the horizon",
                |m, s| s.now < m.horizon || !s.quiet() || s.someone_leads(),
            ));
        } else if self.max_faults > 0 {
            properties.push(Property::<Self>::sometimes("a takeover", |_, s| {
                s.top.as_ref().is_some_and(|(term, _)| *term > 0)
            }));
            properties.push(Property::<Self>::sometimes(
                "a leader demotes itself while still the holder",
                |_, s| s.demoted_holder(),
            ));
        }
        properties
    }
}
