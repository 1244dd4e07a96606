//! `valkyrie demo`: a local master and two replicas of `valkey-server` on
//! free loopback ports, monitored by Valkyrie, with its Sentinel port open.
//! Prints what to try, streams the events, optionally kills the master
//! after some seconds, and cleans everything up on Ctrl-C.

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::config::{Config, GroupConfig};
use crate::daemon::{Daemon, shutdown_signal};

/// Demo options.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The valkey-server binary.
    pub valkey_server: Option<PathBuf>,
    /// Kill the master this many seconds after start.
    pub kill_after: Option<u64>,
    /// Sentinel port (0: 26379 if free, else any free port).
    pub port: u16,
}

/// Errors of the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// valkey-server is not installed.
    #[error(
        "valkey-server not found. On Debian bookworm: add bookworm-backports and run \
         `apt-get install -t bookworm-backports valkey-server` (scripts/demo does this), \
         or pass --valkey-server PATH"
    )]
    NoValkey,
    /// Something failed.
    #[error("{0}")]
    Other(String),
}

fn find_valkey(opt: Option<PathBuf>) -> Option<PathBuf> {
    if let Some(p) = opt.or_else(|| std::env::var_os("VALKEY_SERVER").map(PathBuf::from)) {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("valkey-server"))
            .find(|p| p.is_file())
    })
}

fn free_port() -> Result<u16, DemoError> {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| DemoError::Other(format!("no free port: {e}")))
}

fn spawn_valkey(
    bin: &Path,
    dir: &Path,
    port: u16,
    master: Option<u16>,
) -> Result<Child, DemoError> {
    let data = dir.join(format!("valkey-{port}"));
    std::fs::create_dir_all(&data).map_err(|e| DemoError::Other(e.to_string()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&data)
        .arg("--logfile")
        .arg(data.join("valkey.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if let Some(m) = master {
        cmd.args(["--replicaof", "127.0.0.1"]).arg(m.to_string());
    }
    cmd.spawn()
        .map_err(|e| DemoError::Other(format!("starting {}: {e}", bin.display())))
}

async fn wait_listening(port: u16) -> Result<(), DemoError> {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(DemoError::Other(format!(
        "valkey-server on {port} did not start"
    )))
}

/// Runs the demo until Ctrl-C.
pub async fn run(opts: DemoOptions) -> Result<(), DemoError> {
    let bin = find_valkey(opts.valkey_server).ok_or(DemoError::NoValkey)?;
    let dir = std::env::temp_dir().join(format!("valkyrie-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| DemoError::Other(e.to_string()))?;
    let result = run_in(&bin, &dir, opts.kill_after, opts.port).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run_in(
    bin: &Path,
    dir: &Path,
    kill_after: Option<u64>,
    port: u16,
) -> Result<(), DemoError> {
    let (pm, p1, p2) = (free_port()?, free_port()?, free_port()?);
    let mut master = spawn_valkey(bin, dir, pm, None)?;
    wait_listening(pm).await?;
    let mut replicas = vec![
        spawn_valkey(bin, dir, p1, Some(pm))?,
        spawn_valkey(bin, dir, p2, Some(pm))?,
    ];
    wait_listening(p1).await?;
    wait_listening(p2).await?;

    let sentinel_port = if port != 0 {
        port
    } else if StdListener::bind("127.0.0.1:26379").is_ok() {
        26379
    } else {
        free_port()?
    };
    let admin_port = if StdListener::bind("127.0.0.1:9126").is_ok() {
        9126
    } else {
        free_port()?
    };
    let mut group = GroupConfig::new("mymaster", "127.0.0.1", pm, 1);
    group.down_after = Duration::from_millis(1000);
    group.failover_timeout = Duration::from_millis(10_000);
    // The index port only if its default is free: a second demo on the
    // same host still starts.
    let index_port = if StdListener::bind("127.0.0.1:12120").is_ok() {
        12120
    } else {
        0
    };
    let config = Config {
        port: sentinel_port,
        admin_port,
        index_port,
        bind: vec!["127.0.0.1".into()],
        dir: dir.to_path_buf(),
        groups: vec![group],
        ..Config::default()
    };
    let daemon = Daemon::start(config)
        .await
        .map_err(|e| DemoError::Other(e.to_string()))?;
    let master_pid = master.id().unwrap_or(0);
    println!();
    println!("Valkyrie demo");
    println!("  master   127.0.0.1:{pm} (pid {master_pid})");
    println!("  replicas 127.0.0.1:{p1}, 127.0.0.1:{p2}");
    println!("  Sentinel protocol on 127.0.0.1:{sentinel_port}");
    println!("  Metrics on http://127.0.0.1:{admin_port}/metrics (also /healthz, /readyz)");
    println!();
    println!("Try:");
    println!("  valkey-cli -p {sentinel_port} SENTINEL get-master-addr-by-name mymaster");
    if index_port != 0 {
        println!("  valkyrie watch --addr 127.0.0.1:{index_port}   # pushed on every change");
    }
    println!("  kill -9 {master_pid}      # then ask again: a replica has taken over");
    match kill_after {
        Some(s) => println!("The master will be killed in {s} s."),
        None => println!("(or run with --kill-after N to have the demo kill it)"),
    }
    println!("Ctrl-C stops everything and removes the demo's files.");
    println!();

    let mut events = daemon.handle.events.subscribe();
    let kill_at = kill_after.map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut killed = false;
    loop {
        let kill = async {
            match kill_at {
                Some(t) if !killed => tokio::time::sleep_until(t).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut shutdown => break,
            _ = kill => {
                killed = true;
                println!(">>> killing the master (pid {master_pid})");
                let _ = master.start_kill();
            }
            e = events.recv() => match e {
                Ok(e) => println!("{:<34} {}", e.channel.as_str(), e.payload),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            },
        }
    }
    println!("stopping");
    daemon
        .stop()
        .await
        .map_err(|e| DemoError::Other(e.to_string()))?;
    let _ = master.start_kill();
    for r in &mut replicas {
        let _ = r.start_kill();
    }
    let _ = master.wait().await;
    for r in &mut replicas {
        let _ = r.wait().await;
    }
    Ok(())
}
