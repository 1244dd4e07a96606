//! `valkyrie check-config` on real files: the sentinel.conf that Debian's
//! valkey-sentinel package installs must be accepted unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn check(file: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
        .arg("check-config")
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn packaged_sentinel_conf_is_accepted() {
    // scripts/test installs the package and exports VALKEY_SENTINEL; a bare
    // `cargo test` without it has no packaged file to read.
    let packaged = Path::new("/etc/valkey/sentinel.conf");
    assert!(
        packaged.exists(),
        "{} is missing: run scripts/test (it installs the valkey-sentinel package)",
        packaged.display()
    );
    let (ok, stdout, stderr) = check(packaged);
    assert!(ok, "rejected: {stderr}");
    assert!(
        stdout.contains("mymaster: master 127.0.0.1:6379"),
        "{stdout}"
    );
    assert!(stdout.contains("quorum 2 applies once peers"), "{stdout}");
}

#[test]
fn errors_name_the_line() {
    let dir = std::env::temp_dir().join(format!("valkyrie-cc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.conf");
    std::fs::write(
        &file,
        "port 26379\nsentinel monitor m 127.0.0.1 6379 1\nsentinel bogus m 1\n",
    )
    .unwrap();
    let (ok, _, stderr) = check(&file);
    assert!(!ok);
    assert!(
        stderr.contains("bad.conf:3: unknown directive 'sentinel bogus'"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two of Valkyrie's ports on one number are reported, from the file or
/// from the flags and `VALKYRIE_*` variables that override it; out-of-range
/// ports are refused on every path.
#[test]
fn port_conflicts_and_bounds_are_reported() {
    let dir = std::env::temp_dir().join(format!("valkyrie-cc-ports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |text: &str, args: &[&str], env: &[(&str, &str)]| {
        let file = dir.join("p.conf");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
            .arg("check-config")
            .arg(&file)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, err) = run("port 12120\n", &[], &[]);
    assert!(
        !ok && err.contains("'port' and 'index-port' are both 12120"),
        "{err}"
    );
    let (ok, err) = run("port 5000\nadmin-port 5000\n", &[], &[]);
    assert!(
        !ok && err.contains("'port' and 'admin-port' are both 5000"),
        "{err}"
    );
    let (ok, err) = run("port 5000\n", &["--admin-port", "5000"], &[]);
    assert!(
        !ok && err.contains("'port' and 'admin-port' are both 5000"),
        "{err}"
    );
    let (ok, err) = run("port 5000\n", &[], &[("VALKYRIE_INDEX_PORT", "9126")]);
    assert!(
        !ok && err.contains("'index-port' and 'admin-port' are both 9126"),
        "{err}"
    );
    // 0 disables a port: never a conflict.
    let (ok, err) = run("port 5000\nindex-port 0\nadmin-port 0\n", &[], &[]);
    assert!(ok, "{err}");
    let (ok, err) = run("port 70000\n", &[], &[]);
    assert!(
        !ok && err.contains("p.conf:1: '70000': argument must be between 0 and 65535"),
        "{err}"
    );
    let (ok, err) = run("port 5000\n", &["--port", "70000"], &[]);
    assert!(!ok && err.contains("70000"), "{err}");
    let (ok, err) = run("port 5000\n", &[], &[("VALKYRIE_ADMIN_PORT", "-1")]);
    assert!(!ok && err.contains("-1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
