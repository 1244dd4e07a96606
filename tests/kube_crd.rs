//! The `ValkeyCluster` CRD as shipped: `deploy/05-crd.yaml` is exactly what
//! `valkyrie crd` prints, so the two cannot drift.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

#[test]
fn deploy_holds_what_valkyrie_crd_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_valkyrie"))
        .arg("crd")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "valkyrie crd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed.contains("\nkind: CustomResourceDefinition\n"),
        "{printed}"
    );
    assert!(printed.contains("\n  name: valkeyclusters.valkyrie.io\n"));

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/05-crd.yaml");
    let shipped = std::fs::read_to_string(&path).unwrap_or_default();
    if shipped != printed {
        let line = shipped
            .lines()
            .zip(printed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(shipped.lines().count().min(printed.lines().count()));
        panic!(
            "{} differs from `valkyrie crd` from line {} (shipped {:?}, printed {:?}).\n\
             Regenerate it and commit it with the change to the CRD:\n  \
             cargo run -q -- crd > deploy/05-crd.yaml",
            path.display(),
            line + 1,
            shipped.lines().nth(line),
            printed.lines().nth(line),
        );
    }
}
