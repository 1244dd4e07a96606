//! Property tests of the core: arbitrary sequences of observations, replies
//! and time keep the invariants every failover relies on.
//!
//! - the config epoch never decreases, and the advertised master changes
//!   only together with a higher config epoch;
//! - the failover epoch never decreases, and every `REPLICAOF NO ONE` is
//!   preceded, in the same batch of outputs, by a `Persist` carrying its
//!   epoch and chosen replica;
//! - within one epoch, only one replica is ever told `REPLICAOF NO ONE`;
//! - no instance is told to replicate from itself;
//! - with extreme operator values (`down-after`, `failover-timeout` up to
//!   `u64::MAX`), clocks near their end and epochs near `u64::MAX`: no
//!   panic or wrap, no `FAILOVER` timeout above the cap, and no failover
//!   outlives its own deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use valkyrie::core::group::{MAX_FAILOVER_WAIT, PAUSE_MAX};
use valkyrie::core::{
    Addr, Command, Core, GroupSpec, GroupState, InfoReport, Input, LinkFailure, ListedReplica,
    Output, Reply, Role, Settings, State,
};

fn a(p: u16) -> Addr {
    Addr::new("h", p)
}

#[derive(Clone, Debug)]
enum Step {
    Advance(u16),
    Ping(u16),
    /// A PING answered with an error (`-MISCONF`, a wrong password).
    Refused(u16),
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
        1 => port.clone().prop_map(Step::Refused),
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
) -> InfoReport {
    InfoReport {
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
        announced: true,
        replid: format!("id{replid}"),
        replicas: if master {
            vec![
                ListedReplica {
                    addr: a(2),
                    offset: 0,
                    online: true,
                    lag: Some(0),
                },
                ListedReplica {
                    addr: a(3),
                    offset: 0,
                    online: true,
                    lag: Some(0),
                },
            ]
        } else {
            vec![]
        },
        keys: Some(u64::from(keys)),
    }
}

/// Runs `steps` against a core built from `spec` (and `restored`, a state
/// file's content), starting at `start` ms, and checks the invariants
/// after every step.
fn check(
    spec: GroupSpec,
    restored: Option<State>,
    start: u64,
    jump: u64,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let (mut core, _) = Core::new(
        Settings::new("0".repeat(40)),
        vec![spec],
        restored.as_ref(),
        start,
    );
    let mut now = start;
    let mut pending: Vec<(u64, Addr, Command)> = Vec::new();
    let g = &core.groups()["g"];
    let mut last = (g.config_epoch, g.master.clone());
    let mut last_epoch = g.epoch;
    let mut promoted_in_epoch: BTreeMap<u64, Addr> = BTreeMap::new();
    for s in steps {
        let input = match s {
            // `jump` scales time: extreme values make days pass in a step.
            Step::Advance(ms) => {
                now = now.saturating_add(u64::from(ms).saturating_mul(jump));
                Input::Tick
            }
            Step::Ping(p) => Input::PingOk {
                group: "g".into(),
                addr: a(p),
            },
            Step::Refused(p) => Input::PingRefused {
                group: "g".into(),
                addr: a(p),
            },
            Step::Down(p, k) => Input::LinkDown {
                group: "g".into(),
                addr: a(p),
                failure: [
                    LinkFailure::Refused,
                    LinkFailure::ConnectTimeout,
                    LinkFailure::Reset,
                    LinkFailure::Silent,
                    LinkFailure::Stalled,
                ][k as usize],
            },
            Step::Info {
                port,
                master,
                points_to,
                link_up,
                offset,
                run,
                replid,
                keys,
            } => Input::Report {
                group: "g".into(),
                addr: a(port),
                info: info(master, points_to, link_up, offset, run, replid, keys),
            },
            Step::Reply { nth, ok } => {
                if pending.is_empty() {
                    continue;
                }
                let (token, to, command) = pending.remove(nth as usize % pending.len());
                let reply = if !ok {
                    Reply::Failed("no".into())
                } else if command == Command::AskInfo {
                    // The promoted replica answering as a master that
                    // kept its data.
                    Reply::Report(info(true, 1, true, 19, 0, 7, 1))
                } else {
                    Reply::Ok
                };
                Input::Reply {
                    group: "g".into(),
                    addr: to,
                    token,
                    reply,
                }
            }
        };
        let out = core.handle(now, input);
        let mut persisted: Option<(u64, Option<Addr>)> = None;
        for o in &out {
            match o {
                Output::Persist { state, .. } => {
                    persisted = Some((
                        state.epoch,
                        state.failover.as_ref().map(|f| f.promoted.clone()),
                    ));
                }
                Output::Send {
                    to, token, command, ..
                } => {
                    if *command == Command::ReplicaOfNoOne {
                        let epoch = core.groups()["g"].epoch;
                        // Persisted first, with this epoch and replica.
                        prop_assert_eq!(persisted.clone(), Some((epoch, Some(to.clone()))));
                        let first = promoted_in_epoch.entry(epoch).or_insert_with(|| to.clone());
                        prop_assert_eq!(&*first, to, "two replicas promoted in epoch {}", epoch);
                    }
                    if let Command::PauseWrites { ms } = command {
                        prop_assert!(*ms <= PAUSE_MAX, "CLIENT PAUSE {} sent", ms);
                    }
                    prop_assert!(
                        !matches!(command, Command::ReplicaOf(t) if t == to),
                        "{} told to replicate from itself",
                        to
                    );
                    pending.push((*token, to.clone(), command.clone()));
                }
                _ => {}
            }
        }
        let g = &core.groups()["g"];
        prop_assert!(g.epoch >= last_epoch, "epoch went back");
        last_epoch = g.epoch;
        let view = (g.config_epoch, g.master.clone());
        prop_assert!(view.0 >= last.0, "config epoch went back");
        if view.1 != last.1 {
            prop_assert!(
                view.0 > last.0,
                "master changed without a higher config epoch"
            );
        }
        prop_assert!(g.config_epoch <= g.epoch);
        // A failover in flight always ends: it is never older than its
        // own deadline plus the step that noticed it.
        if let Some(f) = &g.failover {
            prop_assert!(
                now.saturating_sub(f.started)
                    <= MAX_FAILOVER_WAIT.saturating_add(1500u64.saturating_mul(jump))
            );
        }
        last = view;
    }
    Ok(())
}

fn spec(down_after: u64, failover_timeout: u64) -> GroupSpec {
    GroupSpec {
        name: "g".into(),
        master: a(1),
        quorum: 1,
        down_after,
        failover_timeout,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![a(2), a(3)],
    }
}

/// Operator values at both ends of what Sentinel accepts (and beyond).
fn extreme() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1u64),
        Just(1000),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold(steps in proptest::collection::vec(step(), 1..80)) {
        check(spec(1000, 3000), None, 0, 1, steps)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// No operator value and no clock value can panic, wrap a timer into
    /// the past, take an epoch back, or leave a failover without a
    /// deadline (debug builds check every addition for overflow).
    #[test]
    fn extreme_values_neither_panic_nor_wrap(
        down_after in extreme(),
        failover_timeout in extreme(),
        start in prop_oneof![Just(0u64), Just(u64::MAX - 10_000), any::<u64>()],
        jump in prop_oneof![Just(1u64), Just(1_000_000u64), Just(u64::MAX / 4)],
        epoch in prop_oneof![Just(0u64), Just(i64::MAX as u64 - 1), Just(u64::MAX - 1), Just(u64::MAX)],
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let mut state = State::default();
        state.groups.insert("g".into(), GroupState::new(a(1), epoch));
        check(spec(down_after, failover_timeout), Some(state), start, jump, steps)?;
    }
}
