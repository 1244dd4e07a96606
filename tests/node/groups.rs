//! The groups the node tests put under load, Valkyrie's and the Sentinel
//! layout's, with their writers: what `faults.rs` and `operations.rs`
//! share.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;

use ::kube::api::Api;
use k8s_openapi::api::core::v1::Event;

use super::classic;
use super::setup::password;
use super::writer::{Route, Writer};
use crate::support::cluster::Cluster;

/// One group under test, Valkyrie's or the Sentinel layout's.
pub struct Group {
    /// "Valkyrie" or "Sentinel layout".
    pub layout: &'static str,
    pub ns: String,
    /// The pods' label selector.
    pub selector: &'static str,
    /// The monitors' addresses (pod DNS names, port 26379).
    pub monitors: Vec<String>,
    /// The master's name at the monitors.
    pub master: String,
    pub password: String,
    pub valkyrie: bool,
    /// How many pods it has now (a scale changes it).
    pub pods: AtomicUsize,
}

impl Group {
    /// The example `ValkeyCluster` `cache` in `ns`, monitored by the three
    /// Valkyries of `deploy/`.
    pub async fn valkyrie(c: &Cluster, ns: String) -> Group {
        Group {
            layout: "Valkyrie",
            selector: "app.kubernetes.io/instance=cache",
            monitors: (0..3)
                .map(|i| format!("valkyrie-{i}.valkyrie-headless.valkyrie.svc.cluster.local"))
                .collect(),
            master: format!("{ns}.cache"),
            password: password(c, &ns, "cache-auth").await,
            valkyrie: true,
            pods: AtomicUsize::new(3),
            ns,
        }
    }

    /// The Sentinel layout (`classic.rs`) in `ns`.
    pub fn classic(ns: String) -> Group {
        Group {
            layout: "Sentinel layout",
            selector: "app=classic",
            monitors: (0..3)
                .map(|i| format!("classic-{i}.classic-headless.{ns}.svc.cluster.local"))
                .collect(),
            master: classic::MASTER.into(),
            password: classic::PASSWORD.into(),
            valkyrie: false,
            pods: AtomicUsize::new(3),
            ns,
        }
    }

    /// The reasons of the events in its namespace.
    pub async fn event_reasons(&self, c: &Cluster) -> BTreeSet<String> {
        let events: Api<Event> = Api::namespaced(c.client().await, &self.ns);
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect()
    }

    /// Its writers: through the `-master` Service (Valkyrie only: the
    /// layout has no Service that follows the master) and through the
    /// Sentinel port's Service.
    pub fn writers(&self, c: &Cluster) -> Vec<Writer> {
        let mut writers = Vec::new();
        let sentinels = if self.valkyrie {
            writers.push(Writer::start(
                c.net.dialer(),
                Route::Service(format!("cache-master.{}.svc.cluster.local", self.ns)),
                "via-service",
                &self.password,
            ));
            "valkyrie.valkyrie.svc.cluster.local".to_owned()
        } else {
            format!("classic-sentinel.{}.svc.cluster.local", self.ns)
        };
        writers.push(Writer::start(
            c.net.dialer(),
            Route::Sentinel {
                host: sentinels,
                master: self.master.clone(),
            },
            "via-sentinel",
            &self.password,
        ));
        writers
    }
}

/// Prints the last `lines` of each Valkyrie's log (when Valkyrie did not
/// settle or an operation failed).
pub fn print_valkyrie_logs(c: &Cluster, lines: u32) {
    for i in 0..3 {
        let pod = format!("valkyrie-{i}");
        let out = c
            .kubectl()
            .args(["logs", "-n", "valkyrie", &pod, "--tail", &lines.to_string()])
            .output()
            .unwrap();
        println!("--- {pod}:\n{}", String::from_utf8_lossy(&out.stdout));
    }
}

/// Prints each planned switchover's timeline from the Valkyries' logs
/// (where each master move's write stall went).
pub fn print_switchover_timelines(c: &Cluster) {
    for i in 0..3 {
        let pod = format!("valkyrie-{i}");
        let out = c
            .kubectl()
            .args(["logs", "-n", "valkyrie", &pod])
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line.contains("switchover: ") || line.contains("route ") {
                println!("{pod}: {line}");
            }
        }
    }
}
