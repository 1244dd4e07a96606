//! The packaging agrees with the daemon: the `sentinel.conf` shipped in
//! the Deployment's ConfigMap is accepted by Valkyrie's own parser, and
//! the ports, paths and user the Dockerfile and the manifests name are the
//! ones that configuration and the daemon use. (Schema validation of the
//! manifests is `scripts/validate-manifests`; this is what a schema cannot
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
    let (config, _notes) = valkyrie::config::parse("deploy/standalone/20-configmap.yaml", conf.as_bytes())
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
}

#[test]
fn block_literal_reads_indented_text() {
    let yaml = "data:\n  f.conf: |\n    a 1\n\n      b 2\n    c 3\nother: x\n";
    assert_eq!(block_literal(yaml, "f.conf"), "a 1\n\n  b 2\nc 3\n");
}
