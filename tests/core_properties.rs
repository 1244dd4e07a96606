//! Property tests of the core: arbitrary sequences of observations, replies
//! and time keep the invariants every failover relies on.
//!
//! - the config epoch never decreases, and the advertised master changes
//!   only together with a higher config epoch;
//! - the failover epoch never decreases, and every `REPLICAOF NO ONE` is
//!   preceded, in the same batch of outputs, by a `Persist` carrying its
//!   epoch and chosen replica;
//! - within one epoch, only one replica is ever told `REPLICAOF NO ONE`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use valkyrie::core::{
    Addr, Command, Core, GroupSpec, Info, Input, LinkFailure, ListedReplica, Output, Reply, Role,
    Settings,
};

fn a(p: u16) -> Addr {
    Addr::new("h", p)
}

#[derive(Clone, Debug)]
enum Step {
    Advance(u16),
    Ping(u16),
    Down(u16, u8),
    Info {
        port: u16,
        master: bool,
        points_to: u16,
        link_up: bool,
        offset: u8,
        run: u8,
        replid: u8,
        keys: u8,
    },
    Reply {
        nth: u8,
        ok: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let port = 1u16..=3;
    prop_oneof![
        2 => (1u16..1500).prop_map(Step::Advance),
        2 => port.clone().prop_map(Step::Ping),
        1 => (port.clone(), 0u8..5).prop_map(|(p, k)| Step::Down(p, k)),
        3 => (port.clone(), any::<bool>(), 1u16..=3, any::<bool>(), 0u8..20, 0u8..3, 0u8..3, 0u8..3).prop_map(
            |(port, master, points_to, link_up, offset, run, replid, keys)| Step::Info {
                port, master, points_to, link_up, offset, run, replid, keys
            }
        ),
        4 => (0u8..8, any::<bool>()).prop_map(|(nth, ok)| Step::Reply { nth, ok }),
    ]
}

fn info(
    master: bool,
    points_to: u16,
    link_up: bool,
    offset: u8,
    run: u8,
    replid: u8,
    keys: u8,
) -> Info {
    Info {
        run_id: format!("run{run}"),
        role: if master {
            Role::Master
        } else {
            Role::Replica {
                master: a(points_to),
                link_up,
                link_down_secs: if link_up { None } else { Some(1) },
                last_io_secs: if link_up { Some(0) } else { None },
                sync_in_progress: false,
            }
        },
        offset: u64::from(offset),
        priority: 100,
        replid: format!("id{replid}"),
        replicas: if master {
            vec![
                ListedReplica {
                    addr: a(2),
                    offset: 0,
                    online: true,
                },
                ListedReplica {
                    addr: a(3),
                    offset: 0,
                    online: true,
                },
            ]
        } else {
            vec![]
        },
        keys: Some(u64::from(keys)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold(steps in proptest::collection::vec(step(), 1..80)) {
        let spec = GroupSpec {
            name: "g".into(),
            master: a(1),
            quorum: 1,
            down_after: 1000,
            failover_timeout: 3000,
            parallel_syncs: 1,
            known_replicas: vec![a(2), a(3)],
        };
        let (mut core, _) = Core::new(Settings { myid: "0".repeat(40) }, vec![spec], None, 0);
        let mut now = 0u64;
        let mut pending: Vec<(u64, Addr, Command)> = Vec::new();
        let mut last = (0u64, a(1));
        let mut last_epoch = 0u64;
        let mut promoted_in_epoch: BTreeMap<u64, Addr> = BTreeMap::new();
        for s in steps {
            let input = match s {
                Step::Advance(ms) => { now += u64::from(ms); Input::Tick }
                Step::Ping(p) => Input::PingOk { group: "g".into(), addr: a(p) },
                Step::Down(p, k) => Input::LinkDown {
                    group: "g".into(),
                    addr: a(p),
                    failure: [LinkFailure::Refused, LinkFailure::ConnectTimeout, LinkFailure::Reset, LinkFailure::Silent, LinkFailure::Stalled][k as usize],
                },
                Step::Info { port, master, points_to, link_up, offset, run, replid, keys } => Input::Info {
                    group: "g".into(),
                    addr: a(port),
                    info: info(master, points_to, link_up, offset, run, replid, keys),
                },
                Step::Reply { nth, ok } => {
                    if pending.is_empty() { continue; }
                    let (token, to, command) = pending.remove(nth as usize % pending.len());
                    let reply = if !ok {
                        Reply::Failed("no".into())
                    } else if command == Command::Info {
                        // The promoted replica answering as a master that
                        // kept its data.
                        Reply::Info(info(true, 1, true, 19, 0, 7, 1))
                    } else {
                        Reply::Ok
                    };
                    Input::Reply { group: "g".into(), addr: to, token, reply }
                }
            };
            let out = core.handle(now, input);
            let mut persisted: Option<(u64, Option<Addr>)> = None;
            for o in &out {
                match o {
                    Output::Persist { state, .. } => {
                        persisted = Some((state.epoch, state.failover.as_ref().map(|f| f.promoted.clone())));
                    }
                    Output::Send { to, token, command, .. } => {
                        if *command == Command::ReplicaOfNoOne {
                            let epoch = core.groups()["g"].epoch;
                            // Persisted first, with this epoch and replica.
                            prop_assert_eq!(persisted.clone(), Some((epoch, Some(to.clone()))));
                            let first = promoted_in_epoch.entry(epoch).or_insert_with(|| to.clone());
                            prop_assert_eq!(&*first, to, "two replicas promoted in epoch {}", epoch);
                        }
                        pending.push((*token, to.clone(), command.clone()));
                    }
                    _ => {}
                }
            }
            let g = &core.groups()["g"];
            prop_assert!(g.epoch >= last_epoch);
            last_epoch = g.epoch;
            let view = (g.config_epoch, g.master.clone());
            prop_assert!(view.0 >= last.0, "config epoch went back");
            if view.1 != last.1 {
                prop_assert!(view.0 > last.0, "master changed without a higher config epoch");
            }
            prop_assert!(g.config_epoch <= g.epoch);
            last = view;
        }
    }
}
