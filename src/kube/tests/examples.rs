//! The example CRs in `deploy/examples/`: each is a `ValkeyCluster`
//! (no unknown field), passes the CRD's CEL rules as created and as an
//! unchanged update, and renders.

use serde_json::Value;

use super::{broken_rules, examples, yaml_read};
use crate::kube::crd::{ValkeyCluster, master_name};
use crate::kube::render::{Observed, render};

/// Every key of `value`'s objects, as JSON pointers.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let path = format!("{at}/{k}");
                out.push(path.clone());
                pointers(v, path, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn examples_are_valkey_clusters_that_pass_the_rules() {
    for (stem, text) in examples() {
        let value = yaml_read::parse(&text);
        let vc: ValkeyCluster =
            serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{stem}.yaml: {e}"));
        // Nothing was dropped on the way (a misspelt field would be).
        let back = serde_json::to_value(&vc).unwrap();
        let (mut read, mut kept) = (Vec::new(), Vec::new());
        pointers(&value, String::new(), &mut read);
        pointers(&back, String::new(), &mut kept);
        let lost: Vec<_> = read.iter().filter(|p| !kept.contains(p)).collect();
        assert!(
            lost.is_empty(),
            "{stem}.yaml: fields not in the CRD: {lost:?}"
        );

        assert_eq!(
            broken_rules(&value, None),
            Vec::<String>::new(),
            "{stem}.yaml created"
        );
        assert_eq!(
            broken_rules(&value, Some(&value)),
            Vec::<String>::new(),
            "{stem}.yaml updated"
        );

        let mut vc = vc;
        vc.metadata.namespace = Some("shop".into());
        vc.metadata.uid = Some("uid".into());
        assert!(master_name(&vc).is_some());
        let observed = Observed {
            cluster_domain: "cluster.local",
            generated_password: None,
        };
        render(&vc, &observed).unwrap_or_else(|e| panic!("{stem}.yaml: {e}"));
    }
}

#[test]
fn the_default_master_name_is_namespace_dot_name() {
    let mut vc: ValkeyCluster = serde_json::from_value(super::example("minimal")).unwrap();
    assert_eq!(master_name(&vc), None, "no namespace, no name");
    vc.metadata.namespace = Some("shop".into());
    assert_eq!(master_name(&vc).as_deref(), Some("shop.cache"));
    let full: ValkeyCluster = serde_json::from_value(super::example("full")).unwrap();
    assert_eq!(
        master_name(&full).as_deref(),
        Some("sessions"),
        "spec.monitoring.masterName"
    );
}
