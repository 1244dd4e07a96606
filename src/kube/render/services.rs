//! The Services (`<name>-headless`, `<name>-master`, `<name>-replicas`)
//! and the PodDisruptionBudget `<name>`.
//!
//! The `-replicas` selector is static: a failover moves the role label on
//! the pods. The `-master` Service is rendered without one: its selector
//! names the master's pod, and only the role writer (`kube/labels.rs`,
//! fenced by the config epoch) writes it, so that a failover changes the
//! Service's endpoints in one write and an apply never sets it back.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::context::{Ctx, non_empty};
use super::names::{ROLE_REPLICA, VALKEY_PORT};

fn ports() -> Option<Vec<ServicePort>> {
    Some(vec![ServicePort {
        name: Some("valkey".to_owned()),
        port: VALKEY_PORT,
        target_port: Some(IntOrString::String("valkey".to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }])
}

/// `<name>-headless`: a DNS name per pod, published before the pod is
/// Ready (replication and Valkyrie need the name of a pod still loading).
pub(crate) fn headless(ctx: &Ctx<'_>) -> Service {
    Service {
        metadata: ctx.meta(ctx.names.headless()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(ctx.names.selector_labels()),
            ports: ports(),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// `<name>-master`, with the type and annotations of `spec.service`; its
/// selector (the master's pod) is the role writer's.
pub(crate) fn master(ctx: &Ctx<'_>) -> Service {
    let service = ctx.vc.spec.service.as_ref();
    let mut metadata = ctx.meta(ctx.names.master_service());
    metadata.annotations = service.and_then(|s| non_empty(s.annotations.clone()));
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: Some(
                service
                    .map(|s| s.type_)
                    .unwrap_or_default()
                    .as_str()
                    .to_owned(),
            ),
            ports: ports(),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// `<name>-replicas`: the pods labelled `valkyrie.io/role=replica`,
/// unless `spec.service.replicasService` is false.
pub(crate) fn replicas(ctx: &Ctx<'_>) -> Option<Service> {
    let wanted = ctx
        .vc
        .spec
        .service
        .as_ref()
        .is_none_or(|s| s.replicas_service);
    wanted.then(|| Service {
        metadata: ctx.meta(ctx.names.replicas_service()),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(ctx.names.role_selector(ROLE_REPLICA)),
            ports: ports(),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    })
}

/// The PodDisruptionBudget, unless `spec.podDisruptionBudget.enabled` is
/// false: `maxUnavailable: 1` by default, and a pod that is not Ready may
/// always be evicted (a stuck pod must not block a node drain).
pub(crate) fn pod_disruption_budget(ctx: &Ctx<'_>) -> Option<PodDisruptionBudget> {
    let pdb = ctx.vc.spec.pod_disruption_budget.as_ref();
    if pdb.is_some_and(|p| !p.enabled) {
        return None;
    }
    let min_available = pdb.and_then(|p| p.min_available.clone());
    let max_unavailable = pdb
        .and_then(|p| p.max_unavailable.clone())
        .or_else(|| min_available.is_none().then_some(IntOrString::Int(1)));
    Some(PodDisruptionBudget {
        metadata: ctx.meta(ctx.names.name.clone()),
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(ctx.names.selector_labels()),
                ..LabelSelector::default()
            }),
            min_available,
            max_unavailable,
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".to_owned()),
        }),
        ..PodDisruptionBudget::default()
    })
}
