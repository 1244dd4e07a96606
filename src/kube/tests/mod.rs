//! Tests of the CRD (its CEL rules, evaluated offline as the API server
//! would, the example CRs, and the YAML writer) and of the pure renderers
//! (golden files under `src/kube/testdata/`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use ::kube::CustomResourceExt;
use serde_json::Value;

use super::crd::ValkeyCluster;

mod cel;
mod examples;
mod golden;
mod prestop;
mod render;
mod yaml;
mod yaml_read;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The example CRs under `deploy/examples/`: (file stem, text).
fn examples() -> Vec<(String, String)> {
    let dir = root().join("deploy/examples");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(
        out.iter().any(|(s, _)| s == "minimal") && out.iter().any(|(s, _)| s == "full"),
        "deploy/examples/ must hold minimal.yaml and full.yaml"
    );
    out
}

/// An example CR as JSON.
fn example(stem: &str) -> Value {
    let (_, text) = examples()
        .into_iter()
        .find(|(s, _)| s == stem)
        .unwrap_or_else(|| panic!("no deploy/examples/{stem}.yaml"));
    yaml_read::parse(&text)
}

/// The CRD's `openAPIV3Schema`, as the API server would evaluate it.
fn schema() -> Value {
    let crd = serde_json::to_value(ValkeyCluster::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// The CEL rules that `object` (an update of `old`, if given) breaks, as
/// the rule texts; empty when it is accepted.
fn broken_rules(object: &Value, old: Option<&Value>) -> Vec<String> {
    match ::kube::core::cel::Validator::new().validate(&schema(), object, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.rule.clone()).collect(),
    }
}
