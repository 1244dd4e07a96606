//! The one-node cluster's addresses, certificates and configuration files,
//! written into its work dir. Every setting that this machine needs and a
//! usual cluster would not says why (docs/kubernetes.md, "Tried on a real
//! node", lists them).

use std::path::Path;

use crate::support::tls::Ca;

/// The node's name (kubelet's `--hostname-override`, kube-proxy's too).
pub const NODE_NAME: &str = "valkyrie-node";
/// The node's address: the inside end of its uplink, in its netns.
pub const NODE_IP: &str = "10.89.0.2";
/// kube-apiserver's port on [`NODE_IP`].
pub const API_PORT: u16 = 6443;
/// The CNI bridge's pod range.
pub const POD_CIDR: &str = "10.88.0.0/16";
/// Services' ClusterIPs; the `kubernetes` Service takes the first.
pub const SERVICE_CIDR: &str = "10.0.0.0/24";
/// The `kube-dns` Service, in front of CoreDNS: kubelet's `clusterDNS`.
pub const DNS_IP: &str = "10.0.0.10";
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// The administrator's bearer token (`system:masters`), which every
/// component uses too: one identity keeps a test cluster small.
pub const ADMIN_TOKEN: &str = "valkyrie-node-admin-token";

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Writes every file under `w`; `pause` is the sandbox image's reference.
pub fn write_all(w: &Path, pause: &str) {
    let p = |f: &str| w.join(f).display().to_string();
    pki(w);
    write(
        &w.join("tokens.csv"),
        &format!("{ADMIN_TOKEN},admin,admin-uid,system:masters\n"),
    );
    // Inside the netns the components reach the API at the node's address.
    write(
        &w.join("node.kubeconfig"),
        &kubeconfig(&format!("https://{NODE_IP}:{API_PORT}"), &p("pki/ca.crt")),
    );
    write(&w.join("containerd/config.toml"), &containerd(w, pause));
    write(&w.join("cni/net.d/10-node.conflist"), &cni(w));
    write(
        &w.join("crictl.yaml"),
        &format!(
            "runtime-endpoint: unix://{s}\nimage-endpoint: unix://{s}\ntimeout: 20\n",
            s = p("run/containerd.sock")
        ),
    );
    write(&w.join("kubelet/config.yaml"), &kubelet(w));
    // No upstream servers: pods resolve cluster names only.
    write(&w.join("kubelet/resolv.conf"), "options ndots:5\n");
    write(&w.join("kube-proxy.yaml"), &kube_proxy(w));
    write(&w.join("Corefile"), &corefile(w));
}

/// A kubeconfig with the administrator's token, for `server`.
pub fn kubeconfig(server: &str, ca: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: node, cluster: {{server: \"{server}\", certificate-authority: \"{ca}\"}}}}]\n\
         users: [{{name: admin, user: {{token: \"{ADMIN_TOKEN}\"}}}}]\n\
         contexts: [{{name: node, context: {{cluster: node, user: admin, namespace: default}}}}]\n\
         current-context: node\n"
    )
}

/// A CA, the API server's serving certificate from it (for every name a
/// client inside or outside uses: the node's address, the `kubernetes`
/// Service's ClusterIP and names, and 127.0.0.1 for the host's forwarded
/// port), and the service-account signing key.
fn pki(w: &Path) {
    let ca = Ca::new("Valkyrie one-node cluster CA");
    let service_ip = "10.0.0.1";
    let serving = ca.server_for(&[
        NODE_IP,
        service_ip,
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        &format!("kubernetes.default.svc.{CLUSTER_DOMAIN}"),
    ]);
    write(&w.join("pki/ca.crt"), &ca.cert_pem);
    write(&w.join("pki/apiserver.crt"), &serving.cert_pem);
    write(&w.join("pki/apiserver.key"), &serving.key_pem);
    // ECDSA P-256: kube-apiserver signs service-account tokens with the
    // private key (PKCS#8) and checks them with the public one.
    let sa = rcgen::KeyPair::generate().unwrap();
    write(&w.join("pki/sa.key"), &sa.serialize_pem());
    write(&w.join("pki/sa.pub"), &sa.public_key_pem());
}

fn containerd(w: &Path, pause: &str) -> String {
    let w = w.display();
    format!(
        r#"version = 2
root = "{w}/containerd/root"
state = "{w}/containerd/state"
# /opt/containerd otherwise; nothing here uses it.
disabled_plugins = ["io.containerd.internal.v1.opt"]
[grpc]
  address = "{w}/run/containerd.sock"
[ttrpc]
  address = "{w}/run/containerd-ttrpc.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # Required here: the sandbox gets oom_score_adj -998 and Guaranteed
  # containers -997 otherwise, and lowering it needs CAP_SYS_RESOURCE,
  # which this machine's root lacks (runc create fails).
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The pods' netns under the state dir, not /run/netns (host-global).
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc, never crun (no hybrid cgroups); cgroupfs (no systemd).
        BinaryName = "/usr/sbin/runc"
        Root = "{w}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{w}/cni/net.d"
"#
    )
}

/// A bridge with host-local addresses; br_netfilter (built in here, and
/// on by default in a new netns) passes bridged packets through the node's
/// iptables, so a Service's DNAT also works between two pods of the bridge.
fn cni(w: &Path) -> String {
    let w = w.display();
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "valkyrie-node",
  "plugins": [
    {{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {{"type": "host-local", "ranges": [[{{"subnet": "{POD_CIDR}"}}]],
              "routes": [{{"dst": "0.0.0.0/0"}}], "dataDir": "{w}/cni/ipam"}}}},
    {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
  ]
}}
"#
    )
}

fn kubelet(w: &Path) -> String {
    let w = w.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 (hybrid) here: kubelet >= 1.35 refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{w}/run/containerd.sock
imageServiceEndpoint: unix://{w}/run/containerd.sock
podLogsDir: {w}/kubelet/logs
volumePluginDir: {w}/kubelet/volume-plugins
failSwapOn: false
# Inside the node's netns: the API server reaches it at the InternalIP
# (logs, exec).
address: {NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
authorization:
  mode: AlwaysAllow
# Lowering it needs CAP_SYS_RESOURCE.
oomScoreAdj: 0
clusterDNS: [{DNS_IP}]
clusterDomain: {CLUSTER_DOMAIN}
resolvConf: {w}/kubelet/resolv.conf
# A test machine's disk is often fuller than kubelet's defaults allow.
evictionHard: {{memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
"#
    )
}

fn kube_proxy(w: &Path) -> String {
    let w = w.display();
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {w}/node.kubeconfig
hostnameOverride: {NODE_NAME}
clusterCIDR: {POD_CIDR}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Lowering it needs CAP_SYS_RESOURCE.
oomScoreAdj: 0
# 0 leaves the host-wide conntrack table size as it is.
conntrack:
  maxPerCore: 0
  min: 0
"#
    )
}

/// CoreDNS on the node, for the cluster domain only (no upstream here);
/// `ready` answers once the kubernetes plugin has synced.
fn corefile(w: &Path) -> String {
    let w = w.display();
    format!(
        r#".:53 {{
    bind {NODE_IP}
    errors
    ready 127.0.0.1:8181
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {w}/node.kubeconfig node
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
}}
"#
    )
}
