//! How messages, commands and outputs move between the daemons and
//! the data nodes; crashes and restarts.

use valkyrie::core::{Channel, Command, Core, HelloVia, Input, LinkFailure, Output, Reply};

use super::world::*;

impl Sys {
    pub fn send_msg(&mut self, kind: Kind, from: Id, to: Id, msg: Msg) {
        if self.reachable(from, to) {
            self.net.insert((kind, from, to), msg);
        }
    }

    pub fn purge(&mut self, i: Id) {
        self.net.retain(|(_, f, t), _| *f != i && *t != i);
    }

    pub fn hello_payload(&self, i: Id) -> String {
        if i == SEN {
            let s = &self.sen;
            format!(
                "s,{},{},{},{G},n,{},{}",
                port(i),
                runid(i),
                s.current_epoch,
                s.master,
                s.config_epoch
            )
        } else {
            let tail = self.vals[usize::from(i)].core.hello_tail(G).unwrap();
            format!("s,{},{tail}", port(i))
        }
    }

    /// `i` publishes its hello to every peer it can reach that it could
    /// tell something new (a hello with nothing new is a no-op).
    pub fn hellos_from(&mut self, i: Id) {
        if !self.up(i) || self.cut(i) {
            return;
        }
        let payload = self.hello_payload(i);
        let f: Vec<&str> = payload.split(',').collect();
        let (cur, cfg): (u64, u64) = (f[3].parse().unwrap(), f[7].parse().unwrap());
        for j in self.sentinels() {
            if j == i || !self.reachable(i, j) {
                continue;
            }
            let news = cur > self.current_epoch(j) || cfg > self.view(j).0;
            if news {
                self.send_msg(Kind::Hello, i, j, Msg::Hello(payload.clone()));
            }
        }
    }

    /// Delivers a message. A question is answered at once (a round trip
    /// on the peer link), unless the answer is lost.
    pub fn deliver(&mut self, key: (Kind, Id, Id), keep: bool, answer_lost: bool) {
        let msg = if keep {
            self.net[&key].clone()
        } else {
            self.net.remove(&key).unwrap()
        };
        let (_, from, to) = key;
        match msg {
            Msg::Hello(payload) => {
                if to == SEN {
                    self.sen_hello(&payload);
                } else {
                    self.feed(
                        to,
                        Input::Hello {
                            payload,
                            via: HelloVia::Channel,
                        },
                    );
                }
            }
            Msg::Ask {
                master,
                epoch,
                candidate,
            } => {
                let ans = if to == SEN {
                    Some(self.sen_answer(master, epoch, candidate))
                } else {
                    let cand = candidate.map(runid);
                    let now = self.now;
                    let v = &mut self.vals[usize::from(to)];
                    match v
                        .core
                        .is_master_down_by_addr(now, &a(master), epoch, cand.as_deref())
                    {
                        Ok((ans, out)) => {
                            // Persisted before the answer leaves.
                            self.apply(to, out);
                            let ans = Ans::of(&ans);
                            self.check_answer(to, &ans);
                            Some(ans)
                        }
                        Err(_) => None,
                    }
                };
                if let Some(ans) = ans
                    && !answer_lost
                    && self.reachable(to, from)
                {
                    self.answer(to, from, &ans);
                }
            }
        }
    }

    /// `from`'s answer reaches the sentinel that asked.
    pub fn answer(&mut self, from: Id, to: Id, ans: &Ans) {
        if to == SEN {
            self.sen_reply(from, ans);
        } else {
            self.feed(
                to,
                Input::DownReply {
                    group: G.into(),
                    runid: runid(from),
                    answer: ans.to_core(),
                },
            );
        }
    }

    // ----- Valkyries -----

    pub fn feed(&mut self, d: Id, input: Input) {
        let now = self.now;
        let out = self.vals[usize::from(d)].core.handle(now, input);
        self.apply(d, out);
    }

    pub fn apply(&mut self, d: Id, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send {
                    to, token, command, ..
                } => match command {
                    Command::KillNormalClients | Command::KillPubsubClients => {}
                    command => {
                        if command == Command::ReplicaOfNoOne {
                            let g = &self.vals[usize::from(d)].core.groups()[G];
                            let epoch = g.failover.as_ref().map_or(g.epoch, |f| f.epoch);
                            self.promoted(d, epoch, to.port);
                        }
                        let q = &mut self.cmds[usize::from(d)];
                        // An identical command still queued: this one is
                        // lost (keeps the queue small).
                        if q.len() < 3 && !q.iter().any(|(_, p, c)| *p == to.port && *c == command)
                        {
                            q.push((token, to.port, command));
                        }
                    }
                },
                Output::Persist { group, state } => {
                    let persist_epoch = self.persist_epoch;
                    let v = &mut self.vals[usize::from(d)];
                    v.persisted.groups.insert(group, state);
                    if persist_epoch {
                        v.persisted.current_epoch = v.core.current_epoch();
                    }
                }
                Output::AskPeer {
                    runid,
                    master,
                    epoch,
                    candidate,
                    ..
                } => {
                    let to = index_of(&runid);
                    let msg = Msg::Ask {
                        master: master.port,
                        epoch,
                        candidate: candidate.as_deref().map(index_of),
                    };
                    self.send_msg(Kind::Ask, d, to, msg);
                }
                Output::HelloNow { .. } => self.hellos_from(d),
                Output::Event(e) if e.channel == Channel::VoteForLeader => {
                    let mut w = e.payload.split(' ');
                    let candidate = index_of(w.next().unwrap());
                    let epoch = w.next().unwrap().parse().unwrap();
                    self.voted(d, candidate, epoch);
                }
                _ => {}
            }
        }
    }

    pub fn observe(&mut self, d: Id, p: u16) {
        let addr = a(p);
        if self.cut(d) {
            self.feed(
                d,
                Input::LinkDown {
                    group: G.into(),
                    addr,
                    failure: LinkFailure::ConnectTimeout,
                },
            );
        } else if !self.nodes[&p].alive {
            self.feed(
                d,
                Input::LinkDown {
                    group: G.into(),
                    addr,
                    failure: LinkFailure::Refused,
                },
            );
        } else {
            self.feed(
                d,
                Input::PingOk {
                    group: G.into(),
                    addr: addr.clone(),
                },
            );
            let info = info(&self.nodes, p);
            self.feed(
                d,
                Input::Report {
                    group: G.into(),
                    addr,
                    info,
                },
            );
        }
    }

    pub fn tick_val(&mut self, d: Id) {
        for p in self.sentinels() {
            if p == d {
                continue;
            }
            let input = if self.reachable(d, p) {
                Input::PeerPing {
                    runid: runid(p),
                    valid: true,
                }
            } else {
                Input::PeerLinkDown { runid: runid(p) }
            };
            self.feed(d, input);
        }
        for p in NODES {
            self.observe(d, p);
        }
        self.feed(d, Input::Tick);
    }

    pub fn run_command(&mut self, d: Id) {
        let (token, p, command) = self.cmds[usize::from(d)].remove(0);
        let reachable = !self.cut(d) && self.nodes[&p].alive;
        let reply = if !reachable {
            Reply::Failed("unreachable".into())
        } else {
            match &command {
                Command::ReplicaOfNoOne => {
                    self.promote_node(p);
                    Reply::Ok
                }
                Command::ReplicaOf(t) => {
                    self.follow(p, t.port);
                    Reply::Ok
                }
                Command::AskInfo => Reply::Report(info(&self.nodes, p)),
                _ => Reply::Ok,
            }
        };
        self.feed(
            d,
            Input::Reply {
                group: G.into(),
                addr: a(p),
                token,
                reply,
            },
        );
    }

    pub fn crash(&mut self, d: Id) {
        let v = &mut self.vals[usize::from(d)];
        v.up = false;
        // What the dead process held is gone: keep a canonical core (the
        // one its state file gives) so that crashes at different moments
        // with the same state file are the same state.
        v.core = Core::new(settings(d), vec![spec()], Some(&v.persisted), 0).0;
        self.cmds[usize::from(d)].clear();
        self.purge(d);
    }

    pub fn restart(&mut self, d: Id) {
        let now = self.now;
        let v = &mut self.vals[usize::from(d)];
        let (mut core, out) = Core::new(settings(d), vec![spec()], Some(&v.persisted), now);
        core.set_jitter(v.jitter);
        v.core = core;
        v.up = true;
        self.apply(d, out);
    }

    // ----- data nodes -----

    pub fn promote_node(&mut self, p: u16) {
        let n = self.nodes.get_mut(&p).unwrap();
        if n.master_of != 0 {
            n.master_of = 0;
            n.replid = n.replid.wrapping_add(10 + p as u8);
        }
    }

    pub fn follow(&mut self, p: u16, target: u16) {
        let t = self.nodes[&target].clone();
        let n = self.nodes.get_mut(&p).unwrap();
        n.master_of = target;
        if t.alive && t.master_of == 0 {
            n.replid = t.replid;
        }
    }

    // ----- the Sentinel model -----
}
