//! The names, labels and addresses derived from a `ValkeyCluster`: one
//! place, so the renderers, the reconciler and the group source agree on
//! them (the StatefulSet's selector and service name can never change).

use std::collections::BTreeMap;

/// The port every Valkey pod listens on and announces.
pub const VALKEY_PORT: i32 = 6379;
/// `app.kubernetes.io/name`: always `valkey`.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`: the CR's name.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// `app.kubernetes.io/managed-by`: always `valkyrie`.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// `app.kubernetes.io/component`: always `server`.
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// The role label the failover moves (never set by the StatefulSet).
pub const LABEL_ROLE: &str = "valkyrie.io/role";
/// [`LABEL_ROLE`] of the pod Valkyrie advertises as the master.
pub const ROLE_MASTER: &str = "master";
/// [`LABEL_ROLE`] of the other pods.
pub const ROLE_REPLICA: &str = "replica";
/// The label the StatefulSet controller gives each pod: its own name.
pub const LABEL_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
/// The pod template annotation that changes with `valkey.conf` or
/// `start.sh`, so that a new configuration is a new revision.
pub const ANNOTATION_CONFIG_HASH: &str = "valkyrie.io/config-hash";
/// The ConfigMap key holding the address of the master pods start from.
pub const CONFIG_KEY_MASTER: &str = "master";
/// The ConfigMap key holding the config epoch that master was adopted in.
pub const CONFIG_KEY_EPOCH: &str = "config-epoch";
/// The ConfigMap key holding the write fence a pod starting as the master
/// starts with: `<min-replicas-to-write> <min-replicas-max-lag>`, empty
/// when off.
pub const CONFIG_KEY_FENCE: &str = "start-fence";
/// The key of the password in the generated Secret.
pub const SECRET_KEY_PASSWORD: &str = "password";

/// The names of a CR's children, and its pods' addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    /// The CR's name, also the StatefulSet's and the PDB's.
    pub name: String,
    /// The CR's namespace, also its children's.
    pub namespace: String,
}

impl Names {
    /// The names for CR `name` in `namespace`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// The headless Service that gives each pod its DNS name.
    pub fn headless(&self) -> String {
        format!("{}-headless", self.name)
    }

    /// The Service selecting the master pod.
    pub fn master_service(&self) -> String {
        format!("{}-master", self.name)
    }

    /// The Service selecting the replica pods.
    pub fn replicas_service(&self) -> String {
        format!("{}-replicas", self.name)
    }

    /// The ConfigMap with `valkey.conf` and `start.sh`.
    pub fn config_map(&self) -> String {
        format!("{}-config", self.name)
    }

    /// The generated Secret holding the password.
    pub fn auth_secret(&self) -> String {
        format!("{}-auth", self.name)
    }

    /// Pod `ordinal` of the StatefulSet.
    pub fn pod(&self, ordinal: u32) -> String {
        format!("{}-{ordinal}", self.name)
    }

    /// The stable DNS name of pod `ordinal`, the name it announces.
    pub fn pod_fqdn(&self, ordinal: u32, cluster_domain: &str) -> String {
        format!(
            "{}.{}.{}.svc.{cluster_domain}",
            self.pod(ordinal),
            self.headless(),
            self.namespace
        )
    }

    /// `<fqdn>:6379` of pod `ordinal`.
    pub fn pod_address(&self, ordinal: u32, cluster_domain: &str) -> String {
        format!("{}:{VALKEY_PORT}", self.pod_fqdn(ordinal, cluster_domain))
    }

    /// The labels that select the CR's pods (the StatefulSet's selector,
    /// immutable).
    pub fn selector_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_NAME.to_owned(), "valkey".to_owned()),
            (LABEL_INSTANCE.to_owned(), self.name.clone()),
            (LABEL_MANAGED_BY.to_owned(), "valkyrie".to_owned()),
        ])
    }

    /// [`Self::selector_labels`] as a label selector string, for
    /// `status.selector` (the scale subresource).
    pub fn selector(&self) -> String {
        self.selector_labels()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The labels every child carries.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels();
        labels.insert(LABEL_COMPONENT.to_owned(), "server".to_owned());
        labels
    }

    /// The `-master` Service's selector when `pod` is the master: that
    /// pod alone, so that a failover changes its endpoints in one write.
    pub fn master_selector(&self, pod: &str) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels();
        labels.insert(LABEL_POD_NAME.to_owned(), pod.to_owned());
        labels
    }

    /// The selector of the pods that have `role`.
    pub fn role_selector(&self, role: &str) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels();
        labels.insert(LABEL_ROLE.to_owned(), role.to_owned());
        labels
    }
}
