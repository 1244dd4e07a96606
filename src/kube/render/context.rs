//! What every renderer reads ([`Ctx`]: the CR, its names, the owner
//! reference, what was observed), why a render fails ([`RenderError`]),
//! and the helpers the renderers share.

use std::collections::BTreeMap;

use ::kube::Resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::names::Names;
use crate::kube::crd::ValkeyCluster;

/// What a render needs that the CR does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed<'a> {
    /// The cluster's DNS domain (`cluster.local` unless configured).
    pub cluster_domain: &'a str,
    /// A fresh password for the generated Secret, passed only when that
    /// Secret does not exist yet and the CR names none: an existing
    /// Secret is never rewritten.
    pub generated_password: Option<&'a str>,
}

/// Why a CR cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    /// The CR lacks a name, a namespace or a uid (one read from the API
    /// server has all three).
    #[error("the ValkeyCluster has no metadata.{0}")]
    MissingMetadata(&'static str),
    /// A `spec.config` entry the CRD's rules should have refused.
    #[error("spec.config: {0}")]
    Config(String),
}

/// What every renderer reads: the CR, its names, the owner reference.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) vc: &'a ValkeyCluster,
    pub(crate) names: Names,
    pub(crate) owner: OwnerReference,
    pub(crate) observed: &'a Observed<'a>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(
        vc: &'a ValkeyCluster,
        observed: &'a Observed<'a>,
    ) -> Result<Self, RenderError> {
        let name = vc
            .metadata
            .name
            .as_deref()
            .ok_or(RenderError::MissingMetadata("name"))?;
        let namespace = vc
            .metadata
            .namespace
            .as_deref()
            .ok_or(RenderError::MissingMetadata("namespace"))?;
        let mut owner = vc
            .controller_owner_ref(&())
            .ok_or(RenderError::MissingMetadata("uid"))?;
        // As every controller's children: garbage collection in the
        // foreground waits for them.
        owner.block_owner_deletion = Some(true);
        Ok(Self {
            vc,
            names: Names::new(namespace, name),
            owner,
            observed,
        })
    }

    /// The metadata of child `name`: namespace, labels, owner.
    pub(crate) fn meta(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.names.namespace.clone()),
            labels: Some(self.names.labels()),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// `None` for an empty map, so that it is left out of the object.
pub(crate) fn non_empty<K, V>(map: BTreeMap<K, V>) -> Option<BTreeMap<K, V>> {
    (!map.is_empty()).then_some(map)
}
