//! What every reconcile of one leadership term shares ([`Context`]),
//! the reconciler's [`Settings`], and the names it writes under.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::kube::ResourceExt;
use ::kube::api::{Api, Patch, PatchParams};
use ::kube::runtime::events::{Recorder, Reporter};
use ::kube::runtime::reflector::ObjectRef;
use ::kube::{Client, Resource};
use serde_json::json;
use tokio::sync::watch;

use super::super::crd::{GROUP, VERSION, ValkeyCluster};
use super::super::elector::{LeadDeadline, Leadership, WallClock};
use super::super::error::Error;
use super::super::groups::Groups;
use super::super::labels::RoleLabels;
use super::quiet::Quiet;
use crate::backoff::Backoff;
use crate::runtime::Handle;

/// The finalizer that keeps a deleted CR until its group is removed.
pub const FINALIZER: &str = "valkyrie.io/cleanup";
/// The field manager of every write but the retiring pods'.
pub const FIELD_MANAGER: &str = "valkyrie";
/// The field manager of `status.retiringPods` alone: the status the
/// reconcile ends with does not name that field, so under the same
/// manager each write of the one would drop the other.
pub const RETIRING_MANAGER: &str = "valkyrie-retiring";
/// The reporting controller of the events.
pub const REPORTER: &str = "valkyrie";

/// What the reconciler needs besides the CRs.
#[derive(Clone)]
pub struct Settings {
    /// Watch one namespace's CRs and children (`None`: all namespaces).
    pub namespace: Option<String>,
    /// The cluster's DNS domain, in the pods' names.
    pub cluster_domain: String,
    /// This Valkyrie's name in events (`reportingInstance`).
    pub instance: String,
    /// The wall clock of the conditions' transition times.
    pub wall_clock: WallClock,
    /// When a healthy CR is looked at again without a trigger.
    pub requeue_healthy: Duration,
    /// When a CR on its way somewhere is looked at again.
    pub requeue_progressing: Duration,
    /// How long a rolling update waits for a pod to come back before it
    /// reports itself stalled on it.
    pub roll_patience: Duration,
    /// How long the CR's pods must have been still, as endpoints see
    /// them, before the reconciler asks for a switchover (`quiet.rs`):
    /// kube-proxy's `minSyncPeriod` and a margin.
    pub endpoints_quiet: Duration,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("namespace", &self.namespace)
            .field("cluster_domain", &self.cluster_domain)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// Shared by every reconcile of one leadership term.
pub struct Context {
    pub(crate) client: Client,
    pub(crate) handle: Handle,
    pub(crate) groups: Arc<Groups>,
    pub(crate) labels: RoleLabels,
    pub(crate) recorder: Recorder,
    pub(crate) settings: Settings,
    leadership: watch::Receiver<Leadership>,
    term: u64,
    /// Until when the elector says we lead; `None` in tests without one.
    deadline: Option<LeadDeadline>,
    backoff: Mutex<HashMap<ObjectRef<ValkeyCluster>, Backoff>>,
    pub(super) quiet: Quiet,
    pub(super) reconciles: Arc<AtomicU64>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .field("term", &self.term)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context for `term`; `reconciles` counts the reconciles run.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        handle: Handle,
        groups: Arc<Groups>,
        settings: Settings,
        leadership: watch::Receiver<Leadership>,
        term: u64,
        reconciles: Arc<AtomicU64>,
    ) -> Context {
        let reporter = Reporter {
            controller: REPORTER.to_owned(),
            instance: Some(settings.instance.clone()),
        };
        Context {
            labels: RoleLabels::new(client.clone()),
            recorder: Recorder::new(client.clone(), reporter),
            client,
            handle,
            groups,
            settings,
            leadership,
            term,
            deadline: None,
            backoff: Mutex::new(HashMap::new()),
            quiet: Quiet::default(),
            reconciles,
        }
    }

    /// Also checks, before each write, that the elector's deadline has
    /// not passed (a process paused past it still reads its old term).
    pub fn with_deadline(mut self, deadline: LeadDeadline) -> Context {
        self.deadline = Some(deadline);
        self
    }

    /// Applies `status` (the fields `manager` owns) to `vc`'s status by
    /// server-side apply, once the term still holds.
    pub async fn apply_status(
        &self,
        vc: &ValkeyCluster,
        manager: &str,
        status: serde_json::Value,
    ) -> Result<(), Error> {
        self.gate()?;
        let ns = vc.namespace().unwrap_or_default();
        let name = vc.name_any();
        let api: Api<ValkeyCluster> = Api::namespaced(self.client.clone(), &ns);
        let patch = json!({
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": "ValkeyCluster",
            "status": status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|e| Error::api(format!("apply status of ValkeyCluster {ns}/{name}"), e))?;
        Ok(())
    }

    /// `Ok` while the term this reconciler started in still holds: checked
    /// before every write.
    pub fn gate(&self) -> Result<(), Error> {
        let term_holds = self.leadership.borrow().term() == Some(self.term);
        if term_holds && self.deadline.as_ref().is_none_or(LeadDeadline::leads_now) {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }

    /// An API handle on `K` in the watched namespace, or all of them.
    pub(super) fn watched<K>(&self) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match &self.settings.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    pub(super) fn succeeded(&self, key: &ObjectRef<ValkeyCluster>) {
        if let Ok(mut b) = self.backoff.lock() {
            b.remove(key);
        }
    }

    pub(super) fn next_delay(&self, key: &ObjectRef<ValkeyCluster>) -> Duration {
        let Ok(mut b) = self.backoff.lock() else {
            return Duration::from_secs(5);
        };
        b.entry(key.clone())
            .or_insert_with(|| Backoff::new(Duration::from_secs(1), Duration::from_secs(300), 20))
            .next_delay()
    }
}
