//! The children of a `ValkeyCluster` written by the reconcile: the
//! generated Secret (created once, never rewritten), every other child by
//! server-side apply (the ConfigMap naming the master the peers converged
//! on), and the children the spec no longer asks for deleted.

use std::fmt::Debug;
use std::fmt::Write as _;

use ::kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use ::kube::{Resource, ResourceExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSetStatus;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::{Context, FIELD_MANAGER};
use super::status;
use crate::kube::crd::ValkeyCluster;
use crate::kube::error::Error;
use crate::kube::render::{self, Names, Observed};
use crate::topology::GroupView;

/// Applies the children; the StatefulSet's status as applied.
pub(super) async fn apply_children(
    vc: &ValkeyCluster,
    names: &Names,
    view: Option<&GroupView>,
    size: Option<i32>,
    ctx: &Context,
) -> Result<Option<StatefulSetStatus>, Error> {
    let ns = names.namespace.as_str();
    // The ConfigMap names the master the peers converged on: pods
    // (re)start as its replicas.
    let mut observed = vc.clone();
    if let Some(g) = view {
        let s = observed.status.get_or_insert_with(Default::default);
        s.current_master = Some(status::current_master(names, g));
        s.config_epoch = i64::try_from(g.config_epoch).ok();
    }
    let password = generated_password(vc, names, ctx).await?;
    let mut desired = render::render(
        &observed,
        &Observed {
            cluster_domain: &ctx.settings.cluster_domain,
            generated_password: password.as_deref(),
        },
    )?;
    // A scale-down waits for the master to leave the ordinals it removes.
    if let (Some(n), Some(spec)) = (size, desired.stateful_set.spec.as_mut()) {
        spec.replicas = Some(n);
    }
    if let Some(secret) = &desired.secret {
        create_secret(ctx, ns, secret).await?;
    }
    let sts = apply_one(ctx, ns, &desired.stateful_set).await?;
    apply_one(ctx, ns, &desired.headless_service).await?;
    apply_one(ctx, ns, &desired.master_service).await?;
    match &desired.replicas_service {
        Some(s) => drop(apply_one(ctx, ns, s).await?),
        None => delete_owned::<Service>(ctx, vc, ns, &names.replicas_service()).await?,
    }
    apply_one(ctx, ns, &desired.config_map).await?;
    match &desired.pod_disruption_budget {
        Some(p) => drop(apply_one(ctx, ns, p).await?),
        None => delete_owned::<PodDisruptionBudget>(ctx, vc, ns, &names.name).await?,
    }
    Ok(sts.status)
}

/// A fresh password when the CR names no Secret and `<name>-auth` does
/// not exist yet; `None` otherwise (an existing Secret is never rewritten).
async fn generated_password(
    vc: &ValkeyCluster,
    names: &Names,
    ctx: &Context,
) -> Result<Option<String>, Error> {
    let named = vc
        .spec
        .auth
        .as_ref()
        .is_some_and(|a| a.password_secret_ref.is_some());
    if named {
        return Ok(None);
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let name = names.auth_secret();
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| Error::api(format!("get Secret {}/{name}", names.namespace), e))?;
    if existing.is_some() {
        return Ok(None);
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(Some(bytes.iter().fold(
        String::with_capacity(64),
        |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        },
    )))
}

/// Creates the generated Secret; one created meanwhile is left as it is.
async fn create_secret(ctx: &Context, ns: &str, secret: &Secret) -> Result<(), Error> {
    ctx.gate()?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, secret).await {
        Ok(_) => {
            tracing::info!(secret = %secret.name_any(), namespace = ns, "password generated");
            Ok(())
        }
        Err(::kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::api(
            format!("create Secret {ns}/{}", secret.name_any()),
            e,
        )),
    }
}

/// Server-side applies `obj` (field manager `valkyrie`, forced).
async fn apply_one<K>(ctx: &Context, ns: &str, obj: &K) -> Result<K, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + Debug,
{
    ctx.gate()?;
    let name = obj.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map_err(|e| Error::api(format!("apply {} {ns}/{name}", K::kind(&())), e))
}

/// Deletes child `name` if it exists and `vc` controls it.
async fn delete_owned<K>(
    ctx: &Context,
    vc: &ValkeyCluster,
    ns: &str,
    name: &str,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let op = |verb: &str| format!("{verb} {} {ns}/{name}", K::kind(&()));
    let Some(child) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::api(op("get"), e))?
    else {
        return Ok(());
    };
    let uid = vc.metadata.uid.as_deref();
    let ours = child
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid);
    if !ours {
        return Ok(());
    }
    ctx.gate()?;
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(::kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::api(op("delete"), e)),
    }
}
