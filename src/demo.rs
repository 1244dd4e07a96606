//! `valkyrie demo`: a local master and two replicas of `valkey-server` on
//! free loopback ports, monitored by Valkyrie, with its Sentinel port open.
//! Prints what to try, streams the events, optionally kills the master
//! after some seconds, and cleans everything up on Ctrl-C.
//!
//! With `--peers N`, N Valkyries (quorum N/2+1) monitor the same master
//! and find each other through hellos; `--kill-after S` then stops one
//! Valkyrie at S seconds and kills the master 5 seconds later, so the
//! election of the remaining ones shows in the events.

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
    /// How many Valkyries monitor the master together (1: no peers).
    pub peers: usize,
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
    let bin = find_valkey(opts.valkey_server.clone()).ok_or(DemoError::NoValkey)?;
    let dir = std::env::temp_dir().join(format!("valkyrie-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| DemoError::Other(e.to_string()))?;
    let result = run_in(&bin, &dir, &opts).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run_in(bin: &Path, dir: &Path, opts: &DemoOptions) -> Result<(), DemoError> {
    let (kill_after, port) = (opts.kill_after, opts.port);
    let peers = opts.peers.clamp(1, 9);
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
    // The index port only if its default is free: a second demo on the
    // same host still starts.
    let index_port = if StdListener::bind("127.0.0.1:12120").is_ok() {
        12120
    } else {
        0
    };
    let quorum = u32::try_from(peers / 2 + 1).unwrap_or(1);
    let mut daemons = Vec::with_capacity(peers);
    let mut ports = Vec::with_capacity(peers);
    for i in 0..peers {
        let mut group = GroupConfig::new("mymaster", "127.0.0.1", pm, quorum);
        group.down_after = Duration::from_millis(1000);
        group.failover_timeout = Duration::from_millis(10_000);
        group.write_fence.mode = crate::core::FenceMode::Auto;
        let own_dir = dir.join(format!("valkyrie-{}", i + 1));
        std::fs::create_dir_all(&own_dir).map_err(|e| DemoError::Other(e.to_string()))?;
        let sp = if i == 0 { sentinel_port } else { free_port()? };
        // Only the first Valkyrie serves metrics and the index port.
        let config = Config {
            port: sp,
            admin_port: if i == 0 { admin_port } else { 0 },
            index_port: if i == 0 { index_port } else { 0 },
            bind: vec!["127.0.0.1".into()],
            dir: own_dir,
            groups: vec![group],
            ..Config::default()
        };
        let daemon = Daemon::start(config)
            .await
            .map_err(|e| DemoError::Other(e.to_string()))?;
        daemons.push(Some(daemon));
        ports.push(sp);
    }
    let master_pid = master.id().unwrap_or(0);
    println!();
    println!("Valkyrie demo");
    println!("  master   127.0.0.1:{pm} (pid {master_pid})");
    println!("  replicas 127.0.0.1:{p1}, 127.0.0.1:{p2}");
    if peers == 1 {
        println!("  Sentinel protocol on 127.0.0.1:{sentinel_port}");
    } else {
        for (i, p) in ports.iter().enumerate() {
            println!("  Valkyrie v{} on 127.0.0.1:{p} (quorum {quorum})", i + 1);
        }
    }
    println!(
        "  Status page on http://127.0.0.1:{admin_port}/ (live topology and failover timeline)"
    );
    println!(
        "  Metrics on http://127.0.0.1:{admin_port}/metrics (also /healthz, /readyz, /api/v1/groups)"
    );
    println!();
    println!("Try:");
    println!("  valkey-cli -p {sentinel_port} SENTINEL get-master-addr-by-name mymaster");
    if peers > 1 {
        println!(
            "  valkey-cli -p {sentinel_port} SENTINEL sentinels mymaster   # the peers it found"
        );
    }
    if index_port != 0 {
        println!("  valkyrie watch --addr 127.0.0.1:{index_port}   # pushed on every change");
    }
    println!("  kill -9 {master_pid}      # then ask again: a replica has taken over");
    match (kill_after, peers) {
        (Some(s), 1) => println!("The master will be killed in {s} s."),
        (Some(s), _) => println!(
            "Valkyrie v{peers} will be stopped in {s} s, and the master killed 5 s later: \
             the other Valkyries elect a leader among themselves."
        ),
        (None, _) => println!("(or run with --kill-after N to have the demo kill it)"),
    }
    println!("Ctrl-C stops everything and removes the demo's files.");
    println!();

    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    for (i, d) in daemons.iter().enumerate() {
        let Some(d) = d else { continue };
        let mut rx = d.handle.events.subscribe();
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(e) => {
                        if tx.send((i, e)).is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                }
            }
        });
    }
    drop(tx);
    let start = tokio::time::Instant::now();
    let (stop_peer_at, kill_at) = match (kill_after, peers) {
        (None, _) => (None, None),
        (Some(s), 1) => (None, Some(start + Duration::from_secs(s))),
        (Some(s), _) => (
            Some(start + Duration::from_secs(s)),
            Some(start + Duration::from_secs(s + 5)),
        ),
    };
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let (mut killed, mut stopped) = (false, false);
    loop {
        let kill = async {
            match kill_at {
                Some(t) if !killed => tokio::time::sleep_until(t).await,
                _ => std::future::pending().await,
            }
        };
        let stop_peer = async {
            match stop_peer_at {
                Some(t) if !stopped => tokio::time::sleep_until(t).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut shutdown => break,
            _ = stop_peer => {
                stopped = true;
                println!(">>> stopping Valkyrie v{peers}");
                if let Some(d) = daemons.last_mut().and_then(Option::take) {
                    let _ = d.stop().await;
                }
            }
            _ = kill => {
                killed = true;
                println!(">>> killing the master (pid {master_pid})");
                let _ = master.start_kill();
            }
            e = events.recv() => match e {
                Some((i, e)) if peers > 1 => {
                    println!("v{} {:<34} {}", i + 1, e.channel.as_str(), e.payload);
                }
                Some((_, e)) => println!("{:<34} {}", e.channel.as_str(), e.payload),
                None => break,
            },
        }
    }
    println!("stopping");
    for d in daemons.into_iter().flatten() {
        d.stop()
            .await
            .map_err(|e| DemoError::Other(e.to_string()))?;
    }
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
