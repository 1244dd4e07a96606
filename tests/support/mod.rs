//! Test support: real `valkey-server` processes on free loopback ports,
//! stopped by PID, and a small blocking RESP client.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

pub mod clients;
#[cfg(feature = "kubernetes")]
pub mod cluster;
pub mod cut;
pub mod http;
#[cfg(feature = "kubernetes")]
pub mod kube;
pub mod observe;
pub mod peers;
pub mod pods;
pub mod process;
pub mod procstat;
pub mod sentinel;
pub mod tls;
pub mod wire;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::BytesMut;
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

/// The valkey-server binary: `VALKEY_SERVER`, else the one on `PATH`. A
/// missing binary fails the test with a message: scripts/test installs it,
/// and a test that skips would pass without testing anything.
pub fn valkey_server() -> PathBuf {
    if let Some(p) = std::env::var_os("VALKEY_SERVER") {
        return PathBuf::from(p);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v valkey-server"])
        .output()
        .expect("run sh");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "valkey-server not found: run scripts/test (it installs it), or set VALKEY_SERVER"
    );
    PathBuf::from(path)
}

/// A port nobody listens on right now, and never handed out before in
/// this process: the kernel may give a port just released again, and two
/// servers of one test were once given the same port (a CI run of
/// `peering::mixed`).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "valkyrie-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Keep the servers' logs of a failed test for inspection.
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One valkey-server process.
pub struct Server {
    pub port: u16,
    child: Option<Child>,
    bin: PathBuf,
    dir: PathBuf,
    replicaof: Option<u16>,
    /// More command-line options, after the usual ones.
    args: Vec<String>,
}

impl Server {
    /// Starts a server without persistence (a restart comes back empty).
    pub fn start(bin: &Path, dir: &Path, port: u16, replicaof: Option<u16>) -> Server {
        Server::start_with(bin, dir, port, replicaof, &[])
    }

    /// [`Server::start`] with more command-line options (`args`), kept for
    /// its restarts. Its directory is `dir/n<port>`.
    pub fn start_with(
        bin: &Path,
        dir: &Path,
        port: u16,
        replicaof: Option<u16>,
        args: &[&str],
    ) -> Server {
        let mut s = Server {
            port,
            child: None,
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            replicaof,
            args: args.iter().map(|a| a.to_string()).collect(),
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let dir = self.dir.join(format!("n{}", self.port));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("valkey.log"))
            .args([
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ]);
        if let Some(m) = self.replicaof {
            cmd.args(["--replicaof", "127.0.0.1"]).arg(m.to_string());
        }
        cmd.args(&self.args);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        wait_until(Duration::from_secs(10), || {
            matches!(try_call(self.port, &["PING"]), Ok(Frame::Simple(_)))
        });
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal by PID (`STOP`, `CONT`).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGKILL and start again on the same port, with the same role (no
    /// persistence: a replica comes back empty and resyncs).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts it again on the same port, as a master with an empty dataset.
    pub fn restart_empty(&mut self) {
        self.kill();
        self.replicaof = None;
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A stopped process cannot die of SIGKILL until continued on
            // some kernels' views of ptrace; continue it first.
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// A blocking client connection (one connection, many commands: what
/// `WAIT` needs to count this client's writes).
pub struct Client {
    stream: TcpStream,
    dec: FrameDecoder,
    buf: BytesMut,
}

impl Client {
    pub fn connect(port: u16) -> Result<Client, String> {
        Client::connect_timeout(port, Duration::from_secs(6))
    }

    /// A connection whose replies must come within `timeout`.
    pub fn connect_timeout(port: u16, timeout: Duration) -> Result<Client, String> {
        let stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        Client::over(stream, timeout)
    }

    /// A client on a connection made elsewhere (inside a netns, say).
    pub fn over(stream: TcpStream, timeout: Duration) -> Result<Client, String> {
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        Ok(Client {
            stream,
            dec: FrameDecoder::new(),
            buf: BytesMut::new(),
        })
    }

    pub fn call(&mut self, args: &[&str]) -> Result<Frame, String> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out).map_err(|e| e.to_string())?;
        self.read()
    }

    /// The next frame the server sends (a pushed message, say); an error
    /// when the read timeout passes first.
    pub fn read(&mut self) -> Result<Frame, String> {
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).map_err(|e| e.to_string())? {
                return Ok(f);
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Sends one command on a fresh connection and reads one reply.
pub fn try_call(port: u16, args: &[&str]) -> Result<Frame, String> {
    Client::connect(port)?.call(args)
}

/// `try_call`, panicking on failure.
pub fn call(port: u16, args: &[&str]) -> Frame {
    try_call(port, args).unwrap_or_else(|e| panic!("{args:?} on {port}: {e}"))
}

/// The value of `field` in `INFO replication`.
pub fn info_field(port: u16, field: &str) -> Option<String> {
    let f = try_call(port, &["INFO", "replication"]).ok()?;
    let text = String::from_utf8(f.as_bytes()?.to_vec()).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|v| v.trim().to_string())
    })
}

/// Polls `f` every `every` until it gives `Some`; fails after `limit`,
/// naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, every: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Polls `cond` every 20 ms until it holds; panics after `limit`.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "condition not met within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A master and two replicas, returned once both replicas report an up
/// link to the master.
pub fn start_trio(bin: &Path, dir: &Path) -> (Server, Server, Server) {
    let pm = free_port();
    let master = Server::start(bin, dir, pm, None);
    let r1 = Server::start(bin, dir, free_port(), Some(pm));
    let r2 = Server::start(bin, dir, free_port(), Some(pm));
    wait_until(Duration::from_secs(10), || {
        [r1.port, r2.port]
            .iter()
            .all(|&p| info_field(p, "master_link_status").as_deref() == Some("up"))
    });
    (master, r1, r2)
}

/// Writes `k0..k{n-1}` = `v0..` on one connection, then `WAIT`s for
/// `replicas` acknowledgements (WAIT counts this connection's writes).
pub fn write_acknowledged(port: u16, n: usize, replicas: i64) {
    let mut writer = Client::connect(port).unwrap();
    for i in 0..n {
        writer
            .call(&["SET", &format!("k{i}"), &format!("v{i}")])
            .unwrap();
    }
    assert_eq!(
        writer
            .call(&["WAIT", &replicas.to_string(), "5000"])
            .unwrap(),
        Frame::Integer(replicas)
    );
}

/// An in-process daemon's configuration: the Sentinel port on a free
/// loopback port, no admin or index port, state under `dir`.
pub fn daemon_config(
    dir: &Path,
    groups: Vec<valkyrie::config::GroupConfig>,
) -> valkyrie::config::Config {
    valkyrie::config::Config {
        port: 0,
        bind: vec!["127.0.0.1".into()],
        admin_port: 0,
        index_port: 0,
        dir: dir.to_path_buf(),
        groups,
        ..valkyrie::config::Config::default()
    }
}

/// `mymaster` at `master`, detected down after 1 s, failover bounded by 10 s.
pub fn fast_group(master: u16) -> valkyrie::config::GroupConfig {
    let mut g = valkyrie::config::GroupConfig::new("mymaster", "127.0.0.1", master, 2);
    g.down_after = Duration::from_millis(1000);
    g.failover_timeout = Duration::from_millis(10_000);
    g
}

/// Waits until `mymaster` lists `n` replicas, each with its run id known.
pub async fn replicas_known(handle: &valkyrie::runtime::Handle, n: usize) {
    let h = handle.clone();
    tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(10), || {
            let t = h.topology.borrow().clone();
            let g = &t.groups["mymaster"];
            g.replicas.len() == n && g.replicas.iter().all(|r| !r.run_id.is_empty())
        })
    })
    .await
    .unwrap();
}

/// The port a Sentinel port (Valkyrie's or a real sentinel's) advertises
/// for `mymaster` (`SENTINEL get-master-addr-by-name`).
pub fn advertised_master(sentinel_port: u16) -> Option<u16> {
    match try_call(
        sentinel_port,
        &["SENTINEL", "get-master-addr-by-name", "mymaster"],
    )
    .ok()?
    {
        Frame::Array(v) if v.len() == 2 => String::from_utf8_lossy(v[1].as_bytes()?).parse().ok(),
        _ => None,
    }
}

/// Field `name` of `SENTINEL MASTER mymaster`, as text.
pub fn master_field(sentinel_port: u16, name: &str) -> Option<String> {
    field(
        &try_call(sentinel_port, &["SENTINEL", "MASTER", "mymaster"]).ok()?,
        name,
    )
}

/// Where `port` replicates from (`INFO`'s `master_port`), or `None` for
/// a master.
pub fn upstream(port: u16) -> Option<u16> {
    match info_field(port, "role").as_deref() {
        Some("slave") => info_field(port, "master_port").and_then(|p| p.parse().ok()),
        _ => None,
    }
}

/// Field `name` of a flat (RESP2) map, such as an instance description of
/// `SENTINEL MASTER` or `REPLICAS`, as text.
pub fn field(entry: &Frame, name: &str) -> Option<String> {
    let Frame::Array(kv) = entry else {
        return None;
    };
    kv.chunks(2)
        .find(|p| p[0].as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
        .and_then(|p| p.get(1)?.as_bytes())
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Waits until every sentinel at `ports` sees the others and both
/// replicas of `mymaster` (`SENTINEL MASTER`'s counts).
pub fn wait_discovered(ports: &[u16], limit: Duration) {
    let others = (ports.len() - 1).to_string();
    wait_until(limit, || {
        ports.iter().all(|&p| {
            master_field(p, "num-other-sentinels").as_deref() == Some(others.as_str())
                && master_field(p, "num-slaves").as_deref() == Some("2")
        })
    });
}
