//! Golden renders: every example CR in `deploy/examples/` rendered into
//! its children, compared with `src/kube/testdata/<example>.json`.
//!
//! After an intended change of the renderers, rewrite the files and review
//! the diff:
//!
//! ```text
//! VALKYRIE_BLESS=1 cargo test --lib kube::tests::golden
//! git diff src/kube/testdata/
//! ```

use std::path::PathBuf;

use super::{examples, root, yaml_read};
use crate::kube::crd::ValkeyCluster;
use crate::kube::render::{Observed, render};

/// The uid the golden CRs get (a CR read from the API server has one).
pub(super) const UID: &str = "6f1f0c2e-5b1a-4d3e-9c55-0a1b2c3d4e5f";
/// The namespace the golden CRs get (the examples leave it to `-n`).
pub(super) const NAMESPACE: &str = "shop";
/// The password the caller would have generated.
pub(super) const PASSWORD: &str = "golden-password-not-a-secret";

/// An example CR as the reconciler would see it.
pub(super) fn example_cr(text: &str) -> ValkeyCluster {
    let mut vc: ValkeyCluster = serde_json::from_value(yaml_read::parse(text)).unwrap();
    vc.metadata.namespace = Some(NAMESPACE.to_owned());
    vc.metadata.uid = Some(UID.to_owned());
    vc
}

pub(super) fn observed() -> Observed<'static> {
    Observed {
        cluster_domain: "cluster.local",
        generated_password: Some(PASSWORD),
    }
}

fn golden_path(stem: &str) -> PathBuf {
    root()
        .join("src/kube/testdata")
        .join(format!("{stem}.json"))
}

#[test]
fn renders_match_the_golden_files() {
    let bless = std::env::var_os("VALKYRIE_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (stem, text) in examples() {
        let desired = render(&example_cr(&text), &observed()).unwrap();
        let rendered = serde_json::to_string_pretty(&desired.to_values().unwrap()).unwrap() + "\n";
        let path = golden_path(&stem);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &rendered).unwrap();
            continue;
        }
        let golden = std::fs::read_to_string(&path).unwrap_or_default();
        if golden != rendered {
            let line = golden
                .lines()
                .zip(rendered.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(golden.lines().count().min(rendered.lines().count()));
            stale.push(format!(
                "{}: differs from line {} (golden {:?}, rendered {:?})",
                path.display(),
                line + 1,
                golden.lines().nth(line),
                rendered.lines().nth(line)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\nIf the change is intended, rewrite the golden files and review the diff:\n  \
         VALKYRIE_BLESS=1 cargo test --lib kube::tests::golden && git diff src/kube/testdata/",
        stale.join("\n")
    );
}

#[test]
fn every_golden_file_has_its_example() {
    let stems: Vec<String> = examples().into_iter().map(|(s, _)| s).collect();
    for entry in std::fs::read_dir(root().join("src/kube/testdata")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            stems.contains(&stem),
            "{} has no deploy/examples/{stem}.yaml",
            path.display()
        );
    }
}
