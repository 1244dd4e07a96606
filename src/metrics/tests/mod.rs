//! Tests of `metrics`.

use super::*;

#[test]
fn an_extension_gets_its_buckets() {
    const EXT: Extension = Extension {
        buckets: &[("valkyrie_test_seconds", &[0.5, 2.0])],
        describe: || {},
    };
    let recorder = recorder_with(&[EXT]).unwrap();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        histogram!("valkyrie_test_seconds").record(1.0);
    });
    let text = handle.render();
    assert!(
        text.contains("valkyrie_test_seconds_bucket{le=\"2\"} 1"),
        "{text}"
    );
}

use crate::core::{
    Command, GroupSpec, GroupState, InfoReport, Input, Output, PersistedFailover, Reply, Settings,
    State,
};

fn info(run_id: &str, role: Role) -> InfoReport {
    InfoReport {
        run_id: run_id.into(),
        role,
        offset: 90,
        priority: 100,
        announced: true,
        replid: "r".into(),
        replicas: vec![],
        keys: Some(1),
    }
}

/// A core restarted in the middle of a failover of epoch 3 towards
/// `r`, and the reply to its question whether `r` was promoted.
fn resumed_failover(promoted: bool) -> (Vec<(String, u64, FailoverResult)>, String) {
    // The failovers that ended, as the core says, recorded as the shell does.
    fn ended(outputs: Vec<Output>) -> Vec<(String, u64, FailoverResult)> {
        let mut ended = Vec::new();
        for o in outputs {
            if let Output::FailoverEnded {
                group,
                epoch,
                result,
                duration,
            } = o
            {
                failover_ended(&group, result, Duration::from_millis(duration));
                ended.push((group, epoch, result));
            }
        }
        ended
    }
    let m = Addr::new("127.0.0.1", 7000);
    let r = Addr::new("127.0.0.1", 7001);
    let state = State {
        groups: [(
            "g".to_string(),
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
        current_epoch: 0,
    };
    let spec = GroupSpec {
        name: "g".into(),
        master: m.clone(),
        quorum: 1,
        down_after: 1000,
        failover_timeout: 10_000,
        parallel_syncs: 1,
        reboot_down_after: 0,
        fence: Default::default(),
        route_wait: 0,
        known_replicas: vec![],
    };
    let settings = Settings::new("0".repeat(40));
    let recorder = recorder().unwrap();
    let handle = recorder.handle();
    let seen = metrics::with_local_recorder(&recorder, || {
        let (mut core, first) = Core::new(settings, vec![spec], Some(&state), 0);
        assert!(ended(first.clone()).is_empty());
        let token = first
            .iter()
            .find_map(|o| match o {
                Output::Send {
                    token,
                    command: Command::AskInfo,
                    ..
                } => Some(*token),
                _ => None,
            })
            .unwrap();
        let role = if promoted {
            Role::Master
        } else {
            Role::Replica {
                master: m.clone(),
                link_up: false,
                link_down_secs: Some(1),
                last_io_secs: None,
                sync_in_progress: false,
            }
        };
        // Resumed at 0; the answer comes 1.5 s later.
        let mut all = ended(core.handle(
            1_500,
            Input::Reply {
                group: "g".into(),
                addr: r.clone(),
                token,
                reply: Reply::Report(info("r", role)),
            },
        ));
        // Reconfiguration of no other replica ends at the next step.
        all.extend(ended(core.handle(1_600, Input::Tick)));
        // Nothing more to see afterwards.
        assert!(ended(core.handle(1_700, Input::Tick)).is_empty());
        all
    });
    (seen, handle.render())
}

#[test]
fn an_abandoned_failover_counts_as_aborted() {
    let (ended, text) = resumed_failover(false);
    assert_eq!(ended, vec![("g".to_string(), 3, FailoverResult::Aborted)]);
    assert!(
        text.contains("valkyrie_failovers_total{group=\"g\",result=\"aborted\"} 1"),
        "{text}"
    );
    assert!(!text.contains("result=\"succeeded\""), "{text}");
    assert!(text.contains(
        "valkyrie_failover_duration_seconds_bucket{group=\"g\",result=\"aborted\",le=\"2.5\"} 1"
    ));
    assert!(text.contains(
        "valkyrie_failover_duration_seconds_bucket{group=\"g\",result=\"aborted\",le=\"1\"} 0"
    ));
}

#[test]
fn a_confirmed_failover_counts_as_succeeded_once() {
    let (ended, text) = resumed_failover(true);
    assert_eq!(ended, vec![("g".to_string(), 3, FailoverResult::Succeeded)]);
    assert!(
        text.contains("valkyrie_failovers_total{group=\"g\",result=\"succeeded\"} 1"),
        "{text}"
    );
    assert!(!text.contains("result=\"aborted\""), "{text}");
}

#[test]
fn recorder_renders_histograms_with_buckets_and_descriptions() {
    let recorder = recorder().unwrap();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        describe();
        histogram!(PING_RTT, "group" => "g", "instance" => "127.0.0.1:1").record(0.0003);
        parse_error(Listener::Sentinel, &DecodeError::InvalidType(b'!'));
        counter!(SENTINEL_COMMANDS, "command" => "unknown").increment(1);
    });
    let text = handle.render();
    assert!(
        text.contains("# TYPE valkyrie_ping_rtt_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains(
            "valkyrie_ping_rtt_seconds_bucket{group=\"g\",instance=\"127.0.0.1:1\",le=\"0.0005\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("valkyrie_ping_rtt_seconds_bucket{group=\"g\",instance=\"127.0.0.1:1\",le=\"0.00025\"} 0"),
        "{text}"
    );
    assert!(text.contains("# HELP valkyrie_parse_errors_total Malformed requests"));
    assert!(
        text.contains("valkyrie_parse_errors_total{listener=\"sentinel\",kind=\"type\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("valkyrie_sentinel_commands_total{command=\"unknown\"} 1"),
        "{text}"
    );
}

/// Group texts are merged into the main text's families: one header per
/// family, samples together.
#[test]
fn group_texts_merge_into_families() {
    let main = "# HELP a A.\n# TYPE a gauge\na 1\n\n# TYPE b counter\nb 2\n".to_string();
    let g1 = "# HELP a A.\n# TYPE a gauge\na{group=\"x\"} 3\n\n# TYPE c gauge\nc{group=\"x\"} 4\n"
        .to_string();
    let g2 = "# HELP a A.\n# TYPE a gauge\na{group=\"y\"} 5\n".to_string();
    assert_eq!(
        groups::merge(&[main, g1, g2]),
        "# HELP a A.\n# TYPE a gauge\na 1\na{group=\"x\"} 3\na{group=\"y\"} 5\n\n\
         # TYPE b counter\nb 2\n\n# TYPE c gauge\nc{group=\"x\"} 4\n\n"
    );
}
