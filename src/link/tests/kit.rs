//! Real processes for the links' tests: a valkey-server or a
//! valkey-sentinel on a free loopback port, killed on drop. A missing
//! binary fails the test: one that skipped would test nothing.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use valkyrie_protocol::Frame;

use crate::core::Addr;
use crate::link::client::{Conn, connect};

/// A binary from `var`, else `name` on `PATH`.
fn binary(var: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .unwrap_or_else(|e| panic!("run sh: {e}"));
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "{name} not found: set {var} (source scripts/deps.sh && valkyrie_deps)"
    );
    PathBuf::from(path)
}

/// A port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A running process and its scratch directory.
#[derive(Debug)]
pub(crate) struct Proc {
    pub(crate) port: u16,
    child: Child,
    dir: PathBuf,
}

impl Proc {
    /// Its address.
    pub(crate) fn addr(&self) -> Addr {
        Addr::new("127.0.0.1", self.port)
    }

    /// Sends a signal (`STOP`, `CONT`).
    pub(crate) fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(tag: &str, port: u16) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("valkyrie-{tag}-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on port {port} after 10 s");
}

/// A valkey-server without persistence; `args` are added to its
/// command line (e.g. `--requirepass x`).
pub(crate) fn valkey_server(args: &[&str]) -> Proc {
    let port = free_port();
    let dir = scratch("server", port);
    let child = Command::new(binary("VALKEY_SERVER", "valkey-server"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Proc { port, child, dir };
    wait_for_port(port);
    p
}

/// A valkey-sentinel monitoring `m` at an address where nothing runs,
/// with `extra` appended to its configuration.
pub(crate) fn valkey_sentinel(extra: &str) -> (Proc, Addr) {
    let port = free_port();
    let master = Addr::new("127.0.0.1", free_port());
    let dir = scratch("sentinel", port);
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor m {} {} 2\n{extra}",
            dir.display(),
            master.host,
            master.port
        ),
    )
    .unwrap();
    let child = Command::new(binary("VALKEY_SENTINEL", "valkey-sentinel"))
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Proc { port, child, dir };
    wait_for_port(port);
    (p, master)
}

/// A client connection to `port`, authenticated with `pass` if given.
pub(crate) async fn client(port: u16, pass: Option<&str>) -> Conn {
    let mut conn = connect(&Addr::new("127.0.0.1", port), Duration::from_secs(5), None)
        .await
        .unwrap();
    if let Some(pass) = pass {
        let reply = conn
            .call(&["AUTH", pass], Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply, Frame::simple("OK"));
    }
    conn
}

/// One command's reply.
pub(crate) async fn call(conn: &mut Conn, args: &[&str]) -> Frame {
    conn.call(args, Duration::from_secs(5)).await.unwrap()
}

/// A run id: `prefix` repeated to 40 characters.
pub(crate) fn runid(prefix: &str) -> String {
    prefix.repeat(40).chars().take(40).collect()
}

/// The next input `pick` keeps, within `wait`.
pub(crate) async fn next_input<T>(
    wait: Duration,
    inputs: &mut tokio::sync::mpsc::Receiver<crate::core::Input>,
    mut pick: impl FnMut(crate::core::Input) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(wait, async {
        loop {
            let input = inputs
                .recv()
                .await
                .expect("the link's input channel closed");
            if let Some(t) = pick(input) {
                return t;
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no matching input within {wait:?}"))
}
