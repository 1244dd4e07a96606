//! `valkyrie --kubernetes`: the Kubernetes input, wired.
//!
//! On **every** Valkyrie, leader or not:
//! - a watcher over the `ValkeyCluster`s (all namespaces, or one) makes
//!   each CR's group a group of this daemon ([`Groups`]), next to the
//!   sentinel.conf ones; after each full (re)list the groups of CRs that
//!   are gone are removed, and a CR being deleted leaves monitoring at
//!   once. A change to a Secret a CR's group reads (its password, its TLS
//!   certificate) applies that CR again at once (a metadata-only watch of
//!   the Secrets); every CR is applied again every `resync` too, and the
//!   ones not up to date every `retry`;
//! - the role labels move in the failover step of the peer that leads the
//!   failover ([`RoleLabels`], installed as the runtime's role hook).
//!
//! One of them, the holder of the Lease `valkyrie-leader` in the daemon's
//! namespace ([`Elector`]), also runs the reconciler
//! ([`controller::run`]): started when it starts leading, dropped — its
//! reconciles cancelled — as soon as it stops. On shutdown (SIGTERM) the
//! reconciler stops first, then the Lease is released, so another Valkyrie
//! takes over in about one retry period (2 s) instead of the Lease's 15 s.
//!
//! Failover decisions never come from here: the Lease elects only the
//! writer of child objects and CR status (`docs/peering.md`).

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ::kube::Client;
use ::kube::api::{Api, PartialObjectMeta};
use ::kube::runtime::reflector::ObjectRef;
use ::kube::runtime::{WatchStreamExt, watcher};
use futures_util::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::controller::{self, Context};
use super::crd::ValkeyCluster;
use super::elector::{self, Elector, LEASE_NAME, Leadership, Timings};
use super::error::Error;
use super::groups::{GroupSettings, Groups};
use super::labels::RoleLabels;
use crate::runtime::Handle;

/// The `--kubernetes` flags (`valkyrie --help`).
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct KubeArgs {
    /// Also monitor the groups of ValkeyCluster custom resources (next to
    /// the configuration file's), and reconcile them while holding the
    /// Lease valkyrie-leader in $POD_NAMESPACE. Credentials: in-cluster,
    /// else $KUBECONFIG.
    #[arg(long, env = "VALKYRIE_KUBERNETES", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub kubernetes: bool,
    /// Only the ValkeyClusters of this namespace (default: all namespaces).
    #[arg(long, env = "VALKYRIE_KUBERNETES_NAMESPACE")]
    pub kubernetes_namespace: Option<String>,
    /// The quorum of every ValkeyCluster's group: a majority of the
    /// Valkyries that peer (2 for the three of deploy/; 1 for a lone one).
    #[arg(long, env = "VALKYRIE_KUBERNETES_QUORUM", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kubernetes_quorum: u32,
    /// The cluster's DNS domain, in the Valkey pods' names.
    #[arg(long, env = "CLUSTER_DOMAIN", default_value = "cluster.local")]
    pub cluster_domain: String,
    /// Milliseconds a ValkeyCluster's pods must have been still (no pod
    /// Ready, terminating or relabelled) before the reconciler asks for a
    /// switchover, so that kube-proxy programs the `-master` Service's move
    /// at once: its `minSyncPeriod` (1 s by default) and a margin. 0 does
    /// not wait.
    #[arg(long, env = "VALKYRIE_KUBERNETES_ENDPOINTS_QUIET_MS", default_value_t = 1100,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub kubernetes_endpoints_quiet_ms: u64,
    /// Milliseconds a switchover of a ValkeyCluster waits, writes going
    /// on, for its `-master` Service to reach the chosen replica before
    /// it pauses writes, so that clients the switchover disconnects
    /// reconnect to the new master at once. 0 moves the Service after the
    /// promotion instead.
    #[arg(long, env = "VALKYRIE_KUBERNETES_ROUTE_WAIT_MS", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub kubernetes_route_wait_ms: u64,
}

/// What the input needs besides the daemon and a client.
#[derive(Clone)]
pub struct KubeSettings {
    /// Only this namespace's CRs (`None`: all).
    pub namespace: Option<String>,
    /// Quorum and DNS domain of the groups.
    pub groups: GroupSettings,
    /// The Lease's namespace (`$POD_NAMESPACE`).
    pub lease_namespace: String,
    /// This Valkyrie's name (`$POD_NAME`, else the host name): the start
    /// of its Lease identity and its name in events.
    pub pod_name: String,
    /// The Lease's timings.
    pub timings: Timings,
    /// The client of the Lease (no retries, short timeouts); `None`: the
    /// input's client.
    pub lease_client: Option<Client>,
    /// Every CR is applied again this often.
    pub resync: Duration,
    /// CRs not up to date are applied again this often.
    pub retry: Duration,
    /// How long a CR's pods must have been still before the reconciler
    /// asks for a switchover (`controller/quiet.rs`).
    pub endpoints_quiet: Duration,
}

impl fmt::Debug for KubeSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeSettings")
            .field("namespace", &self.namespace)
            .field("groups", &self.groups)
            .field("lease_namespace", &self.lease_namespace)
            .field("pod_name", &self.pod_name)
            .field("timings", &self.timings)
            .field("resync", &self.resync)
            .field("retry", &self.retry)
            .field("endpoints_quiet", &self.endpoints_quiet)
            .finish_non_exhaustive()
    }
}

impl KubeSettings {
    /// Settings for a Valkyrie named `pod_name` whose Lease lives in
    /// `lease_namespace`, with the default timings.
    pub fn new(lease_namespace: impl Into<String>, pod_name: impl Into<String>) -> KubeSettings {
        KubeSettings {
            namespace: None,
            groups: GroupSettings::default(),
            lease_namespace: lease_namespace.into(),
            pod_name: pod_name.into(),
            timings: Timings::default(),
            lease_client: None,
            resync: Duration::from_secs(30),
            retry: Duration::from_secs(2),
            endpoints_quiet: Duration::from_millis(1100),
        }
    }

    /// From the flags and the environment (`POD_NAMESPACE`, else the
    /// client's default namespace; `POD_NAME`, else `HOSTNAME`).
    pub fn from_args(args: &KubeArgs, client: &Client) -> KubeSettings {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let lease_namespace =
            env("POD_NAMESPACE").unwrap_or_else(|| client.default_namespace().to_owned());
        let pod_name = env("POD_NAME")
            .or_else(|| env("HOSTNAME"))
            .or_else(|| {
                let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
                Some(h.trim().to_owned()).filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "valkyrie".to_owned());
        let mut s = KubeSettings::new(lease_namespace, pod_name);
        s.namespace = args.kubernetes_namespace.clone();
        s.groups = GroupSettings {
            quorum: args.kubernetes_quorum,
            cluster_domain: args.cluster_domain.clone(),
            route_wait: Duration::from_millis(args.kubernetes_route_wait_ms),
        };
        s.endpoints_quiet = Duration::from_millis(args.kubernetes_endpoints_quiet_ms);
        s
    }
}

/// The input's client and the Lease's (no retries, 2 s read timeout: a
/// retried renew must not outlive the renew deadline), from the in-cluster
/// configuration or `$KUBECONFIG`.
pub async fn clients() -> Result<(Client, Client), Error> {
    let config = ::kube::Config::infer()
        .await
        .map_err(|e| Error::Config(e.to_string()))?;
    let main = Client::try_from(config.clone()).map_err(|e| Error::Config(e.to_string()))?;
    let mut lease = config;
    lease.default_retry = false;
    lease.read_timeout = Some(Duration::from_secs(2));
    let lease = Client::try_from(lease).map_err(|e| Error::Config(e.to_string()))?;
    Ok((main, lease))
}

/// A running input.
#[derive(Debug)]
pub struct Input {
    stop: CancellationToken,
    task: JoinHandle<()>,
    leadership: watch::Receiver<Leadership>,
    reconciles: Arc<AtomicU64>,
    identity: String,
}

impl Input {
    /// Starts the input for the daemon behind `handle`.
    pub async fn start(
        handle: Handle,
        client: Client,
        settings: KubeSettings,
    ) -> Result<Input, Error> {
        let hook = Arc::new(RoleLabels::new(client.clone()));
        handle
            .set_role_hook(hook)
            .await
            .map_err(|r| Error::Refused {
                group: String::new(),
                refusal: r,
            })?;
        let groups = Arc::new(Groups::new(
            handle.clone(),
            client.clone(),
            settings.groups.clone(),
        ));
        let mut lease_settings =
            elector::Settings::new(LEASE_NAME, elector::identity(&settings.pod_name)?);
        lease_settings.timings = settings.timings;
        let identity = lease_settings.identity.clone();
        let lease_client = settings
            .lease_client
            .clone()
            .unwrap_or_else(|| client.clone());
        let lease: Api<Lease> = Api::namespaced(lease_client, &settings.lease_namespace);
        let elector = Elector::spawn(lease, lease_settings)?;
        let leadership = elector.leadership();
        let stop = CancellationToken::new();
        let reconciles = Arc::new(AtomicU64::new(0));
        let ctl = controller::Settings {
            namespace: settings.namespace.clone(),
            cluster_domain: settings.groups.cluster_domain.clone(),
            instance: settings.pod_name.clone(),
            wall_clock: elector::system_wall_clock(),
            requeue_healthy: Duration::from_secs(300),
            requeue_progressing: Duration::from_secs(10),
            roll_patience: Duration::from_secs(600),
            endpoints_quiet: settings.endpoints_quiet,
        };
        let source = tokio::spawn(watch_clusters(
            groups.clone(),
            cluster_api(&client, settings.namespace.as_deref()),
            settings.resync,
            settings.retry,
            stop.clone(),
        ));
        let secrets = tokio::spawn(watch_secrets(
            groups.clone(),
            scoped(&client, settings.namespace.as_deref()),
            stop.clone(),
        ));
        let lead = Leader {
            client,
            handle,
            groups,
            settings: ctl,
            reconciles: reconciles.clone(),
            deadline: elector.deadline(),
        };
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            lead.follow(elector.leadership(), stopping.clone()).await;
            match elector.release().await {
                Ok(r) => tracing::info!("Lease {LEASE_NAME}: {r:?} on shutdown"),
                Err(e) => tracing::warn!("Lease {LEASE_NAME} not released: {e}"),
            }
            stopping.cancel();
            let _ = source.await;
            let _ = secrets.await;
        });
        tracing::info!(identity, "Kubernetes input started");
        Ok(Input {
            stop,
            task,
            leadership,
            reconciles,
            identity,
        })
    }

    /// This Valkyrie's leadership as it changes.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// How many reconciles this Valkyrie has run.
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// Its Lease identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Stops the reconciler and the watcher, then releases the Lease.
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Err(e) = self.task.await {
            tracing::warn!("Kubernetes input ended abnormally: {e}");
        }
    }
}

/// Runs the input until `shutdown` resolves, then releases the Lease.
pub async fn run(
    handle: Handle,
    client: Client,
    settings: KubeSettings,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let input = Input::start(handle, client, settings).await?;
    shutdown.await;
    input.shutdown().await;
    Ok(())
}

fn cluster_api(client: &Client, namespace: Option<&str>) -> Api<ValkeyCluster> {
    scoped(client, namespace)
}

/// `K` in one namespace, or in all.
fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: ::kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as ::kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What the reconciler is started with at each term.
struct Leader {
    client: Client,
    handle: Handle,
    groups: Arc<Groups>,
    settings: controller::Settings,
    reconciles: Arc<AtomicU64>,
    /// The elector's deadline, checked before every write.
    deadline: elector::LeadDeadline,
}

impl Leader {
    /// Runs the reconciler during each term this Valkyrie leads, until
    /// `stop`.
    async fn follow(&self, mut leadership: watch::Receiver<Leadership>, stop: CancellationToken) {
        loop {
            let term = tokio::select! {
                l = leadership.wait_for(Leadership::is_leading) => match l {
                    Ok(l) => l.term().unwrap_or_default(),
                    Err(_) => return,
                },
                () = stop.cancelled() => return,
            };
            tracing::info!(term, "leading: the reconciler starts");
            let ctx = Arc::new(
                Context::new(
                    self.client.clone(),
                    self.handle.clone(),
                    self.groups.clone(),
                    self.settings.clone(),
                    leadership.clone(),
                    term,
                    self.reconciles.clone(),
                )
                .with_deadline(self.deadline.clone()),
            );
            tokio::select! {
                () = controller::run(ctx) => tracing::warn!("the reconciler ended"),
                _ = leadership.wait_for(|l| l.term() != Some(term)) => {
                    tracing::info!(term, "no longer leading: the reconciler stops");
                }
                () = stop.cancelled() => {
                    tracing::info!(term, "shutting down: the reconciler stops");
                    return;
                }
            }
        }
    }
}

/// Every Valkyrie's view of the CRs: their groups follow them.
async fn watch_clusters(
    groups: Arc<Groups>,
    api: Api<ValkeyCluster>,
    resync: Duration,
    retry: Duration,
    stop: CancellationToken,
) {
    let stream = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut listed: Option<HashSet<ObjectRef<ValkeyCluster>>> = None;
    let mut resync_tick = tokio::time::interval(resync);
    let mut retry_tick = tokio::time::interval(retry);
    resync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    retry_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = resync_tick.tick() => groups.resync(false).await,
            _ = retry_tick.tick() => groups.resync(true).await,
            event = stream.next() => match event {
                None => return,
                Some(Err(e)) => tracing::warn!("watching ValkeyClusters: {e}"),
                Some(Ok(watcher::Event::Init)) => listed = Some(HashSet::new()),
                Some(Ok(watcher::Event::InitApply(vc))) => {
                    if let Some(seen) = listed.as_mut() {
                        seen.insert(ObjectRef::from_obj(&vc));
                    }
                    groups.apply(Arc::new(vc), false).await;
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    let seen = listed.take().unwrap_or_default();
                    tracing::info!(clusters = seen.len(), "ValkeyClusters listed");
                    groups.relisted(&seen).await;
                }
                Some(Ok(watcher::Event::Apply(vc))) => groups.apply(Arc::new(vc), false).await,
                Some(Ok(watcher::Event::Delete(vc))) => {
                    groups.forget(&ObjectRef::from_obj(&vc)).await;
                }
            },
        }
    }
}

/// Every Valkyrie's view of the Secrets, metadata only (no Secret's
/// content is streamed or held): a change to one a CR's group reads
/// applies that CR again at once. The initial list is skipped, the CRs'
/// own list applies them; a change missed while the watch reconnects is
/// caught by the resync.
async fn watch_secrets(
    groups: Arc<Groups>,
    api: Api<PartialObjectMeta<Secret>>,
    stop: CancellationToken,
) {
    let stream = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            event = stream.next() => match event {
                None => return,
                Some(Err(e)) => tracing::debug!("watching Secrets: {e}"),
                Some(Ok(watcher::Event::Apply(meta) | watcher::Event::Delete(meta))) => {
                    if let (Some(ns), Some(name)) = (&meta.metadata.namespace, &meta.metadata.name) {
                        groups.secret_changed(ns, name).await;
                    }
                }
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests;
