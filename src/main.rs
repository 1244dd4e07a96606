//! The `valkyrie` command line: parse arguments, build, run.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use valkyrie::config::{self, Overrides};
use valkyrie::daemon::{self, Daemon};
use valkyrie::demo::{self, DemoOptions};
use valkyrie::telemetry;

/// A failover and discovery daemon for Valkey that speaks the Sentinel
/// protocol.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// A Sentinel configuration file (`sentinel.conf`), used unchanged.
    config: Option<PathBuf>,
    #[command(flatten)]
    overrides: Overrides,
    #[cfg(feature = "kubernetes")]
    #[command(flatten)]
    kube: valkyrie::kube::input::KubeArgs,
    /// Not in this build: it was built without the `kubernetes` feature.
    #[cfg(not(feature = "kubernetes"))]
    #[arg(long, env = "VALKYRIE_KUBERNETES", hide = true, action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    kubernetes: bool,
    /// Log format.
    #[arg(long, env = "VALKYRIE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Worker threads of the runtime (default: one per CPU the process
    /// may run on).
    #[arg(long, env = "VALKYRIE_WORKER_THREADS")]
    worker_threads: Option<std::num::NonZeroUsize>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Checks a configuration file: prints what Valkyrie would monitor and
    /// every note, or the first error with its file and line.
    CheckConfig {
        /// The configuration file.
        file: PathBuf,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Starts a local master and two replicas of valkey-server, monitored
    /// by Valkyrie, and shows a failover.
    Demo {
        /// Kill the master this many seconds after start.
        #[arg(long)]
        kill_after: Option<u64>,
        /// The valkey-server binary (default: $VALKEY_SERVER, then PATH).
        #[arg(long)]
        valkey_server: Option<PathBuf>,
        /// Sentinel port (default 26379 if free, else any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Run this many Valkyries as peers (with --kill-after, one of
        /// them is stopped first, then the master).
        #[arg(long, default_value_t = 1)]
        peers: usize,
    },
    /// Subscribes to a Valkyrie index port and prints every topology
    /// change of the named groups (globs allowed; default: all).
    Watch {
        /// The index port to connect to.
        #[arg(long, env = "VALKYRIE_WATCH_ADDR", default_value = "127.0.0.1:12120")]
        addr: String,
        /// One JSON object per line, for scripts.
        #[arg(long)]
        json: bool,
        /// Print the current state and exit instead of following changes.
        #[arg(long)]
        once: bool,
        /// Connect over TLS (an index port with `index-tls yes`); needs
        /// --cacert or --cacertdir.
        #[arg(long, requires = "ca")]
        tls: bool,
        /// PEM file of the CAs the server's certificate is checked
        /// against (read again at every reconnect).
        #[arg(long, value_name = "FILE", requires = "tls", group = "ca")]
        cacert: Option<PathBuf>,
        /// Directory of PEM CA files, as --cacert.
        #[arg(long, value_name = "DIR", requires = "tls", group = "ca")]
        cacertdir: Option<PathBuf>,
        /// Client certificate (PEM chain), for a server that checks
        /// clients (`tls-auth-clients yes`, the default); with --key.
        #[arg(long, value_name = "FILE", requires_all = ["tls", "key"])]
        cert: Option<PathBuf>,
        /// Private key of --cert (PEM: PKCS#8, PKCS#1 or SEC1).
        #[arg(long, value_name = "FILE", requires_all = ["tls", "cert"])]
        key: Option<PathBuf>,
        /// The name the server's certificate must hold (default: the host
        /// of --addr; an IP address is checked against the IP SANs).
        #[arg(long, value_name = "NAME", requires = "tls")]
        sni: Option<String>,
        /// Group names or globs (`*`, `?`).
        groups: Vec<String>,
    },
    /// Prints the `ValkeyCluster` CustomResourceDefinition as YAML (what
    /// deploy/05-crd.yaml holds).
    #[cfg(feature = "kubernetes")]
    Crd,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.log_format == "json";
    let workers = cli.worker_threads;
    match cli.command {
        Some(Command::CheckConfig { file, overrides }) => check_config(&file, overrides),
        Some(Command::Demo {
            kill_after,
            valkey_server,
            port,
            peers,
        }) => {
            telemetry::init_logging("warning", json);
            block_on(workers, async move {
                demo::run(DemoOptions {
                    valkey_server,
                    kill_after,
                    port,
                    peers,
                })
                .await
                .map_err(|e| e.to_string())
            })
        }
        Some(Command::Watch {
            addr,
            json: json_lines,
            once,
            tls,
            cacert,
            cacertdir,
            cert,
            key,
            sni,
            groups,
        }) => {
            let tls = match tls {
                false => None,
                true => match valkyrie::watch::TlsOptions::new(
                    &addr,
                    cacert,
                    cacertdir,
                    cert,
                    key,
                    sni.as_deref(),
                ) {
                    Ok(t) => Some(t),
                    // A usage error, as clap's own (exit status 2).
                    Err(e) => watch_usage_error(e),
                },
            };
            block_on(workers, async move {
                valkyrie::watch::run(valkyrie::watch::WatchOptions {
                    addr,
                    groups,
                    json: json_lines,
                    once,
                    tls,
                })
                .await
                .map_err(|e| e.to_string())
            })
        }
        #[cfg(feature = "kubernetes")]
        Some(Command::Crd) => match valkyrie::kube::crd::crd_yaml() {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot print the CRD: {e}");
                ExitCode::FAILURE
            }
        },
        None => {
            let Some(file) = cli.config else {
                eprintln!(
                    "usage: valkyrie <sentinel.conf> | valkyrie demo | valkyrie check-config <file> | valkyrie watch | valkyrie crd"
                );
                return ExitCode::from(2);
            };
            let (mut cfg, notes) = match config::parse_file(&file) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            cli.overrides.apply(&mut cfg);
            // As Valkey: a log file that cannot be opened stops the start,
            // and a relative path is under `dir` (Valkey works in `dir`).
            let logfile = match cfg.logfile.as_ref().map(|f| cfg.dir.join(f)) {
                None => None,
                Some(path) => match telemetry::LogFile::open(&path) {
                    Ok(f) => Some(std::sync::Arc::new(f)),
                    Err(e) => {
                        eprintln!("error: cannot open the log file {}: {e}", path.display());
                        return ExitCode::FAILURE;
                    }
                },
            };
            telemetry::init_logging_to(&cfg.loglevel, json, logfile);
            for n in &notes {
                if n.warning {
                    tracing::warn!("{}:{}: {}", file.display(), n.line, n.message);
                } else {
                    tracing::info!("{}:{}: {}", file.display(), n.line, n.message);
                }
            }
            #[cfg(not(feature = "kubernetes"))]
            if cli.kubernetes {
                eprintln!(
                    "error: --kubernetes: this valkyrie was built without the Kubernetes \
                     input (cargo build --features kubernetes)"
                );
                return ExitCode::from(2);
            }
            block_on(workers, async move {
                let mut d = Daemon::start(cfg).await.map_err(|e| e.to_string())?;
                #[cfg(feature = "kubernetes")]
                let input = match cli.kube.kubernetes {
                    true => Some(start_kubernetes(&d, &cli.kube).await?),
                    false => None,
                };
                let requested = d.handle.shutdown.clone();
                // A runtime that died ends the process with a failure, so
                // its supervisor restarts it.
                let died = tokio::select! {
                    _ = daemon::shutdown_signal() => {
                        tracing::info!("shutting down on a signal");
                        None
                    }
                    _ = requested.cancelled() => {
                        tracing::info!("shutting down (SHUTDOWN)");
                        None
                    }
                    e = d.wait() => Some(e),
                };
                // The reconciler stops and the Lease is released first, so
                // another Valkyrie takes over at once.
                #[cfg(feature = "kubernetes")]
                if let Some(input) = input {
                    input.shutdown().await;
                }
                let stopped = d.stop().await.map_err(|e| e.to_string());
                match died {
                    Some(e) => {
                        tracing::error!("exiting with a failure: {e}");
                        Err(e.to_string())
                    }
                    None => stopped,
                }
            })
        }
    }
}

/// Exits with `message` and the usage of `valkyrie watch`, as clap does
/// for its own usage errors (status 2).
fn watch_usage_error(message: String) -> ! {
    let mut cli = Cli::command();
    cli.build();
    match cli.find_subcommand_mut("watch") {
        Some(watch) => watch.error(clap::error::ErrorKind::ValueValidation, message),
        None => cli.error(clap::error::ErrorKind::ValueValidation, message),
    }
    .exit()
}

/// Starts the Kubernetes input (`--kubernetes`) next to the daemon.
#[cfg(feature = "kubernetes")]
async fn start_kubernetes(
    d: &Daemon,
    args: &valkyrie::kube::input::KubeArgs,
) -> Result<valkyrie::kube::input::Input, String> {
    use valkyrie::kube::input::{Input, KubeSettings, clients};
    let fail = |e: valkyrie::kube::error::Error| format!("--kubernetes: {e}");
    let (client, lease_client) = clients().await.map_err(fail)?;
    let mut settings = KubeSettings::from_args(args, &client);
    settings.lease_client = Some(lease_client);
    Input::start(d.handle.clone(), client, settings)
        .await
        .map_err(fail)
}

/// Runs `f` on a multi-threaded runtime of `workers` worker threads;
/// without a number, tokio's default: one per CPU the process may run on
/// (its affinity mask and cgroup quota count), or `TOKIO_WORKER_THREADS`.
fn block_on(
    workers: Option<std::num::NonZeroUsize>,
    f: impl std::future::Future<Output = Result<(), String>>,
) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(n) = workers {
        builder.worker_threads(n.get());
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(f) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check_config(file: &std::path::Path, overrides: Overrides) -> ExitCode {
    match config::parse_file(file) {
        Ok((mut cfg, notes)) => {
            overrides.apply(&mut cfg);
            for n in &notes {
                let kind = if n.warning { "warning" } else { "note" };
                println!("{kind}: {}:{}: {}", file.display(), n.line, n.message);
            }
            if let Some(conflict) = cfg.port_conflict() {
                eprintln!("error: {}: {conflict}", file.display());
                return ExitCode::FAILURE;
            }
            println!(
                "ok: sentinel port {}, index port {}, admin port {}, state in {}",
                cfg.port,
                cfg.index_port,
                cfg.admin_port,
                cfg.dir.display()
            );
            for g in &cfg.groups {
                println!(
                    "  {}: master {}:{}, down-after {} ms, failover-timeout {} ms, parallel-syncs {}",
                    g.name,
                    g.host,
                    g.port,
                    g.down_after.as_millis(),
                    g.failover_timeout.as_millis(),
                    g.parallel_syncs
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
