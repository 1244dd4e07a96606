//! What the cluster needs from the host (root, commands, the binaries and
//! images named by the environment) and the watchdog, `node.sh`, that
//! owns what it changes there.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What `node.sh` is, run by `bash -c` (a copy in memory: the file may
/// change while a watchdog runs).
const NODE_SH: &str = include_str!("node.sh");

/// The directory `var` names; the test fails, saying `how` to make it,
/// when it is unset or missing.
pub fn env_dir(var: &str, how: &str) -> PathBuf {
    let dir = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: this test runs a real one-node cluster. {how}")
    });
    assert!(
        dir.is_dir(),
        "{var}={}: no such directory. {how}",
        dir.display()
    );
    dir
}

/// The images `scripts/images` made: name → (reference, archive).
pub fn images(dir: &Path) -> BTreeMap<String, (String, PathBuf)> {
    let list = dir.join("images.txt");
    let text = std::fs::read_to_string(&list)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/images)", list.display()));
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((
                f.next()?.to_string(),
                (f.next()?.to_string(), PathBuf::from(f.next()?)),
            ))
        })
        .collect()
}
pub fn ctr(socket: &Path, args: &[&str]) -> std::process::Output {
    Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["-n", "k8s.io"])
        .args(args)
        .output()
        .expect("ctr (Debian's containerd package)")
}
/// The host's commands the node needs, each present (scripts/deps.sh
/// installs them), and root.
pub fn host_tools() {
    let out = Command::new("id").arg("-u").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "a one-node cluster needs root"
    );
    for tool in [
        "containerd",
        "ctr",
        "runc",
        "nsenter",
        "ip",
        "iptables",
        "conntrack",
        "flock",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        assert!(
            found.status.success(),
            "{tool} is missing (scripts/deps.sh installs it)"
        );
    }
    for plugin in ["bridge", "host-local", "portmap", "loopback"] {
        let path = Path::new("/usr/lib/cni").join(plugin);
        assert!(
            path.is_file(),
            "{} is missing (Debian's containernetworking-plugins)",
            path.display()
        );
    }
}
/// Starts `node.sh watch` in a process group of its own and waits until it
/// holds the lock and the node's netns exists.
pub async fn watchdog(dir: &Path, netns: &str) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("bash")
        .args(["-c", NODE_SH, "node.sh", "watch"])
        .arg(dir)
        .arg(netns)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .expect("bash for the watchdog");
    let stdin = child.stdin.take().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    // Blocking reads, off the runtime's threads.
    let (child, stdin, out) = tokio::task::spawn_blocking(move || {
        let mut out = out;
        loop {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let line = line.trim();
            match line {
                "ready" => return (child, stdin, out),
                l if l.starts_with("waiting") => eprintln!("node.sh: {l}"),
                l => panic!("node.sh: {l}"),
            }
        }
    })
    .await
    .unwrap();
    (child, stdin, out)
}
