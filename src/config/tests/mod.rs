//! Configuration parser tests.
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

mod order;
mod tls;
mod valkey_suite;

fn ok(text: &str) -> (Config, Vec<Note>) {
    parse("sentinel.conf", text.as_bytes()).unwrap()
}

fn bad(text: &str) -> String {
    parse("sentinel.conf", text.as_bytes())
        .unwrap_err()
        .to_string()
}

#[test]
fn a_real_sentinel_conf() {
    // What valkey-sentinel itself writes after running for a while.
    let (c, notes) = ok(r#"
port 26379
daemonize no
pidfile "/var/run/valkey-sentinel.pid"
loglevel notice
logfile ""
dir "/tmp"
sentinel monitor mymaster 127.0.0.1 6379 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
sentinel parallel-syncs mymaster 2
sentinel auth-pass mymaster "s3cr et"
sentinel auth-user mymaster app
acllog-max-len 128
sentinel deny-scripts-reconfig yes
sentinel resolve-hostnames no
sentinel announce-hostnames no
protected-mode no
sentinel myid 6165e0003d05f9e39a4ca4a6bee8ba1de4c6a1e7
sentinel config-epoch mymaster 1
sentinel leader-epoch mymaster 1
sentinel current-epoch 1
sentinel known-replica mymaster 127.0.0.1 6380
sentinel known-slave mymaster 127.0.0.1 6381
sentinel known-sentinel mymaster 127.0.0.1 26380 a2c3f7b8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4
"#);
    assert_eq!(c.port, 26379);
    assert_eq!(c.dir, PathBuf::from("/tmp"));
    let g = c.group("mymaster").unwrap();
    assert_eq!((g.host.as_str(), g.port, g.quorum), ("127.0.0.1", 6379, 2));
    assert_eq!(g.down_after, Duration::from_millis(1000));
    assert_eq!(g.failover_timeout, Duration::from_millis(10_000));
    assert_eq!(g.parallel_syncs, 2);
    assert_eq!(g.auth_pass.as_ref().map(Secret::expose), Some("s3cr et"));
    assert_eq!(g.auth_user.as_deref(), Some("app"));
    assert_eq!(
        g.known_replicas,
        vec![("127.0.0.1".into(), 6380), ("127.0.0.1".into(), 6381)]
    );
    // The known-sentinel line names the peers the quorum counts: no
    // quorum note (a file without one gets it, `check_config.rs`).
    assert!(
        !notes.iter().any(|n| n.message.contains("quorum 2")),
        "{notes:?}"
    );
    // A sentinel's own epochs and peers are honoured (they seed the state
    // when there is no state file yet).
    assert_eq!(
        g.known_sentinels,
        vec![(
            "a2c3f7b8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4".into(),
            "127.0.0.1".into(),
            26380
        )]
    );
    assert_eq!((g.config_epoch, g.leader_epoch, c.current_epoch), (1, 1, 1));
    assert!(!notes.iter().any(|n| n.message.contains("known-sentinel")));
    // daemonize, pidfile, acllog-max-len (logfile and
    // deny-scripts-reconfig are honoured).
    assert!(notes.len() >= 3, "{notes:?}");
    assert_eq!(c.logfile, None);
    assert!(c.deny_scripts_reconfig);
}

#[test]
fn scripts_must_exist_and_be_runnable_against_dir() {
    let dir = std::env::temp_dir().join(format!("valkyrie-scripts-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("notify.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    std::fs::write(dir.join("test.txt"), "not a program\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let conf = |lines: &str| {
        format!(
            "dir {}\nsentinel deny-scripts-reconfig no\nsentinel monitor m 10.0.0.1 6379 1\n{lines}",
            dir.display()
        )
    };
    // Relative to `dir`, as Sentinel resolves them.
    let text = conf(
        "sentinel notification-script m notify.sh\nsentinel client-reconfig-script m notify.sh\n",
    );
    let (c, _) = parse("s.conf", text.as_bytes()).unwrap();
    let g = c.group("m").unwrap();
    assert_eq!(g.notification_script.as_deref(), Some("notify.sh"));
    assert_eq!(g.client_reconfig_script.as_deref(), Some("notify.sh"));
    assert!(!c.deny_scripts_reconfig);
    for (line, why) in [
        (
            "sentinel notification-script m test.txt",
            "Notification script seems non existing or non executable.",
        ),
        (
            "sentinel client-reconfig-script m missing.sh",
            "Client reconfiguration script seems non existing or non executable.",
        ),
        (
            "sentinel notification-script nosuch notify.sh",
            "No such master with specified name.",
        ),
    ] {
        let err = parse("s.conf", conf(line).as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains(why), "{line}: {err}");
    }
    let err = parse("s.conf", b"sentinel deny-scripts-reconfig maybe\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Please specify yes or no for the deny-scripts-reconfig options."),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_peer_lines_are_refused() {
    for line in [
        "sentinel known-sentinel m 127.0.0.1 26380 nothex",
        "sentinel known-sentinel m 127.0.0.1 0 a2c3f7b8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4",
        "sentinel config-epoch m -1",
        "sentinel leader-epoch m 18446744073709551615",
        "sentinel current-epoch 1e3",
    ] {
        let text = format!("sentinel monitor m 10.0.0.1 6379 1\n{line}\n");
        assert!(parse("sentinel.conf", text.as_bytes()).is_err(), "{line}");
    }
}

#[test]
fn defaults_match_sentinel() {
    let (c, _) = ok("sentinel monitor m 10.0.0.1 6379 1\n");
    let g = &c.groups[0];
    assert_eq!(g.down_after, Duration::from_secs(30));
    assert_eq!(g.failover_timeout, Duration::from_secs(180));
    assert_eq!(g.parallel_syncs, 1);
    assert_eq!(c.port, 26379);
    assert_eq!(c.index_port, 12120);
    assert_eq!(c.admin_port, 9126);
}

#[test]
fn errors_name_file_and_line() {
    assert_eq!(
        bad("port 1\nfrobnicate yes\n"),
        "sentinel.conf:2: unknown directive 'frobnicate'"
    );
    assert_eq!(
        bad("sentinel down-after-milliseconds nosuch 100\n"),
        "sentinel.conf:1: No such master with specified name."
    );
    assert_eq!(
        bad("sentinel monitor m 10.0.0.1 1 0\n"),
        "sentinel.conf:1: Quorum must be 1 or greater."
    );
    assert_eq!(
        bad("sentinel monitor m 10.0.0.1 1 1\nsentinel monitor m 10.0.0.1 2 1\n"),
        "sentinel.conf:2: Duplicate master name."
    );
    assert_eq!(
        bad("port 70000\n"),
        "sentinel.conf:1: '70000': argument must be between 0 and 65535 inclusive"
    );
    assert_eq!(
        bad("sentinel monitor m 10.0.0.1 1\n"),
        "sentinel.conf:1: wrong number of arguments for 'sentinel monitor'"
    );
    assert!(bad("dir \"/tmp\n").contains("unbalanced quotes"));
    assert!(bad("tls-port 6380\n").contains("needs 'tls-cert-file' and 'tls-key-file'"));
    assert!(bad("aclfile /etc/users.acl\n").contains("not supported"));
    assert!(
        bad("sentinel monitor m 10.0.0.1 1 1\nsentinel down-after-milliseconds m 0\n")
            .contains("negative or zero time parameter.")
    );
    assert!(bad("sentinel frob m\n").contains("unknown directive 'sentinel frob'"));
}

#[test]
fn hostnames_need_resolve_hostnames() {
    assert_eq!(
        bad("sentinel monitor m valkey-0.svc 6379 1\n"),
        "sentinel.conf:1: 'valkey-0.svc' is not an IP address; set 'sentinel resolve-hostnames yes' to monitor by hostname"
    );
    let (c, _) = ok("sentinel monitor m valkey-0.svc 6379 1\nsentinel resolve-hostnames yes\n");
    assert_eq!(c.groups[0].host, "valkey-0.svc");
    assert!(ok("sentinel monitor m ::1 6379 1\n").0.groups[0].host == "::1");
}

#[test]
fn secrets_never_print() {
    let (c, _) = ok("requirepass hunter2\nuser app on >hunter3 +@all\n\
                     sentinel monitor m 10.0.0.1 1 1\nsentinel auth-pass m hunter4\n");
    let shown = format!("{c:?}");
    for secret in ["hunter2", "hunter3", "hunter4"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    assert_eq!(c.requirepass.as_ref().map(Secret::expose), Some("hunter2"));
    assert_eq!(c.users[0].rules, vec!["on", ">hunter3", "+@all"]);
}

#[test]
fn case_and_quotes() {
    let (c, _) = ok(
        "PORT 1234\nSentinel MONITOR \"my-master\" '10.0.0.2' 7 1\nsentinel parallel-syncs my-master 3\n",
    );
    assert_eq!(c.port, 1234);
    assert_eq!(c.groups[0].name, "my-master");
    assert_eq!(c.groups[0].parallel_syncs, 3);
    // A name every output can carry: no spaces, newlines or control
    // characters (event payloads are space-separated).
    assert!(
        bad("sentinel monitor \"my master\" 10.0.0.2 7 1\n")
            .contains("Master names cannot contain spaces")
    );
}

#[test]
fn overrides_win() {
    let (mut c, _) = ok("port 1\ndir /a\n");
    Overrides {
        port: Some(2),
        dir: Some("/b".into()),
        bind: Some(vec!["127.0.0.1".into()]),
        ..Default::default()
    }
    .apply(&mut c);
    assert_eq!(
        (c.port, c.dir.as_path(), c.bind.as_slice()),
        (2, Path::new("/b"), &["127.0.0.1".to_string()][..])
    );
}

#[test]
fn output_limits_and_sentinel_credentials() {
    let (c, notes) = ok("client-output-buffer-limit pubsub 1mb 256kb 30\n\
                         client-output-buffer-limit normal 0 0 0\n\
                         sentinel sentinel-user mon\nsentinel sentinel-pass pw\n");
    assert_eq!(
        c.pubsub_limit,
        OutputLimit {
            hard: 1024 * 1024,
            soft: 256 * 1024,
            soft_secs: 30
        }
    );
    assert_eq!(c.sentinel_user.as_deref(), Some("mon"));
    assert_eq!(c.sentinel_pass.as_ref().map(Secret::expose), Some("pw"));
    assert!(
        !format!("{c:?}").contains("pw\""),
        "the password is never printed"
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(Config::default().pubsub_limit, OutputLimit::PUBSUB);
    assert!(bad("client-output-buffer-limit pubsub 1zb 0 0\n").contains("not a memory size"));
    assert!(bad("client-output-buffer-limit bogus 1 0 0\n").contains("invalid client class"));
}

/// The file path bounds what Sentinel bounds, with Sentinel's texts, and
/// accepts what `SENTINEL SET` accepts (up to `i64::MAX`).
#[test]
fn file_values_are_bounded_as_sentinel_bounds_them() {
    let with = |line: &str| {
        parse(
            "sentinel.conf",
            format!("sentinel monitor m 10.0.0.1 6379 1\n{line}\n").as_bytes(),
        )
    };
    for opt in ["down-after-milliseconds", "failover-timeout"] {
        for v in ["0", "-5", "abc", "", "05", "+5", "9223372036854775808"] {
            let e = with(&format!("sentinel {opt} m \"{v}\"")).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("sentinel.conf:2: '{v}': negative or zero time parameter."),
            );
        }
        let (c, _) = with(&format!("sentinel {opt} m 9223372036854775807")).unwrap();
        let g = &c.groups[0];
        let got = if opt == "failover-timeout" {
            g.failover_timeout
        } else {
            g.down_after
        };
        assert_eq!(got, Duration::from_millis(i64::MAX as u64));
    }
    for v in ["-5", "abc", "9223372036854775808"] {
        let e = with(&format!("sentinel master-reboot-down-after-period m {v}")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("sentinel.conf:2: '{v}': negative time parameter."),
        );
    }
    assert!(with("sentinel master-reboot-down-after-period m 0").is_ok());
    for v in ["0", "-5", "abc", "9223372036854775808"] {
        let e = with(&format!("sentinel parallel-syncs m {v}")).unwrap_err();
        assert!(
            e.to_string()
                .contains("parallel-syncs must be 1 or greater"),
            "{e}"
        );
        let e = parse(
            "s",
            format!("sentinel monitor m 10.0.0.1 6379 {v}\n").as_bytes(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "s:1: Quorum must be 1 or greater.");
    }
    let (c, _) = with("sentinel parallel-syncs m 9223372036854775807").unwrap();
    assert_eq!(c.groups[0].parallel_syncs, u32::MAX);
    let (c, _) = parse(
        "s",
        b"sentinel monitor m 10.0.0.1 6379 9223372036854775807\n",
    )
    .unwrap();
    assert_eq!(c.groups[0].quorum, u32::MAX);
    for p in ["-1", "65536", "abc"] {
        let e = parse(
            "s",
            format!("sentinel monitor m 10.0.0.1 {p} 1\n").as_bytes(),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "s:1: Invalid port number.");
    }
    assert_eq!(
        parse("s", b"port -1\n").unwrap_err().to_string(),
        "s:1: '-1': argument must be between 0 and 65535 inclusive"
    );
    assert_eq!(
        parse("s", b"index-port abc\n").unwrap_err().to_string(),
        "s:1: 'abc': argument couldn't be parsed into an integer"
    );
}

/// Empty and over-long names cannot be carried on every port: refused at
/// load, naming the line; 1024 bytes is the longest accepted.
#[test]
fn empty_and_long_master_names_are_refused() {
    assert_eq!(
        bad("sentinel monitor \"\" 10.0.0.1 6379 1\n"),
        "sentinel.conf:1: Master names cannot contain spaces, newlines or special characters.: \"\""
    );
    let long = "n".repeat(MAX_NAME_LEN + 1);
    let e = bad(&format!(
        "port 1\nsentinel monitor {long} 10.0.0.1 6379 1\n"
    ));
    assert!(
        e.starts_with("sentinel.conf:2: Master names cannot be longer than 1024 bytes."),
        "{e}"
    );
    assert!(e.len() < 200, "the name is not echoed whole: {e}");
    let fits = "n".repeat(MAX_NAME_LEN);
    let (c, _) = ok(&format!("sentinel monitor {fits} 10.0.0.1 6379 1\n"));
    assert_eq!(c.groups[0].name, fits);
}

fn many_monitors(n: usize) -> String {
    let mut text = String::with_capacity(n * 80);
    for i in 0..n {
        text.push_str(&format!(
            "sentinel monitor m{i} 10.0.{}.{} 6379 1\nsentinel down-after-milliseconds m{i} 5000\n",
            (i / 256) % 256,
            i % 256
        ));
    }
    text
}

/// Parsing is linear in the number of groups: ten times the `monitor`
/// lines take well under twenty times as long (it was quadratic: a
/// search over all groups per line).
#[test]
#[allow(clippy::disallowed_methods)] // wall-clock time is what is measured
fn parsing_many_monitors_is_linear() {
    let time = |n: usize| {
        let text = many_monitors(n);
        let start = std::time::Instant::now();
        let (c, _) = ok(&text);
        assert_eq!(c.groups.len(), n);
        assert_eq!(c.groups[n - 1].down_after, Duration::from_millis(5000));
        start.elapsed()
    };
    let _warm = time(2_000);
    // The fastest of three runs each, so a busy machine (CI runs test
    // binaries beside each other) does not decide the ratio.
    let best = |n: usize| (0..3).map(|_| time(n)).min().unwrap_or_default();
    let small = best(20_000);
    let large = best(200_000);
    eprintln!("parse: 20k monitors {small:?}, 200k monitors {large:?}");
    assert!(
        large < small * 20,
        "20k monitors took {small:?}, 200k took {large:?}"
    );
    assert!(
        bad(&format!(
            "{}sentinel monitor m7 10.0.0.1 1 1\n",
            many_monitors(10)
        ))
        .contains("Duplicate master name.")
    );
}

#[test]
fn control_characters_in_a_line_are_refused() {
    for text in [
        "port 26\u{0}79\n",
        "port 26379\u{0}\n",
        "sentinel announce-ip 10.0.0.1\u{1b}[2J\n",
    ] {
        let e = crate::config::parse("sentinel.conf", text.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("control character"), "{text:?}: {e}");
        assert!(e.to_string().contains("sentinel.conf:1"), "{e}");
    }
    // Quoted and escaped, as Sentinel writes them, they are values.
    crate::config::parse(
        "sentinel.conf",
        b"sentinel monitor m 127.0.0.1 6379 1\nsentinel auth-pass m \"a\\x01b\"\n",
    )
    .unwrap();
}

#[test]
fn renames_onto_other_commands_and_unprintable_announce_ips_are_refused() {
    let e = crate::config::parse(
        "s.conf",
        b"sentinel monitor m 127.0.0.1 6379 1\nsentinel rename-command m PING FLUSHALL\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("another Valkey command"), "{e}");
    assert!(e.to_string().contains("s.conf:2"), "{e}");
    crate::config::parse(
        "s.conf",
        b"sentinel monitor m 127.0.0.1 6379 1\nsentinel rename-command m PING PING\nsentinel rename-command m CONFIG MYCONFIG\n",
    )
    .unwrap();
    let e = crate::config::parse("s.conf", b"sentinel announce-ip valkey-0.svc\n").unwrap_err();
    assert!(e.to_string().contains("s.conf:1"), "{e}");
    assert!(e.to_string().contains("not an IP address"), "{e}");
    crate::config::parse(
        "s.conf",
        b"sentinel announce-ip valkey-0.svc\nsentinel resolve-hostnames yes\n",
    )
    .unwrap();
}

#[test]
fn index_subscribers_per_address() {
    assert_eq!(
        ok("").0.index_max_per_address,
        DEFAULT_INDEX_MAX_PER_ADDRESS
    );
    let (c, _) = ok("index-max-subscribers-per-address 0\n");
    assert_eq!(c.index_max_per_address, 0);
    let (c, _) = ok("index-max-subscribers-per-address 40\n");
    assert_eq!(c.index_max_per_address, 40);
    assert!(bad("index-max-subscribers-per-address -1\n").starts_with("sentinel.conf:1: "));
    assert!(bad("index-max-subscribers-per-address\n").starts_with("sentinel.conf:1: "));
}

/// `--logfile ""` parses (clap's path parser would refuse it) and means
/// standard error, over the file's `logfile` line.
#[test]
fn an_empty_logfile_flag_means_standard_error() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        overrides: Overrides,
    }
    let cli = Cli::try_parse_from(["valkyrie", "--logfile", ""]).unwrap();
    let mut config = Config {
        logfile: Some("sentinel.log".into()),
        ..Config::default()
    };
    cli.overrides.apply(&mut config);
    assert_eq!(config.logfile, None);
}
