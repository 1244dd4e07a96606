//! The images of `scripts/images`, run for real. The test runs the script
//! (a no-op when its inputs are archived; a build otherwise), loads the
//! OCI archives into a throwaway podman store, and runs, with runc and
//! the cgroupfs manager on the host's network (loopback only), the Valkey
//! image as a StatefulSet's pod runs it (uid 999, read-only root, no
//! capabilities, its readiness command) and the Valkyrie image monitoring
//! it, with a `sentinel.conf` mounted in. Valkyrie must answer `SENTINEL
//! get-master-addr-by-name` with the Valkey container's address, link to
//! it (its links are Valkey clients), run as uid 10001 and write its state
//! file under /var/lib/valkyrie. The pause image must exit 0 on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::http::http_get;
use support::{TempDir, free_port, try_call, wait_until};
use valkyrie_protocol::Frame;

/// A podman store of its own, in a scratch directory, with this machine's
/// settings (`scripts/images` uses the same).
struct Podman {
    dir: PathBuf,
}

impl Podman {
    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        for (flag, sub) in [
            ("--root", "root"),
            ("--runroot", "run"),
            ("--tmpdir", "tmp"),
        ] {
            c.arg(flag).arg(self.dir.join(sub));
        }
        c.args(["--storage-driver", "overlay", "--runtime", "runc"]);
        c.args(["--cgroup-manager", "cgroupfs", "--events-backend", "file"]);
        c
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self
            .cmd()
            .args(args)
            .output()
            .expect("podman (scripts/deps.sh installs it)");
        assert!(
            out.status.success(),
            "podman {args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout).trim().to_string()
    }

    /// `podman run -d` (ARGS split at spaces) as a restricted pod runs:
    /// read-only root, no capabilities, no privilege escalation; with the
    /// lowered rlimits root needs here (it may not raise them). Removed on
    /// drop.
    fn run(&self, name: &str, args: &str) -> Container<'_> {
        let limit = |r, cap: u64| {
            let hard = rustix::process::getrlimit(r)
                .maximum
                .unwrap_or(cap)
                .min(cap);
            format!("{hard}:{hard}")
        };
        let nofile = limit(rustix::process::Resource::Nofile, 1 << 20);
        let nproc = limit(rustix::process::Resource::Nproc, 32768);
        let name = format!("valkyrie-images-{}-{name}", std::process::id());
        let all = format!(
            "run -d --pull=never --name {name} --network host --log-driver k8s-file \
             --ulimit nofile={nofile} --ulimit nproc={nproc} --read-only --cap-drop ALL \
             --security-opt no-new-privileges {args}"
        );
        self.ok(&all.split_whitespace().collect::<Vec<_>>());
        Container { podman: self, name }
    }
}

struct Container<'a> {
    podman: &'a Podman,
    name: String,
}

impl Container<'_> {
    fn inspect(&self, format: &str) -> String {
        self.podman.ok(&["inspect", "--format", format, &self.name])
    }

    /// The uid its main process runs as, from the host's /proc.
    fn uid(&self) -> u32 {
        let pid = self.inspect("{{.State.Pid}}");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn logs(&self) -> String {
        let out = self
            .podman
            .cmd()
            .args(["logs", &self.name])
            .output()
            .unwrap();
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {} logs:\n{}", self.name, self.logs());
        }
        let _ = self
            .podman
            .cmd()
            .args(["rm", "-f", "-t", "0", &self.name])
            .output();
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Nothing of this store may stay mounted under the scratch
        // directory that TempDir removes (its containers are this test's).
        let _ = self.cmd().args(["rm", "-a", "-f", "-t", "0"]).output();
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs scripts/images: name -> (reference, archive).
fn images(log: &Path) -> BTreeMap<String, (String, String)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/images");
    let start = Instant::now();
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .output()
        .unwrap();
    let err = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = err.lines().rev().take(40).collect();
    assert!(
        out.status.success(),
        "scripts/images failed:\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    eprintln!("scripts/images: {:.1} s", start.elapsed().as_secs_f64());
    let dir = text(&out.stdout).lines().last().unwrap().to_string();
    std::fs::read_to_string(Path::new(&dir).join("images.txt"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), (f[1].to_string(), f[2].to_string()))
        })
        .collect()
}

fn owned_dir(path: &Path, uid: u32) {
    std::fs::create_dir_all(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

fn bulk(f: &Frame) -> String {
    text(f.as_bytes().map(|b| b.as_ref()).unwrap_or_default())
}

#[test]
fn valkey_and_valkyrie_images_run_together() {
    let tmp = TempDir::new("images");
    let images = images(&tmp.0.join("images.log"));
    let podman = Podman {
        dir: tmp.0.join("podman"),
    };
    for name in ["valkey", "valkyrie", "pause"] {
        podman.ok(&["load", "-q", "-i", &images[name].1]);
    }
    let (valkey_port, port, admin_port) = (free_port(), free_port(), free_port());
    let [data, state] = [tmp.0.join("data"), tmp.0.join("state")];
    owned_dir(&data, 999);
    owned_dir(&state, 10001);

    // Valkey as src/kube/render/pod.rs runs it: uid 999 (the image's),
    // read-only root, no capabilities; its readiness probe's command.
    let valkey = podman.run(
        "valkey",
        &format!(
            "-v {}:/data {} valkey-server --bind 127.0.0.1 --port {valkey_port}",
            data.display(),
            images["valkey"].0
        ),
    );
    wait_until(Duration::from_secs(30), || {
        matches!(try_call(valkey_port, &["PING"]), Ok(Frame::Simple(_)))
    });
    assert_eq!(valkey.uid(), 999);
    let probe = format!("valkey-cli -h 127.0.0.1 -p {valkey_port} ping | grep -q PONG");
    podman.ok(&["exec", &valkey.name, "sh", "-c", &probe]);

    // Valkyrie from its Dockerfile, its configuration mounted read-only,
    // the state directory from the image's VALKYRIE_DIR.
    let conf = tmp.0.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\nadmin-port {admin_port}\nindex-port 0\n\
             sentinel monitor images 127.0.0.1 {valkey_port} 1\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).unwrap();
    let valkyrie = podman.run(
        "valkyrie",
        &format!(
            "-v {}:/etc/valkyrie/sentinel.conf:ro -v {}:/var/lib/valkyrie {}",
            conf.display(),
            state.display(),
            images["valkyrie"].0
        ),
    );
    wait_until(Duration::from_secs(30), || {
        matches!(http_get(admin_port, "/healthz"), Ok((200, _)))
    });
    let addr = support::call(port, &["SENTINEL", "get-master-addr-by-name", "images"]);
    let Frame::Array(addr) = addr else {
        panic!("{addr:?}")
    };
    assert_eq!(
        addr.iter().map(bulk).collect::<Vec<_>>(),
        ["127.0.0.1", valkey_port.to_string().as_str()]
    );
    // Its links reached the Valkey container: named as Sentinel names them.
    let id = bulk(&support::call(port, &["SENTINEL", "myid"]));
    let link = format!("name=sentinel-{}-cmd ", &id[..8]);
    wait_until(Duration::from_secs(30), || {
        try_call(valkey_port, &["CLIENT", "LIST"]).is_ok_and(|f| bulk(&f).contains(&link))
    });
    assert_eq!(valkyrie.uid(), 10001);
    let file = state.join("valkyrie-state.json");
    wait_until(Duration::from_secs(30), || file.is_file());

    // pause: exits 0 on SIGTERM, well before podman's SIGKILL at 10 s.
    let pause = podman.run("pause", &images["pause"].0);
    assert_eq!(pause.inspect("{{.State.Status}}"), "running");
    let start = Instant::now();
    podman.ok(&["stop", "-t", "10", &pause.name]);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(pause.inspect("{{.State.ExitCode}}"), "0");
}
