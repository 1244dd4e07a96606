//! The reconciler without an API server: each scenario runs reconciles
//! against a scripted server ([`server`]) that checks every request they
//! make, in order, and answers it, and fails on any other; the daemon's
//! runtime stands behind them (the groups the CRs become). Time is paused,
//! so a request that never comes fails at once in virtual time.
//!
//! - [`children`]: a new CR gets the finalizer, then its children by
//!   server-side apply and its status; a named Secret is neither read nor
//!   created by the reconcile (the group source reads it); TLS without TLS replication is refused.
//! - [`lifecycle`]: deletion, API errors and the retry they get, and
//!   leadership lost in the middle of a reconcile.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use ::kube::runtime::controller::Action;
use ::kube::runtime::reflector::ObjectRef;
use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;

use crate::kube::controller::{Context, FINALIZER, Settings, reconcile};
use crate::kube::crd::ValkeyCluster;
use crate::kube::elector::Leadership;
use crate::kube::error::Error;
use crate::kube::groups::{GroupSettings, Groups};
use crate::runtime::Handle;
use server::{ApiServer, Call};

mod children;
mod lifecycle;
mod server;

/// The term the reconciler starts in.
const TERM: u64 = 7;
/// The CR's group.
const GROUP: &str = "shop.cache";
/// The CR.
const CR: &str = "/apis/valkyrie.io/v1alpha1/namespaces/shop/valkeyclusters/cache";
/// Its status subresource.
const CR_STATUS: &str = "/apis/valkyrie.io/v1alpha1/namespaces/shop/valkeyclusters/cache/status";
/// The namespace's Secrets.
const SECRETS: &str = "/api/v1/namespaces/shop/secrets";
/// The generated Secret.
const AUTH_SECRET: &str = "/api/v1/namespaces/shop/secrets/cache-auth";
/// The ConfigMap.
const CONFIG_MAP: &str = "/api/v1/namespaces/shop/configmaps/cache-config";
/// The StatefulSet.
const STATEFUL_SET: &str = "/apis/apps/v1/namespaces/shop/statefulsets/cache";
const PODS: &str = "/api/v1/namespaces/shop/pods";
/// The namespace's Services.
const SERVICES: &str = "/api/v1/namespaces/shop/services";
/// The PodDisruptionBudget.
const PDB: &str = "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/cache";
/// The namespace's events.
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";

/// The wall clock of the conditions.
fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// [`wall`] as the conditions write it.
fn now() -> Time {
    Time(Timestamp::try_from(wall()).unwrap())
}

fn settings() -> Settings {
    Settings {
        namespace: None,
        cluster_domain: "cluster.local".into(),
        instance: "valkyrie-0".into(),
        wall_clock: Arc::new(wall),
        requeue_healthy: Duration::from_secs(300),
        requeue_progressing: Duration::from_secs(10),
        roll_patience: Duration::from_secs(600),
        endpoints_quiet: Duration::ZERO,
    }
}

/// `shop/cache`, 3 pods, generation 1, without the finalizer; `spec` is
/// merged into its spec.
fn cr(spec: Value) -> ValkeyCluster {
    let mut v = json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": {
            "name": "cache", "namespace": "shop", "uid": "u-1",
            "generation": 1, "resourceVersion": "100",
        },
        "spec": { "replicas": 3, "image": "valkey/valkey:8.1" },
    });
    for (k, val) in spec.as_object().expect("a spec object") {
        v["spec"][k] = val.clone();
    }
    serde_json::from_value(v).unwrap()
}

/// `vc` with the finalizer, as after the reconciler's first patch.
fn finalized(mut vc: ValkeyCluster) -> ValkeyCluster {
    vc.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    vc.metadata.resource_version = Some("101".into());
    vc
}

/// A Secret `name` holding `key`.
fn secret(name: &str, key: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name, "namespace": "shop", "uid": format!("u-{name}") },
        "data": { key: "c2VjcmV0" },
    })
}

/// One reconciler context on a scripted server, over a runtime.
struct Harness {
    server: ApiServer,
    ctx: Arc<Context>,
    groups: Arc<Groups>,
    leadership: watch::Sender<Leadership>,
    handle: Handle,
    stop: oneshot::Sender<()>,
    runtime: JoinHandle<Result<(), crate::runtime::RuntimeError>>,
    dir: PathBuf,
}

impl Harness {
    async fn start(tag: &str) -> Harness {
        let dir =
            std::env::temp_dir().join(format!("valkyrie-scenario-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = crate::config::Config {
            port: 0,
            dir: dir.clone(),
            ..crate::config::Config::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let (handle, runtime) = crate::runtime::start(config, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
        let (client, server) = server::pair();
        let groups = Arc::new(Groups::new(
            handle.clone(),
            client.clone(),
            GroupSettings::default(),
        ));
        let (leadership, rx) = watch::channel(Leadership::Leading { term: TERM });
        let ctx = Arc::new(Context::new(
            client,
            handle.clone(),
            groups.clone(),
            settings(),
            rx,
            TERM,
            Arc::new(AtomicU64::new(0)),
        ));
        Harness {
            server,
            ctx,
            groups,
            leadership,
            handle,
            stop,
            runtime,
            dir,
        }
    }

    /// Starts one reconcile of `vc`.
    fn reconcile(&self, vc: &ValkeyCluster) -> JoinHandle<Result<Action, Error>> {
        tokio::spawn(reconcile::reconcile(Arc::new(vc.clone()), self.ctx.clone()))
    }

    /// Whether the runtime monitors the CR's group, once the topology has
    /// caught up (within 5 virtual seconds).
    async fn monitors(&self, want: bool) -> bool {
        let mut topology = self.handle.topology.clone();
        let caught_up = topology.wait_for(|t| t.groups.contains_key(GROUP) == want);
        matches!(timeout(Duration::from_secs(5), caught_up).await, Ok(Ok(_)))
    }

    /// Monitors `vc`'s group as every Valkyrie's group source does: its
    /// password Secret (`secret_path`) is read, then its ConfigMap (absent).
    async fn monitor(&mut self, vc: &ValkeyCluster, secret_path: &str, secret_body: Value) {
        let groups = self.groups.clone();
        let shared = Arc::new(vc.clone());
        let applied = tokio::spawn(async move { groups.apply(shared, false).await });
        self.server
            .expect(Method::GET, secret_path)
            .await
            .reply(200, &secret_body);
        self.server
            .expect(Method::GET, CONFIG_MAP)
            .await
            .not_found();
        applied.await.unwrap();
        let key = ObjectRef::from_obj(vc);
        self.groups.relisted(&[key].into_iter().collect()).await;
        assert!(self.monitors(true).await, "the group is monitored");
    }

    /// Stops: no request may come after the reconciles ran.
    async fn finish(self) {
        let Harness {
            server,
            ctx,
            groups,
            stop,
            runtime,
            dir,
            ..
        } = self;
        drop(ctx);
        drop(groups);
        server.done().await;
        let _ = stop.send(());
        runtime.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The outcome of the reconcile `task`; fails on any request it makes
    /// meanwhile.
    async fn outcome(&mut self, task: JoinHandle<Result<Action, Error>>) -> Result<Action, Error> {
        tokio::select! {
            biased;
            ended = timeout(Duration::from_secs(30), task) => ended
                .expect("the reconcile ends")
                .expect("the reconcile does not panic"),
            call = self.server.next() => panic!("unexpected request {call:?}"),
        }
    }
}

/// `vc` with `status`, as the API server answers a status patch.
fn with_status(vc: &ValkeyCluster, status: &Value) -> Value {
    let mut v = serde_json::to_value(vc).unwrap();
    v["status"] = status.clone();
    v
}

/// The next request is an event of `type_` and `reason` on the CR,
/// reported by this Valkyrie; answered.
async fn expect_event(server: &mut ApiServer, type_: &str, reason: &str) -> Value {
    let call: Call = server.expect(Method::POST, EVENTS).await;
    call.assert_query(&[]);
    let body = call.body.clone();
    assert_eq!(body["type"], type_, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    assert_eq!(body["action"], "Reconcile");
    assert_eq!(body["reportingController"], "valkyrie");
    assert_eq!(body["reportingInstance"], "valkyrie-0");
    let regarding = &body["regarding"];
    assert_eq!(
        (
            &regarding["kind"],
            &regarding["namespace"],
            &regarding["name"],
            &regarding["uid"]
        ),
        (
            &json!("ValkeyCluster"),
            &json!("shop"),
            &json!("cache"),
            &json!("u-1")
        )
    );
    call.echo();
    body
}

/// The condition `type_` of a status body.
fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no condition {type_} in {status}"))
}
