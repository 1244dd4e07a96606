//! The packaging agrees with the daemon: the `sentinel.conf` shipped in
//! each install's ConfigMap (`deploy/standalone/`, the Deployment;
//! `deploy/`, the HA StatefulSet, rendered per pod) is accepted by
//! Valkyrie's own parser, and the ports, paths and user the Dockerfile and
//! the manifests name are the ones that configuration and the daemon use.
//! (Schema validation of the manifests is `scripts/validate-manifests`;
//! what the RBAC allows is `tests/kube/rbac.rs`; this is what neither can
//! see.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The block literal under `key: |` (indented deeper than the key).
fn block_literal(yaml: &str, key: &str) -> String {
    let mut lines = yaml.lines();
    let header = lines
        .by_ref()
        .find(|l| l.trim_start() == format!("{key}: |"))
        .unwrap_or_else(|| panic!("no {key}: | block"));
    let key_indent = header.len() - header.trim_start().len();
    let mut out = String::new();
    let mut indent = None;
    for l in lines {
        if l.trim().is_empty() {
            out.push('\n');
            continue;
        }
        let this = l.len() - l.trim_start().len();
        if this <= key_indent {
            break;
        }
        let i = *indent.get_or_insert(this);
        out.push_str(&l[i.min(this)..]);
        out.push('\n');
    }
    out
}

/// Every `containerPort: N` / `port: N` value in a manifest.
fn numbers_after(yaml: &str, key: &str) -> Vec<u16> {
    yaml.lines()
        .filter_map(|l| l.trim().trim_start_matches("- ").strip_prefix(key))
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

#[test]
fn configmap_sentinel_conf_is_accepted_and_matches_the_manifests() {
    let configmap = read("deploy/standalone/20-configmap.yaml");
    let conf = block_literal(&configmap, "sentinel.conf");
    let (config, _notes) =
        valkyrie::config::parse("deploy/standalone/20-configmap.yaml", conf.as_bytes())
            .unwrap_or_else(|e| panic!("the shipped sentinel.conf is refused: {e}\n{conf}"));
    assert_eq!(config.groups.len(), 1);
    assert_eq!(config.dir, Path::new("/var/lib/valkyrie"));

    let deployment = read("deploy/standalone/40-deployment.yaml");
    let service = read("deploy/standalone/50-service.yaml");
    let dockerfile = read("Dockerfile");
    let expected = [config.port, config.index_port, config.admin_port];
    assert_eq!(expected, [26379, 12120, 9126]);
    assert_eq!(numbers_after(&deployment, "containerPort:"), expected);
    assert_eq!(numbers_after(&service, "port:"), expected);
    let exposed = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .unwrap();
    assert_eq!(exposed, "26379 12120 9126");

    // The state directory is the writable volume in both places, and the
    // config file the image runs is where the ConfigMap is mounted.
    assert!(deployment.contains("mountPath: /var/lib/valkyrie"));
    assert!(deployment.contains("mountPath: /etc/valkyrie"));
    assert!(deployment.contains("- /etc/valkyrie/sentinel.conf"));
    assert!(dockerfile.contains("VALKYRIE_DIR=/var/lib/valkyrie"));
    assert!(dockerfile.contains(r#"CMD ["/etc/valkyrie/sentinel.conf"]"#));
    // The image's user is the one the pod asserts.
    assert!(dockerfile.contains("USER 10001:10001"));
    assert!(deployment.contains("runAsUser: 10001"));
    assert!(deployment.contains("runAsNonRoot: true"));
    assert!(deployment.contains("readOnlyRootFilesystem: true"));
    // Probes point at the admin port's paths.
    assert!(deployment.contains("path: /healthz"));
    assert!(deployment.contains("path: /readyz"));
    // The Service "valkyrie" would otherwise put VALKYRIE_PORT=tcp://… in
    // the environment, which Valkyrie takes for its --port.
    assert!(deployment.contains("enableServiceLinks: false"));
}

/// The value of the first `key: value` line (quotes removed).
fn value_of(yaml: &str, key: &str) -> String {
    yaml.lines()
        .find_map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .strip_prefix(&format!("{key}: "))
        })
        .unwrap_or_else(|| panic!("no {key}:"))
        .trim()
        .trim_matches('"')
        .to_string()
}

/// The `value:` of every env entry `- name: <name>` (a plain value on the
/// next line).
fn env_values(yaml: &str, name: &str) -> Vec<String> {
    let lines: Vec<&str> = yaml.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].trim() == format!("- name: {name}"))
        .filter_map(|w| w[1].trim().strip_prefix("value: "))
        .map(str::to_string)
        .collect()
}

/// How many times `lines` occur as consecutive lines of `yaml` (compared
/// without indentation).
fn runs(yaml: &str, lines: &[&str]) -> usize {
    let all: Vec<&str> = yaml.lines().map(str::trim).collect();
    all.windows(lines.len()).filter(|w| w == &lines).count()
}

/// Runs the ConfigMap's render.sh as the init container does, for pod
/// `pod`, and returns the sentinel.conf it writes.
fn render(configmap: &str, statefulset: &str, pod: &str) -> String {
    let dir = std::env::temp_dir().join(format!("valkyrie-packaging-{}-{pod}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (script, shared, out) = (
        dir.join("render.sh"),
        dir.join("shared.conf"),
        dir.join("sentinel.conf"),
    );
    std::fs::write(&script, block_literal(configmap, "render.sh")).unwrap();
    std::fs::write(&shared, block_literal(configmap, "sentinel.conf")).unwrap();
    let [headless] = &env_values(statefulset, "HEADLESS")[..] else {
        panic!("one HEADLESS value in the StatefulSet");
    };
    let domains = env_values(statefulset, "CLUSTER_DOMAIN");
    let output = std::process::Command::new("sh")
        .arg(&script)
        .arg(&shared)
        .arg(&out)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("POD_NAME", pod)
        .env("POD_NAMESPACE", "valkyrie")
        .env("HEADLESS", headless)
        .env("CLUSTER_DOMAIN", &domains[0])
        .env("PEER_PASSWORD", "peers-2f9c.x_1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "render.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    text
}

#[test]
fn ha_install_renders_a_sentinel_conf_per_pod_that_matches_the_manifests() {
    let configmap = read("deploy/20-configmap.yaml");
    let statefulset = read("deploy/40-statefulset.yaml");
    let headless = read("deploy/30-headless-service.yaml");
    let service = read("deploy/50-service.yaml");
    let pdb = read("deploy/60-pdb.yaml");
    let dockerfile = read("Dockerfile");

    // Each pod announces its own stable DNS name, through the headless
    // Service the StatefulSet names; Valkyrie accepts the file as written.
    let service_name = value_of(&statefulset, "serviceName");
    assert_eq!(service_name, value_of(&headless, "name"));
    assert_eq!(
        env_values(&statefulset, "HEADLESS"),
        [service_name.as_str()]
    );
    let domains = env_values(&statefulset, "CLUSTER_DOMAIN");
    assert_eq!(
        domains,
        ["cluster.local", "cluster.local"],
        "init and main agree"
    );
    for pod in ["valkyrie-0", "valkyrie-2"] {
        let conf = render(&configmap, &statefulset, pod);
        let (config, _notes) = valkyrie::config::parse("rendered sentinel.conf", conf.as_bytes())
            .unwrap_or_else(|e| panic!("the rendered sentinel.conf is refused: {e}\n{conf}"));
        assert_eq!(
            config.announce_ip.as_deref(),
            Some(format!("{pod}.{service_name}.valkyrie.svc.cluster.local").as_str())
        );
        // The peers log in to each other (protected mode refuses their
        // votes otherwise), as user "peer", with the Secret's password.
        assert_eq!(config.sentinel_user.as_deref(), Some("peer"));
        assert_eq!(
            config
                .sentinel_pass
                .as_ref()
                .map(valkyrie::config::Secret::expose),
            Some("peers-2f9c.x_1")
        );
        assert!(config.protected_mode);
        assert!(
            conf.contains("user peer on >peers-2f9c.x_1 resetchannels &__sentinel__:hello -@all"),
            "{conf}"
        );
        // Groups come from ValkeyCluster resources, not monitor lines.
        assert!(config.groups.is_empty(), "{conf}");
        assert!(config.resolve_hostnames);
        assert_eq!(config.dir, Path::new("/var/lib/valkyrie"));
        let ports = [config.port, config.index_port, config.admin_port];
        assert_eq!(ports, [26379, 12120, 9126]);
        assert_eq!(numbers_after(&statefulset, "containerPort:"), ports);
        assert_eq!(numbers_after(&headless, "port:"), ports);
        // Clients: Sentinel and the topology push; metrics are per pod.
        assert_eq!(numbers_after(&service, "port:"), ports[..2]);
        let exposed = dockerfile
            .lines()
            .find_map(|l| l.strip_prefix("EXPOSE "))
            .unwrap();
        assert_eq!(exposed, "26379 12120 9126");
    }
    assert_eq!(headless.matches("clusterIP: None").count(), 1);
    assert!(headless.contains("publishNotReadyAddresses: true"));

    // Three peers with stable names, started together, in the Kubernetes
    // mode, reading the file the init container writes.
    assert_eq!(value_of(&statefulset, "kind"), "StatefulSet");
    assert_eq!(value_of(&statefulset, "replicas"), "3");
    assert_eq!(value_of(&statefulset, "podManagementPolicy"), "Parallel");
    let runs = |lines: &[&str]| runs(&statefulset, lines);
    assert_eq!(
        runs(&["- --kubernetes", "- /etc/valkyrie/sentinel.conf"]),
        1
    );
    let init = [
        "- /bin/sh",
        "- /etc/valkyrie-shared/render.sh",
        "- /etc/valkyrie-shared/sentinel.conf",
        "- /etc/valkyrie/sentinel.conf",
    ];
    assert_eq!(runs(&init), 1);
    // The rendered file's volume: written by the init container, read by
    // Valkyrie.
    assert_eq!(runs(&["- name: config", "mountPath: /etc/valkyrie"]), 2);
    assert_eq!(
        runs(&["- name: shared-config", "mountPath: /etc/valkyrie-shared"]),
        1
    );
    // POD_NAME and POD_NAMESPACE from the downward API, in both containers.
    for (env, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        let entry = [
            &format!("- name: {env}"),
            "valueFrom:",
            "fieldRef:",
            &format!("fieldPath: {field}"),
        ];
        assert_eq!(runs(&entry), 2, "{env}");
    }
    // The state file on a volume of each pod's own.
    assert!(statefulset.contains("volumeClaimTemplates:"));
    assert_eq!(runs(&["- name: state", "mountPath: /var/lib/valkyrie"]), 1);
    assert!(statefulset.contains("storage: 64Mi"));
    // The image's user; restricted-profile containers (both of them).
    assert!(dockerfile.contains("USER 10001:10001"));
    assert!(statefulset.contains("runAsUser: 10001"));
    assert!(statefulset.contains("runAsNonRoot: true"));
    assert_eq!(
        statefulset.matches("readOnlyRootFilesystem: true").count(),
        2
    );
    assert_eq!(
        statefulset
            .matches("allowPrivilegeEscalation: false")
            .count(),
        2
    );
    assert!(statefulset.contains("enableServiceLinks: false"));
    assert!(statefulset.contains("serviceAccountName: valkyrie"));
    assert!(statefulset.contains("automountServiceAccountToken: true"));
    assert!(statefulset.contains("path: /healthz"));
    assert!(statefulset.contains("path: /readyz"));
    assert!(statefulset.contains("topologyKey: kubernetes.io/hostname"));
    assert_eq!(value_of(&pdb, "maxUnavailable"), "1");
}

#[test]
fn ha_install_ships_peer_authentication() {
    let configmap = read("deploy/20-configmap.yaml");
    let statefulset = read("deploy/40-statefulset.yaml");
    let secret = read("deploy/25-peer-auth.yaml");
    // The init container reads the Secret the install ships.
    assert_eq!(value_of(&secret, "kind"), "Secret");
    assert_eq!(value_of(&secret, "name"), "valkyrie-peer-auth");
    assert!(secret.contains("password: "));
    assert_eq!(
        runs(
            &statefulset,
            &[
                "- name: PEER_PASSWORD",
                "valueFrom:",
                "secretKeyRef:",
                "name: valkyrie-peer-auth",
                "key: password",
            ]
        ),
        1
    );
    // render.sh refuses to write a file without a usable password.
    let script = block_literal(&configmap, "render.sh");
    let dir = std::env::temp_dir().join(format!("valkyrie-peer-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("render.sh"), script).unwrap();
    std::fs::write(dir.join("shared.conf"), "port 26379\n").unwrap();
    for bad in ["", "two words", "a$(id)"] {
        let status = std::process::Command::new("sh")
            .arg(dir.join("render.sh"))
            .arg(dir.join("shared.conf"))
            .arg(dir.join("out.conf"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("POD_NAME", "valkyrie-0")
            .env("POD_NAMESPACE", "valkyrie")
            .env("HEADLESS", "valkyrie-headless")
            .env("CLUSTER_DOMAIN", "cluster.local")
            .env("PEER_PASSWORD", bad)
            .status()
            .unwrap();
        assert!(!status.success(), "render.sh took {bad:?}");
        assert!(!dir.join("out.conf").exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn block_literal_reads_indented_text() {
    let yaml = "data:\n  f.conf: |\n    a 1\n\n      b 2\n    c 3\nother: x\n";
    assert_eq!(block_literal(yaml, "f.conf"), "a 1\n\n  b 2\nc 3\n");
}
