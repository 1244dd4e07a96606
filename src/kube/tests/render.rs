//! Properties of the renders that the golden files only show: labels and
//! owners on every child, the role label kept out of the template, the
//! Services' selectors, the immutable StatefulSet fields, the master the
//! pods start from, the Secret, and the errors.

use serde_json::{Value, json};

use super::examples;
use super::golden::{NAMESPACE, PASSWORD, UID, example_cr, observed};
use crate::kube::crd::{
    CurrentMaster, MonitoringSpec, ValkeyCluster, ValkeyClusterStatus, WriteFenceMode,
};
use crate::kube::render::names::{ANNOTATION_CONFIG_HASH, LABEL_ROLE, Names};
use crate::kube::render::{Desired, Observed, RenderError, render};

fn minimal() -> ValkeyCluster {
    let (_, text) = examples()
        .into_iter()
        .find(|(s, _)| s == "minimal")
        .unwrap();
    example_cr(&text)
}

fn full() -> ValkeyCluster {
    let (_, text) = examples().into_iter().find(|(s, _)| s == "full").unwrap();
    example_cr(&text)
}

fn values(desired: &Desired) -> Vec<Value> {
    desired.to_values().unwrap()
}

fn config(desired: &Desired, key: &str) -> String {
    desired.config_map.data.as_ref().unwrap()[key].clone()
}

fn sts(desired: &Desired) -> Value {
    serde_json::to_value(&desired.stateful_set).unwrap()
}

#[test]
fn every_child_carries_the_labels_and_a_controller_owner() {
    for vc in [minimal(), full()] {
        let name = vc.metadata.name.clone().unwrap();
        let children = values(&render(&vc, &observed()).unwrap());
        for child in &children {
            let meta = &child["metadata"];
            let what = format!("{} {}", child["kind"], meta["name"]);
            assert_eq!(meta["namespace"], NAMESPACE, "{what}");
            let labels = &meta["labels"];
            assert_eq!(labels["app.kubernetes.io/name"], "valkey", "{what}");
            assert_eq!(labels["app.kubernetes.io/instance"], json!(name), "{what}");
            assert_eq!(labels["app.kubernetes.io/managed-by"], "valkyrie", "{what}");
            let owners = meta["ownerReferences"].as_array().unwrap();
            assert_eq!(owners.len(), 1, "{what}");
            assert_eq!(owners[0]["uid"], UID, "{what}");
            assert_eq!(owners[0]["kind"], "ValkeyCluster", "{what}");
            assert_eq!(owners[0]["apiVersion"], "valkyrie.io/v1alpha1", "{what}");
            assert_eq!(owners[0]["controller"], true, "{what}");
            assert_eq!(owners[0]["blockOwnerDeletion"], true, "{what}");
            assert_eq!(owners[0]["name"], json!(name), "{what}");
        }
        let kinds: Vec<&str> = children
            .iter()
            .map(|c| c["kind"].as_str().unwrap())
            .collect();
        for kind in ["StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"] {
            assert!(kinds.contains(&kind), "{name}: no {kind} in {kinds:?}");
        }
    }
}

#[test]
fn the_template_never_carries_the_role_label() {
    for vc in [minimal(), full()] {
        let sts = sts(&render(&vc, &observed()).unwrap());
        let template = &sts["spec"]["template"]["metadata"]["labels"];
        assert!(template.get(LABEL_ROLE).is_none(), "{template}");
        assert!(
            sts["spec"]["selector"]["matchLabels"]
                .get(LABEL_ROLE)
                .is_none()
        );
        assert_eq!(
            template["team"].as_str(),
            vc.spec.pod_labels.get("team").map(String::as_str)
        );
    }
}

#[test]
fn services_select_by_role_and_the_headless_one_names_every_pod() {
    // The `-master` Service has no selector of the apply's: the role
    // writer's names the master's pod (`kube/labels.rs`).
    let d = render(&full(), &observed()).unwrap();
    let headless = serde_json::to_value(&d.headless_service).unwrap();
    assert_eq!(headless["metadata"]["name"], "sessions-headless");
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert_eq!(headless["spec"]["publishNotReadyAddresses"], true);
    assert!(headless["spec"]["selector"].get(LABEL_ROLE).is_none());
    assert_eq!(sts(&d)["spec"]["serviceName"], "sessions-headless");

    let master = serde_json::to_value(&d.master_service).unwrap();
    assert_eq!(master["metadata"]["name"], "sessions-master");
    assert!(master["spec"].get("selector").is_none(), "{master}");
    assert_eq!(master["spec"]["type"], "LoadBalancer");
    let replicas = serde_json::to_value(d.replicas_service.as_ref().unwrap()).unwrap();
    assert_eq!(replicas["spec"]["selector"][LABEL_ROLE], "replica");
    assert_eq!(replicas["spec"]["type"], "ClusterIP");

    let mut vc = minimal();
    vc.spec.service = Some(serde_json::from_value(json!({"replicasService": false})).unwrap());
    assert!(render(&vc, &observed()).unwrap().replicas_service.is_none());
}

#[test]
fn pods_announce_their_stable_dns_name() {
    let d = render(&minimal(), &observed()).unwrap();
    let script = config(&d, "start.sh");
    assert!(script.contains(r#"fqdn="$POD_NAME.$HEADLESS.$POD_NAMESPACE.svc.$CLUSTER_DOMAIN""#));
    assert!(
        script.contains(r#"--replica-announce-ip "$fqdn""#),
        "{script}"
    );
    let env = &sts(&d)["spec"]["template"]["spec"]["containers"][0]["env"];
    let find = |name: &str| {
        env.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
    };
    assert_eq!(find("HEADLESS").unwrap()["value"], "cache-headless");
    assert_eq!(find("CLUSTER_DOMAIN").unwrap()["value"], "cluster.local");
    assert_eq!(
        find("POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    let names = Names::new(NAMESPACE, "cache");
    assert_eq!(
        names.pod_fqdn(2, "cluster.local"),
        "cache-2.cache-headless.shop.svc.cluster.local"
    );
}

#[test]
fn pods_start_from_the_advertised_master_and_a_failover_makes_no_new_revision() {
    let mut vc = minimal();
    let before = render(&vc, &observed()).unwrap();
    let pod0 = Names::new(NAMESPACE, "cache").pod_address(0, "cluster.local");
    assert_eq!(config(&before, "master"), pod0);
    assert_eq!(config(&before, "config-epoch"), "0");

    let address = Names::new(NAMESPACE, "cache").pod_address(1, "cluster.local");
    vc.status = Some(ValkeyClusterStatus {
        current_master: Some(CurrentMaster {
            pod: "cache-1".into(),
            address: address.clone(),
        }),
        config_epoch: Some(4),
        ..ValkeyClusterStatus::default()
    });
    let after = render(&vc, &observed()).unwrap();
    assert_eq!(config(&after, "master"), address);
    assert_eq!(config(&after, "config-epoch"), "4");
    assert_eq!(
        after.stateful_set, before.stateful_set,
        "the master is not in the template"
    );

    vc.spec.config.insert("maxmemory".into(), "2gb".into());
    let changed = render(&vc, &observed()).unwrap();
    assert!(config(&changed, "valkey.conf").contains("\nmaxmemory 2gb\n"));
    let hash = |d: &Desired| {
        sts(d)["spec"]["template"]["metadata"]["annotations"]["valkyrie.io/config-hash"].clone()
    };
    assert_ne!(
        hash(&changed),
        hash(&after),
        "a new valkey.conf is a new revision"
    );
}

#[test]
fn immutable_statefulset_fields_do_not_follow_the_mutable_spec() {
    let pinned = |vc: &ValkeyCluster| {
        let s = sts(&render(vc, &observed()).unwrap());
        let spec = &s["spec"];
        json!([
            spec["serviceName"],
            spec["selector"],
            spec["podManagementPolicy"],
            spec["volumeClaimTemplates"]
        ])
    };
    for base in [minimal(), full()] {
        let mut changed = base.clone();
        changed.spec.replicas += 2;
        changed.spec.image = "valkey/valkey:9.0".into();
        changed.spec.config.insert("hz".into(), "50".into());
        changed.spec.pod_labels.insert("tier".into(), "gold".into());
        changed.spec.monitoring = None;
        changed.spec.scheduling = None;
        changed.spec.termination_grace_period_seconds = Some(5);
        assert_eq!(pinned(&changed), pinned(&base));
        assert_ne!(
            render(&changed, &observed()).unwrap().stateful_set,
            render(&base, &observed()).unwrap().stateful_set
        );
    }
    let full = sts(&render(&full(), &observed()).unwrap());
    let claim = &full["spec"]["volumeClaimTemplates"][0]["spec"];
    assert_eq!(claim["resources"]["requests"]["storage"], "8Gi");
    assert_eq!(claim["storageClassName"], "fast-ssd");
    assert_eq!(
        full["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"],
        "Delete"
    );
    let minimal = sts(&render(&minimal(), &observed()).unwrap());
    assert!(minimal["spec"].get("volumeClaimTemplates").is_none());
    let volumes = minimal["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["name"] == "data" && v.get("emptyDir").is_some())
    );
}

#[test]
fn the_password_secret_is_generated_only_when_none_is_named() {
    let password_env = |d: &Desired| {
        let env = sts(d)["spec"]["template"]["spec"]["containers"][0]["env"].clone();
        env.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "VALKEY_PASSWORD")
            .unwrap()["valueFrom"]["secretKeyRef"]
            .clone()
    };
    let d = render(&minimal(), &observed()).unwrap();
    let secret = serde_json::to_value(d.secret.as_ref().unwrap()).unwrap();
    assert_eq!(secret["metadata"]["name"], "cache-auth");
    assert_eq!(
        d.secret.as_ref().unwrap().data.as_ref().unwrap()["password"].0,
        PASSWORD.as_bytes()
    );
    assert_eq!(
        password_env(&d),
        json!({"name": "cache-auth", "key": "password"})
    );

    let existing = Observed {
        generated_password: None,
        ..observed()
    };
    let d = render(&minimal(), &existing).unwrap();
    assert!(d.secret.is_none(), "an existing Secret is never rewritten");
    assert_eq!(
        password_env(&d),
        json!({"name": "cache-auth", "key": "password"})
    );

    let d = render(&full(), &observed()).unwrap();
    assert!(d.secret.is_none(), "the CR names its Secret");
    assert_eq!(
        password_env(&d),
        json!({"name": "sessions-auth", "key": "password"})
    );
    assert!(config(&d, "valkey.conf").contains("\naclfile /etc/valkey-acl/users.acl\n"));
}

#[test]
fn the_pdb_follows_the_spec() {
    let pdb = |vc: &ValkeyCluster| {
        render(vc, &observed())
            .unwrap()
            .pod_disruption_budget
            .map(|p| serde_json::to_value(p).unwrap())
    };
    let default = pdb(&minimal()).unwrap();
    assert_eq!(default["spec"]["maxUnavailable"], 1);
    assert_eq!(default["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    let full = pdb(&full()).unwrap();
    assert_eq!(full["spec"]["minAvailable"], 3);
    assert!(full["spec"].get("maxUnavailable").is_none());
    let mut off = minimal();
    off.spec.pod_disruption_budget =
        Some(serde_json::from_value(json!({"enabled": false})).unwrap());
    assert!(pdb(&off).is_none());
}

#[test]
fn renders_are_deterministic_and_refuse_what_they_cannot_render() {
    assert_eq!(
        render(&full(), &observed()).unwrap(),
        render(&full(), &observed()).unwrap()
    );
    let mut vc = minimal();
    vc.metadata.uid = None;
    assert_eq!(
        render(&vc, &observed()).unwrap_err(),
        RenderError::MissingMetadata("uid")
    );
    let mut vc = minimal();
    vc.metadata.namespace = None;
    assert_eq!(
        render(&vc, &observed()).unwrap_err(),
        RenderError::MissingMetadata("namespace")
    );
    for (key, value) in [
        ("replicaof", "x 1"),
        ("Maxmemory", "1"),
        ("maxmemory", "1\nslaveof x 1"),
    ] {
        let mut vc = minimal();
        vc.spec.config.insert(key.into(), value.into());
        assert!(
            matches!(render(&vc, &observed()), Err(RenderError::Config(_))),
            "{key}"
        );
    }
}

/// Runs `start.sh` (with its paths moved to a scratch directory and
/// `valkey-server` replaced by `echo`) as pod `pod`; returns what it would
/// have executed (the scratch directory written `<dir>`) and the
/// configuration it wrote.
fn run_start_sh(d: &Desired, pod: &str, password: &str) -> (String, String) {
    // One directory per call: tests run in parallel threads of one process.
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "valkyrie-start-sh-{}-{call}-{pod}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    std::fs::create_dir_all(dir.join("run")).unwrap();
    let etc = format!("{}/etc/", dir.display());
    let run = format!("{}/run/", dir.display());
    std::fs::write(dir.join("etc/valkey.conf"), config(d, "valkey.conf")).unwrap();
    let script = config(d, "start.sh")
        .replace("/etc/valkey/", &etc)
        .replace("/run/valkey/", &run)
        .replace("exec valkey-server", "exec echo valkey-server");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("POD_NAME", pod)
        .env("POD_NAMESPACE", NAMESPACE)
        .env("HEADLESS", "cache-headless")
        .env("CLUSTER_DOMAIN", "cluster.local")
        .env("VALKEY_PASSWORD", password)
        .env("VALKYRIE_MASTER", config(d, "master"))
        .env("VALKYRIE_START_FENCE", config(d, "start-fence"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conf_path = dir.join("run/valkey.conf");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&conf_path).unwrap().permissions(),
    );
    assert_eq!(
        mode & 0o077,
        0,
        "the configuration holds the password: owner only"
    );
    let conf = std::fs::read_to_string(&conf_path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let exec = String::from_utf8(out.stdout)
        .unwrap()
        .replace(&dir.display().to_string(), "<dir>");
    (exec, conf)
}

#[test]
fn start_sh_makes_every_pod_but_the_master_a_replica_and_quotes_the_password() {
    let d = render(&minimal(), &observed()).unwrap();
    let (exec, conf) = run_start_sh(&d, "cache-1", r#"p"a\ss word"#);
    assert_eq!(
        exec.trim_end(),
        "valkey-server <dir>/run/valkey.conf --replica-announce-ip \
         cache-1.cache-headless.shop.svc.cluster.local --replica-announce-port 6379"
    );
    assert!(conf.starts_with(&config(&d, "valkey.conf")), "{conf}");
    let added = &conf[config(&d, "valkey.conf").len()..];
    assert_eq!(
        added,
        "requirepass \"p\\\"a\\\\ss word\"\n\
         masterauth \"p\\\"a\\\\ss word\"\n\
         replicaof cache-0.cache-headless.shop.svc.cluster.local 6379\n"
    );
    let (_, conf) = run_start_sh(&d, "cache-0", "pw");
    assert!(
        !conf.contains("replicaof"),
        "the master starts as a master: {conf}"
    );
    // Fenced: a majority of its two replicas, the default lag.
    assert!(
        conf.ends_with("min-replicas-to-write 2\nmin-replicas-max-lag 1\n"),
        "{conf}"
    );
}

#[test]
fn the_start_fence_follows_the_replicas_and_the_mode_without_restarting_pods() {
    let fence = |vc: &ValkeyCluster| config(&render(vc, &observed()).unwrap(), "start-fence");
    let hash = |vc: &ValkeyCluster| {
        sts(&render(vc, &observed()).unwrap())["spec"]["template"]["metadata"]["annotations"]
            [ANNOTATION_CONFIG_HASH]
            .clone()
    };
    let mut vc = minimal();
    assert_eq!(fence(&vc), "2 1");
    let before = hash(&vc);
    vc.spec.replicas = 5;
    assert_eq!(fence(&vc), "3 1", "a majority of four replicas");
    assert_eq!(hash(&vc), before, "a scale restarts no pod");
    vc.spec.replicas = 1;
    assert_eq!(fence(&vc), "", "no replica: no fence");
    vc.spec.replicas = 3;
    let mut monitoring = MonitoringSpec {
        write_fence: WriteFenceMode::Off,
        write_fence_lag_seconds: 4,
        ..MonitoringSpec::default()
    };
    vc.spec.monitoring = Some(monitoring.clone());
    assert_eq!(fence(&vc), "", "off: left alone");
    monitoring.write_fence = WriteFenceMode::Strict;
    vc.spec.monitoring = Some(monitoring);
    assert_eq!(fence(&vc), "2 4");
    let d = render(&vc, &observed()).unwrap();
    let (_, conf) = run_start_sh(&d, "cache-1", "pw");
    assert!(
        !conf.contains("min-replicas"),
        "a replica is not fenced: {conf}"
    );
}

#[test]
fn tls_serves_only_tls_on_the_pods_port_from_the_secret() {
    let d = render(&full(), &observed()).unwrap();
    let conf = config(&d, "valkey.conf");
    let managed = conf.split("# Managed by Valkyrie.").nth(1).unwrap();
    for line in [
        "port 0\n",
        "tls-port 6379\n",
        "tls-cert-file /etc/valkey-tls/tls.crt\n",
        "tls-key-file /etc/valkey-tls/tls.key\n",
        "tls-ca-cert-file /etc/valkey-tls/ca.crt\n",
        "tls-replication yes\n",
    ] {
        assert!(managed.contains(line), "{line:?} in {managed}");
    }
    assert!(!managed.contains("port 6379\nport"), "{managed}");
    let pod = &sts(&d)["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .unwrap();
    assert_eq!(volume["secret"]["secretName"], "sessions-tls");
    let container = &pod["containers"][0];
    assert!(
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "tls" && m["mountPath"] == "/etc/valkey-tls"),
        "{container}"
    );
    let probe = container["readinessProbe"]["exec"]["command"][2]
        .as_str()
        .unwrap();
    assert!(probe.starts_with("valkey-cli --tls --cacert /etc/valkey-tls/ca.crt --cert /etc/valkey-tls/tls.crt --key /etc/valkey-tls/tls.key -h 127.0.0.1 -p 6379 info replication"), "{probe}");
    assert!(
        probe.ends_with("grep -qE '^(role:master|master_link_status:up)'"),
        "{probe}"
    );

    let plain = render(&minimal(), &observed()).unwrap();
    let conf = config(&plain, "valkey.conf");
    assert!(
        conf.contains("port 6379\n") && !conf.contains("tls-"),
        "{conf}"
    );
    let pod = &sts(&plain)["spec"]["template"]["spec"];
    assert!(
        !pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "tls")
    );
}
