//! The view the ports read, right after a promotion is confirmed: the new
//! master is advertised at once, with the failover still flagged while the
//! other replicas are reconfigured (the core's side is in `valkyrie-core`'s
//! own tests; this is where it meets the Sentinel port's rendering).

use valkyrie_protocol::Frame;

use crate::core::{
    Addr, Command, Core, GroupSpec, GroupState, InfoReport, Input, Output, PersistedFailover,
    Reply, Role, Settings, State,
};

/// A core restarted in the middle of a failover towards `r`, told that
/// `r` now reports the master role: promotion confirmed, reconfiguration
/// of the others under way.
fn just_promoted(m: &Addr, r: &Addr) -> Core {
    let state = State {
        groups: [(
            "mymaster".to_string(),
            GroupState {
                epoch: 3,
                config_epoch: 2,
                master: m.clone(),
                demoted: vec![],
                master_lost: None,
                paused: false,
                failover: Some(PersistedFailover {
                    epoch: 3,
                    old_master: m.clone(),
                    promoted: r.clone(),
                    confirmed: false,
                    min_offset: 90,
                }),
                leader: None,
                leader_epoch: 0,
                known_peers: Vec::new(),
                peered: false,
                replicas: Vec::new(),
            },
        )]
        .into(),
        current_epoch: 3,
    };
    let spec = GroupSpec {
        name: "mymaster".into(),
        master: m.clone(),
        quorum: 1,
        down_after: 1000,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        // A third node, still to be pointed at the new master.
        known_replicas: vec![Addr::new("127.0.0.1", 7002)],
    };
    let (mut core, first) = Core::new(Settings::new("0".repeat(40)), vec![spec], Some(&state), 0);
    let token = first
        .iter()
        .find_map(|o| match o {
            Output::Send {
                token,
                command: Command::AskInfo,
                to,
                ..
            } if to == r => Some(*token),
            _ => None,
        })
        .expect("the promoted replica is asked for INFO");
    core.handle(
        10,
        Input::Reply {
            group: "mymaster".into(),
            addr: r.clone(),
            token,
            reply: Reply::Report(InfoReport {
                run_id: "r".into(),
                role: Role::Master,
                offset: 90,
                priority: 100,
                announced: true,
                replid: "x".into(),
                replicas: vec![],
                keys: Some(1),
            }),
        },
    );
    core
}

#[test]
fn the_sentinel_port_switches_at_promotion_and_flags_the_failover() {
    let (m, r) = (Addr::new("127.0.0.1", 7000), Addr::new("127.0.0.1", 7001));
    let core = just_promoted(&m, &r);
    let t = crate::topology::Advertiser::new(&core, 0).topology();
    let g = &t.groups["mymaster"];
    assert_eq!(g.master, r);
    assert!(g.failover_in_progress);
    assert_eq!(g.failover_state, Some("reconf_slaves"));
    let Frame::Map(fields) = crate::sentinel::cmd::sentinel::master_map("mymaster", g, 10) else {
        panic!("a map")
    };
    let field = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| *key == Frame::bulk(k.to_string()))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("port"), Some(Frame::bulk("7001")));
    assert_eq!(
        field("flags"),
        Some(Frame::bulk("master,failover_in_progress"))
    );
    assert_eq!(field("failover-state"), Some(Frame::bulk("reconf_slaves")));
}
