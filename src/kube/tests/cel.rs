//! Every CEL rule of the CRD, evaluated offline (kube's `cel` feature):
//! each accepts a good object and rejects a bad one, transition rules on
//! updates against `oldSelf`; and no rule of the CRD goes untested.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{broken_rules, schema};
use crate::kube::crd::MANAGED_CONFIG;

/// A valid CR with every optional object present.
fn base() -> Value {
    json!({
        "apiVersion": "valkyrie.io/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": {"name": "cache", "namespace": "shop"},
        "spec": {
            "replicas": 3,
            "image": "valkey/valkey:8.1",
            "storage": {"size": "8Gi", "storageClassName": "fast"},
            "auth": {"monitorUser": "valkyrie",
                     "monitorPasswordSecretRef": {"name": "acl", "key": "valkyrie"}},
            "tls": {"enabled": true, "secretName": "cache-tls"},
            "podDisruptionBudget": {"maxUnavailable": 1},
            "monitoring": {"masterName": "shop.cache", "downAfterMilliseconds": 5000,
                           "failoverTimeoutMilliseconds": 60000},
            "config": {"maxmemory-policy": "allkeys-lru"},
            "podLabels": {"team": "checkout"}
        }
    })
}

/// `object` with the value at JSON pointer `path` set (`None`: removed).
fn with(mut object: Value, path: &str, value: Option<Value>) -> Value {
    let (parent, key) = path.rsplit_once('/').unwrap();
    let parent = object.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    match value {
        Some(v) => parent.insert(key.to_owned(), v),
        None => parent.remove(key),
    };
    object
}

/// One case: an object (and the old one, for an update) and the rule it
/// must break (a fragment of its text), or `None` when it must pass.
struct Case {
    what: &'static str,
    object: Value,
    old: Option<Value>,
    breaks: Option<&'static str>,
}

fn create(what: &'static str, object: Value, breaks: Option<&'static str>) -> Case {
    Case {
        what,
        object,
        old: None,
        breaks,
    }
}

fn update(what: &'static str, old: Value, object: Value, breaks: Option<&'static str>) -> Case {
    Case {
        what,
        object,
        old: Some(old),
        breaks,
    }
}

fn cases() -> Vec<Case> {
    let b = base;
    let long = "a".repeat(53);
    vec![
        create("the base object", b(), None),
        update("an unchanged update", b(), b(), None),
        // metadata.name
        create(
            "a 52-character name",
            with(b(), "/metadata/name", Some(json!("a".repeat(52)))),
            None,
        ),
        create(
            "a 53-character name",
            with(b(), "/metadata/name", Some(json!(long))),
            Some("size() <= 52"),
        ),
        create(
            "a name starting with a digit",
            with(b(), "/metadata/name", Some(json!("1cache"))),
            Some("matches('^[a-z]"),
        ),
        create(
            "a name with a dot",
            with(b(), "/metadata/name", Some(json!("cache.eu"))),
            Some("matches('^[a-z]"),
        ),
        // storage added or removed
        update(
            "storage removed",
            b(),
            with(b(), "/spec/storage", None),
            Some("has(self.storage) == has(oldSelf.storage)"),
        ),
        update(
            "storage added",
            with(b(), "/spec/storage", None),
            b(),
            Some("has(self.storage) == has(oldSelf.storage)"),
        ),
        update(
            "no storage before or after",
            with(b(), "/spec/storage", None),
            with(b(), "/spec/storage", None),
            None,
        ),
        // storage.size and storageClassName
        update(
            "storage grown",
            b(),
            with(b(), "/spec/storage/size", Some(json!("16Gi"))),
            Some("self.size == oldSelf.size"),
        ),
        update(
            "storage class changed",
            b(),
            with(b(), "/spec/storage/storageClassName", Some(json!("slow"))),
            Some("self.storageClassName"),
        ),
        update(
            "storage class removed",
            b(),
            with(b(), "/spec/storage/storageClassName", None),
            Some("self.storageClassName"),
        ),
        update(
            "storage class added",
            with(b(), "/spec/storage/storageClassName", None),
            b(),
            Some("self.storageClassName"),
        ),
        update(
            "whenScaled changed",
            b(),
            with(b(), "/spec/storage/whenScaled", Some(json!("Delete"))),
            None,
        ),
        // monitoring.masterName
        update(
            "master name changed",
            b(),
            with(b(), "/spec/monitoring/masterName", Some(json!("other"))),
            Some("masterName"),
        ),
        update(
            "master name removed",
            b(),
            with(b(), "/spec/monitoring/masterName", None),
            Some("masterName"),
        ),
        update(
            "master name added",
            with(b(), "/spec/monitoring/masterName", None),
            b(),
            Some("masterName"),
        ),
        update(
            "monitoring removed with its name",
            b(),
            with(b(), "/spec/monitoring", None),
            Some("masterName"),
        ),
        update(
            "timers changed",
            b(),
            with(
                b(),
                "/spec/monitoring/downAfterMilliseconds",
                Some(json!(1000)),
            ),
            None,
        ),
        // monitoring timers
        create(
            "failover timeout below down-after",
            with(
                b(),
                "/spec/monitoring/failoverTimeoutMilliseconds",
                Some(json!(4000)),
            ),
            Some("failoverTimeoutMilliseconds >= "),
        ),
        create(
            "failover timeout equal to down-after",
            with(
                b(),
                "/spec/monitoring/failoverTimeoutMilliseconds",
                Some(json!(5000)),
            ),
            None,
        ),
        create(
            "down-after above the defaulted failover timeout",
            with(
                b(),
                "/spec/monitoring",
                Some(json!({"downAfterMilliseconds": 70000})),
            ),
            Some("failoverTimeoutMilliseconds >= "),
        ),
        create(
            "monitoring left to its defaults",
            with(b(), "/spec/monitoring", Some(json!({}))),
            None,
        ),
        // auth
        create(
            "a monitor password without a user",
            with(b(), "/spec/auth/monitorUser", None),
            Some("has(self.monitorUser)"),
        ),
        create(
            "a monitor user without a password",
            with(b(), "/spec/auth/monitorPasswordSecretRef", None),
            None,
        ),
        // tls
        create(
            "tls enabled without a Secret",
            with(b(), "/spec/tls/secretName", None),
            Some("has(self.secretName)"),
        ),
        create(
            "tls disabled without a Secret",
            with(b(), "/spec/tls", Some(json!({"enabled": false}))),
            None,
        ),
        // podDisruptionBudget
        create(
            "minAvailable and maxUnavailable",
            with(
                b(),
                "/spec/podDisruptionBudget/minAvailable",
                Some(json!(2)),
            ),
            Some("has(self.minAvailable) && has(self.maxUnavailable)"),
        ),
        create(
            "minAvailable alone",
            with(
                b(),
                "/spec/podDisruptionBudget",
                Some(json!({"minAvailable": "50%"})),
            ),
            None,
        ),
        // config
        create(
            "a directive in upper case",
            with(b(), "/spec/config", Some(json!({"MAXMEMORY": "1gb"}))),
            Some("k.matches"),
        ),
        create(
            "a directive with a space",
            with(
                b(),
                "/spec/config",
                Some(json!({"maxmemory 1gb\nreplicaof": "x 1"})),
            ),
            Some("k.matches"),
        ),
        create(
            "a directive Valkyrie manages",
            with(b(), "/spec/config", Some(json!({"replicaof": "evil 6379"}))),
            Some("!(k in ["),
        ),
        create(
            "several directives",
            with(
                b(),
                "/spec/config",
                Some(json!({"maxmemory": "1gb", "save": "900 1", "appendonly": "yes"})),
            ),
            None,
        ),
        // podLabels
        create(
            "a pod label of Valkyrie's",
            with(
                b(),
                "/spec/podLabels",
                Some(json!({"valkyrie.io/role": "master"})),
            ),
            Some("startsWith"),
        ),
        create(
            "an app.kubernetes.io pod label",
            with(
                b(),
                "/spec/podLabels",
                Some(json!({"app.kubernetes.io/instance": "x"})),
            ),
            Some("startsWith"),
        ),
        create(
            "a pod label with another prefix",
            with(
                b(),
                "/spec/podLabels",
                Some(json!({"example.com/team": "a"})),
            ),
            None,
        ),
    ]
}

#[test]
fn every_case_is_judged_as_expected() {
    let mut failures = Vec::new();
    for case in cases() {
        let broken = broken_rules(&case.object, case.old.as_ref());
        let ok = match case.breaks {
            None => broken.is_empty(),
            Some(fragment) => !broken.is_empty() && broken.iter().all(|r| r.contains(fragment)),
        };
        if !ok {
            failures.push(format!(
                "{}: expected {:?}, broken rules {broken:?}",
                case.what, case.breaks
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_managed_directive_is_refused_and_others_pass() {
    for key in MANAGED_CONFIG {
        let object = with(base(), "/spec/config", Some(json!({ *key: "x" })));
        let broken = broken_rules(&object, None);
        assert!(
            broken.len() == 1 && broken[0].contains("!(k in ["),
            "{key}: broken rules {broken:?}"
        );
    }
    for key in ["maxmemory", "replica-priority", "hz", "port2", "include-x"] {
        let object = with(base(), "/spec/config", Some(json!({ key: "1" })));
        assert_eq!(broken_rules(&object, None), Vec::<String>::new(), "{key}");
    }
}

/// Every rule in the CRD's schema.
fn all_rules(schema: &Value, out: &mut BTreeSet<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(rules)) = map.get("x-kubernetes-validations") {
                for rule in rules {
                    out.insert(rule["rule"].as_str().unwrap().to_owned());
                }
            }
            map.values().for_each(|v| all_rules(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| all_rules(v, out)),
        _ => {}
    }
}

#[test]
fn every_rule_rejects_some_case() {
    let mut rules = BTreeSet::new();
    all_rules(&schema(), &mut rules);
    assert!(rules.len() >= 12, "rules: {rules:?}");
    let mut rejecting = BTreeSet::new();
    for case in cases() {
        rejecting.extend(broken_rules(&case.object, case.old.as_ref()));
    }
    let untested: Vec<_> = rules.difference(&rejecting).collect();
    assert!(untested.is_empty(), "rules no case breaks: {untested:?}");
}
