//! A real `valkey-sentinel` process, for tests that compare Valkyrie's
//! replies with Sentinel's own on the same bytes.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_port, wait_until};

/// The valkey-sentinel binary: `VALKEY_SENTINEL`, else the one on `PATH`.
/// A missing binary fails the test (scripts/test installs it).
pub fn valkey_sentinel() -> PathBuf {
    if let Some(p) = std::env::var_os("VALKEY_SENTINEL") {
        return PathBuf::from(p);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v valkey-sentinel"])
        .output()
        .unwrap();
    let path = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(
        !path.is_empty(),
        "valkey-sentinel not found: set VALKEY_SENTINEL (source scripts/deps.sh && valkyrie_deps)"
    );
    PathBuf::from(path)
}

/// A real valkey-sentinel on a free loopback port, killed by PID on drop.
pub struct RealSentinel {
    pub port: u16,
    child: Child,
}

impl RealSentinel {
    /// Starts one with `extra` appended to a minimal configuration in
    /// `dir`, and returns once its port accepts connections.
    pub fn start(dir: &Path, extra: &str) -> RealSentinel {
        let port = free_port();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n{extra}",
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new(valkey_sentinel())
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = RealSentinel { port, child };
        wait_until(Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        s
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RealSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three real sentinels (quorum 2) on `master`, each in its own directory
/// under `dir`, with the failover benchmarks' settings (down-after 1 s,
/// failover-timeout 10 s, parallel-syncs 1); returned once every one
/// knows the other two.
pub fn three_sentinels(dir: &Path, master: u16) -> Vec<RealSentinel> {
    let sentinels: Vec<RealSentinel> = (0..3)
        .map(|i| {
            let own = dir.join(format!("sentinel-{i}"));
            std::fs::create_dir_all(&own).unwrap();
            RealSentinel::start(
                &own,
                &format!(
                    "sentinel monitor mymaster 127.0.0.1 {master} 2\n\
                     sentinel down-after-milliseconds mymaster 1000\n\
                     sentinel failover-timeout mymaster 10000\n\
                     sentinel parallel-syncs mymaster 1\nlogfile {}\n",
                    own.join("sentinel.log").display()
                ),
            )
        })
        .collect();
    let ports: Vec<u16> = sentinels.iter().map(|s| s.port).collect();
    super::wait_discovered(&ports, Duration::from_secs(30));
    sentinels
}

/// A real valkey-sentinel and a Valkyrie daemon beside it, neither
/// monitoring anything, each in a directory of its own under `dir`: the
/// two sides of a differential test.
pub async fn beside_a_real_sentinel(dir: &Path) -> (RealSentinel, valkyrie::daemon::Daemon) {
    let (real_dir, ours_dir) = (dir.join("real"), dir.join("ours"));
    std::fs::create_dir_all(&real_dir).unwrap();
    std::fs::create_dir_all(&ours_dir).unwrap();
    let real = RealSentinel::start(&real_dir, "");
    let text = format!(
        "port 0\nadmin-port 0\nindex-port 0\nbind 127.0.0.1\ndir {}\n",
        ours_dir.display()
    );
    let (cfg, _) = valkyrie::config::parse("t.conf", text.as_bytes()).unwrap();
    let daemon = valkyrie::daemon::Daemon::start(cfg).await.unwrap();
    (real, daemon)
}

/// The Sentinel ports of [`beside_a_real_sentinel`]'s pair, named.
pub fn sides(real: &RealSentinel, ours: &valkyrie::daemon::Daemon) -> [(&'static str, u16); 2] {
    [
        ("valkey-sentinel", real.port),
        ("Valkyrie", ours.sentinel_addrs[0].port()),
    ]
}

/// `SENTINEL MASTERS` on `port` lists `groups` groups, each with
/// `replicas` replicas and `others` other sentinels, none down or failing
/// over: a monitor (Sentinel or Valkyrie) that has settled.
pub fn masters_settled(port: u16, groups: usize, replicas: usize, others: usize) -> bool {
    use valkyrie_protocol::Frame;
    let Ok(Frame::Array(masters)) = super::try_call(port, &["SENTINEL", "MASTERS"]) else {
        return false;
    };
    let text = |f: &Frame| {
        f.as_bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    masters.len() == groups
        && masters.iter().all(|m| {
            let Frame::Array(kv) = m else {
                return false;
            };
            let field = |name: &str| {
                kv.chunks(2)
                    .find(|p| text(&p[0]) == name)
                    .map(|p| text(&p[1]))
                    .unwrap_or_default()
            };
            field("num-slaves") == replicas.to_string()
                && field("num-other-sentinels") == others.to_string()
                && !["s_down", "o_down", "failover"]
                    .iter()
                    .any(|f| field("flags").contains(f))
        })
}
