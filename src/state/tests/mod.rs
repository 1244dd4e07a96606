//! State file tests.
use super::*;

mod myid;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("valkyrie-state-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn roundtrip_and_missing() {
    let dir = tmpdir("rt");
    let file = StateFile::in_dir(&dir);
    assert!(file.load().unwrap().is_none());
    let state = State {
        groups: [(
            "mymaster".to_string(),
            GroupState {
                epoch: 7,
                config_epoch: 7,
                master: Addr::new("::1", 6380),
                demoted: vec![Addr::new("10.0.0.1", 6379)],
                master_lost: Some("abc".into()),
                paused: false,
                failover: Some(PersistedFailover {
                    epoch: 7,
                    old_master: Addr::new("10.0.0.1", 6379),
                    promoted: Addr::new("::1", 6380),
                    confirmed: true,
                    min_offset: 12,
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
    file.save(&state).unwrap();
    assert_eq!(file.load().unwrap(), Some(state.clone()));
    // Overwrite leaves no temporary behind.
    file.save(&State::default()).unwrap();
    assert_eq!(file.load().unwrap(), Some(State::default()));
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(FILE_NAME)]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_file_is_an_error_not_an_empty_state() {
    let dir = tmpdir("bad");
    let file = StateFile::in_dir(&dir);
    fs::write(
        file.path(),
        b"{\"version\":1,\"groups\":{\"m\":{\"epoch\":1,\"master\":\"nocolon\"}}}",
    )
    .unwrap();
    assert!(matches!(file.load(), Err(StateError::Corrupt { .. })));
    fs::write(file.path(), b"garbage").unwrap();
    assert!(matches!(file.load(), Err(StateError::Corrupt { .. })));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runtime_config_roundtrip_and_private_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmpdir("rc");
    let file = StateFile::in_dir(&dir);
    let mut g = GroupConfig::new("other", "::1", 7000, 3);
    g.down_after = Duration::from_millis(5000);
    g.auth_pass = Some(Secret::new("s3cret"));
    g.auth_user = Some("mon".into());
    g.known_replicas = vec![("10.0.0.2".into(), 7001)];
    g.renamed_commands = vec![("CONFIG".into(), "XCONFIG".into())];
    let rc = RuntimeConfig {
        groups: vec![g],
        announce_ip: Some("10.1.2.3".into()),
        announce_port: 26380,
        resolve_hostnames: true,
        announce_hostnames: false,
        sentinel_user: None,
        sentinel_pass: Some(Secret::new("p")),
        loglevel: "verbose".into(),
        acl: Some(vec![crate::config::UserRule {
            name: "alice".into(),
            rules: vec!["reset".into(), "on".into(), "+ping".into()],
        }]),
    };
    file.save_with(&State::default(), Some(&rc)).unwrap();
    let saved = file.load_saved().unwrap().unwrap();
    assert_eq!(saved.config, Some(rc.clone()));
    let mode = fs::metadata(file.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Applied over a configuration, it replaces groups and settings.
    let mut config = Config::default();
    rc.apply(&mut config);
    assert_eq!(config.groups, rc.groups);
    assert_eq!(config.announce_port, 26380);
    assert_eq!(config.loglevel, "verbose");
    // A file written before runtime configuration existed has none.
    file.save(&State::default()).unwrap();
    assert_eq!(file.load_saved().unwrap().unwrap().config, None);
}

/// Scripts set at runtime are saved; under `deny-scripts-reconfig yes`
/// only the configuration file's count when the state is applied.
#[test]
fn scripts_are_saved_and_the_file_rules_under_deny() {
    let dir = tmpdir("scripts");
    let file = StateFile::in_dir(&dir);
    let mut g = GroupConfig::new("m", "10.0.0.1", 6379, 1);
    g.notification_script = Some("set-at-runtime.sh".into());
    g.client_reconfig_script = Some("reconf.sh".into());
    let rc = RuntimeConfig::of(&Config {
        groups: vec![g],
        ..Config::default()
    });
    file.save_with(&State::default(), Some(&rc)).unwrap();
    let saved = file.load_saved().unwrap().unwrap().config.unwrap();
    assert_eq!(saved, rc);
    // Under `no`, the saved paths win, as every saved setting.
    let mut open = Config {
        deny_scripts_reconfig: false,
        groups: vec![GroupConfig::new("m", "10.0.0.1", 6379, 1)],
        ..Config::default()
    };
    saved.apply(&mut open);
    assert_eq!(
        open.groups[0].notification_script.as_deref(),
        Some("set-at-runtime.sh")
    );
    // Under `yes`, the file's (here: one script, not the other).
    let mut file_group = GroupConfig::new("m", "10.0.0.1", 6379, 1);
    file_group.client_reconfig_script = Some("from-the-file.sh".into());
    let mut denied = Config {
        groups: vec![file_group],
        ..Config::default()
    };
    assert!(denied.deny_scripts_reconfig);
    saved.apply(&mut denied);
    assert_eq!(denied.groups[0].notification_script, None);
    assert_eq!(
        denied.groups[0].client_reconfig_script.as_deref(),
        Some("from-the-file.sh")
    );
}

/// A group's own TLS (a CR's Secret) is saved as where it comes from,
/// never as its material: restored, its links wait for the Secret instead
/// of speaking plain text.
#[test]
fn a_groups_tls_is_saved_as_its_source_not_its_key() {
    use crate::config::GroupTls;
    let dir = tmpdir("group-tls");
    let file = StateFile::in_dir(&dir);
    let mut g = GroupConfig::new("shop.cache", "cache-0.cache-headless", 6379, 2);
    g.tls = Some(GroupTls {
        source: "secret:shop/cache-tls".into(),
        ca: b"CA PEM".to_vec(),
        cert: b"CERT PEM".to_vec(),
        key: Secret::new("KEY PEM"),
    });
    let rc = RuntimeConfig::of(&Config {
        groups: vec![g],
        ..Config::default()
    });
    file.save_with(&State::default(), Some(&rc)).unwrap();
    let text = fs::read_to_string(file.path()).unwrap();
    assert!(text.contains("secret:shop/cache-tls"), "{text}");
    for material in ["CA PEM", "CERT PEM", "KEY PEM"] {
        assert!(!text.contains(material), "{material} written: {text}");
    }
    let restored = file.load_saved().unwrap().unwrap().config.unwrap();
    let tls = restored.groups[0].tls.clone().unwrap();
    assert_eq!(tls, GroupTls::pending("secret:shop/cache-tls"));
    assert!(tls.is_pending());
}

/// An epoch above `i64::MAX` is refused, naming the file and the field,
/// instead of being loaded and then wrapped to 0 by the next failover.
#[test]
fn epochs_above_i64_max_are_refused() {
    let dir = tmpdir("epoch");
    let file = StateFile::in_dir(&dir);
    let group = |fields: &str| {
        format!("{{\"version\":1,\"groups\":{{\"m\":{{\"master\":\"10.0.0.1:6379\",{fields}}}}}}}")
    };
    let failover = |e: u64| {
        format!(
            "\"epoch\":1,\"failover\":{{\"epoch\":{e},\"old_master\":\"10.0.0.1:6379\",\
             \"promoted\":\"10.0.0.2:6379\",\"confirmed\":false}}"
        )
    };
    for (text, field, v) in [
        (group("\"epoch\":18446744073709551615"), "epoch", u64::MAX),
        (group("\"epoch\":9223372036854775808"), "epoch", 1 << 63),
        (
            group("\"epoch\":1,\"config_epoch\":9223372036854775808"),
            "config_epoch",
            1 << 63,
        ),
        (group(&failover(u64::MAX)), "failover.epoch", u64::MAX),
    ] {
        fs::write(file.path(), text).unwrap();
        let err = file.load().unwrap_err().to_string();
        assert!(err.contains(&file.path().display().to_string()), "{err}");
        assert!(err.contains(&format!("{field} {v} is above")), "{err}");
    }
    fs::write(file.path(), group("\"epoch\":9223372036854775807")).unwrap();
    assert_eq!(file.load().unwrap().unwrap().groups["m"].epoch, MAX_EPOCH);
    fs::remove_dir_all(&dir).unwrap();
}
