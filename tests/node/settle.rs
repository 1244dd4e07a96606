//! When a group has settled after a fault: every pod ready, every
//! monitor naming one master, every other pod its replica with the link
//! up; for Valkyrie also the role labels, the `-master` Service's one
//! endpoint and the CR's status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ::kube::api::{Api, DynamicObject, GroupVersionKind};
use ::kube::discovery::ApiResource;
use k8s_openapi::api::core::v1::Pod;

use super::groups::Group;
use super::setup::master_endpoints;
use crate::support::Client;
use crate::support::cluster::netns::Dialer;
use crate::support::cluster::{Cluster, pod_ready};

/// Waits until `group` is settled (see the module's doc); its master pod.
pub async fn settle(c: &Cluster, group: &Group, limit: Duration) -> Result<String, String> {
    let deadline = Instant::now() + limit;
    loop {
        match settled(c, group).await {
            Ok(master) => return Ok(master),
            Err(why) if Instant::now() > deadline => {
                return Err(format!(
                    "{} not settled within {limit:?}: {why}",
                    group.layout
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The master pod, if `group` is settled; else what is not.
async fn settled(c: &Cluster, group: &Group) -> Result<String, String> {
    let client = c.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &group.ns);
    let list = pods
        .list(&::kube::api::ListParams::default().labels(group.selector))
        .await
        .map_err(|e| e.to_string())?;
    let want = group.pods.load(Ordering::Relaxed);
    let replicas = (want - 1).to_string();
    if list.items.len() != want || !list.items.iter().all(pod_ready) {
        return Err(format!("not {want} ready pods"));
    }
    let master = monitors_master(c, group)?;
    let ip_of = |name: &str| {
        list.items
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .and_then(|p| p.status.as_ref()?.pod_ip.clone())
    };
    let master_ip = ip_of(&master).ok_or(format!("no pod {master}"))?;
    for pod in &list.items {
        let name = pod.metadata.name.clone().unwrap();
        let ip = ip_of(&name).unwrap();
        let info = info_replication(&c.net.dialer(), &ip, &group.password)?;
        let field = |f: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{f}:")))
                .unwrap_or("")
                .trim()
                .to_string()
        };
        if name == master {
            if field("role") != "master" || field("connected_slaves") != replicas {
                return Err(format!("{name} is not a master with {replicas} replicas"));
            }
        } else {
            let host = field("master_host");
            let follows = host == master_ip || host.starts_with(&format!("{master}."));
            if field("role") != "slave" || field("master_link_status") != "up" || !follows {
                return Err(format!(
                    "{name} is not a replica of {master} with its link up"
                ));
            }
        }
        if group.valkyrie {
            let role = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("valkyrie.io/role"))
                .map(String::as_str);
            let want = if name == master { "master" } else { "replica" };
            if role != Some(want) {
                return Err(format!("{name} is labelled {role:?}, not {want}"));
            }
        }
    }
    if group.valkyrie {
        let endpoints = master_endpoints(&client, &group.ns)
            .await
            .unwrap_or_default();
        if endpoints != [master_ip.clone()] {
            return Err(format!("the -master Service's endpoints are {endpoints:?}"));
        }
        let gvk = GroupVersionKind::gvk("valkyrie.io", "v1alpha1", "ValkeyCluster");
        let crs: Api<DynamicObject> =
            Api::namespaced_with(client, &group.ns, &ApiResource::from_gvk(&gvk));
        let cr = crs.get("cache").await.map_err(|e| e.to_string())?;
        let status = &cr.data["status"];
        if status["currentMaster"]["pod"] != master.as_str() || status["syncedReplicas"] != want - 1
        {
            return Err(format!("the CR's status: {status}"));
        }
    }
    Ok(master)
}

/// The master pod every monitor names (the first label of the host
/// `SENTINEL get-master-addr-by-name` gives).
fn monitors_master(c: &Cluster, group: &Group) -> Result<String, String> {
    let dialer = c.net.dialer();
    let mut named = BTreeSet::new();
    for host in &group.monitors {
        let ip = dialer.resolve(host)?;
        let s = dialer
            .connect(
                format!("{ip}:26379").parse().unwrap(),
                Duration::from_secs(2),
            )
            .map_err(|e| format!("{host}: {e}"))?;
        let reply = Client::over(s, Duration::from_secs(2))?.call(&[
            "SENTINEL",
            "get-master-addr-by-name",
            &group.master,
        ])?;
        let valkyrie_protocol::Frame::Array(parts) = reply else {
            return Err(format!("{host} knows no master"));
        };
        let addr = parts
            .first()
            .and_then(|f| f.as_bytes())
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or(format!("{host}: no address"))?;
        named.insert(addr.split('.').next().unwrap_or("").to_string());
    }
    if named.len() != 1 {
        return Err(format!("the monitors name {named:?}"));
    }
    Ok(named.pop_first().unwrap())
}

/// `INFO replication` of the Valkey at `ip`.
pub fn info_replication(dialer: &Dialer, ip: &str, password: &str) -> Result<String, String> {
    let reply = valkey(dialer, ip, password)?.call(&["INFO", "replication"])?;
    reply
        .as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .ok_or(format!("INFO at {ip}: {reply:?}"))
}

/// A logged-in connection to the Valkey at `ip`.
pub fn valkey(dialer: &Dialer, ip: &str, password: &str) -> Result<Client, String> {
    let s = dialer
        .connect(
            format!("{ip}:6379").parse().unwrap(),
            Duration::from_secs(2),
        )
        .map_err(|e| format!("{ip}: {e}"))?;
    let mut client = Client::over(s, Duration::from_secs(2))?;
    client.call(&["AUTH", password])?;
    Ok(client)
}
