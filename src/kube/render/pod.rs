//! The Valkey StatefulSet `<name>`: its pod template, probes, volumes and
//! scheduling.
//!
//! The fields a StatefulSet cannot change (`serviceName`, `selector`,
//! `podManagementPolicy`, `volumeClaimTemplates`) depend only on the CR's
//! name and on `spec.storage`, which the CRD's rules freeze. The template
//! never carries the role label: the failover moves it on the pods.
//! `updateStrategy: OnDelete` leaves the order of a rolling update to
//! Valkyrie (replicas first, the master after a switchover).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, Container,
    ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, ExecAction, KeyToPath, Lifecycle,
    LifecycleHandler, ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    SeccompProfile, SecretKeySelector, SecretVolumeSource, SecurityContext, TCPSocketAction,
    Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::config::{
    ACL_DIR, ACL_FILE, CONFIG_DIR, DATA_DIR, KEY_START_SH, RUN_DIR, TLS_DIR, config_hash,
    tls_secret,
};
use super::context::{Ctx, non_empty};
use super::names::{
    ANNOTATION_CONFIG_HASH, CONFIG_KEY_FENCE, CONFIG_KEY_MASTER, SECRET_KEY_PASSWORD, VALKEY_PORT,
};
use crate::kube::crd::AntiAffinity;

/// The uid and gid of the `valkey` user in the official images.
const VALKEY_UID: i64 = 999;
/// The node label the anti-affinity preset spreads over.
const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// The StatefulSet; `config_map` is the rendered ConfigMap, whose digest
/// the pod template carries.
pub(crate) fn stateful_set(ctx: &Ctx<'_>, config_map: &ConfigMap) -> StatefulSet {
    let spec = &ctx.vc.spec;
    let storage = spec.storage.as_ref();
    let volume_claim_templates = storage.map(|s| {
        vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".to_owned()),
                labels: Some(ctx.names.selector_labels()),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                storage_class_name: s.storage_class_name.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_owned(), s.size.clone())])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        }]
    });
    let retention = storage.map(|s| StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: Some(s.when_deleted.as_str().to_owned()),
        when_scaled: Some(s.when_scaled.as_str().to_owned()),
    });
    StatefulSet {
        metadata: ctx.meta(ctx.names.name.clone()),
        spec: Some(StatefulSetSpec {
            replicas: Some(spec.replicas),
            selector: LabelSelector {
                match_labels: Some(ctx.names.selector_labels()),
                ..LabelSelector::default()
            },
            service_name: Some(ctx.names.headless()),
            pod_management_policy: Some("Parallel".to_owned()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".to_owned()),
                ..StatefulSetUpdateStrategy::default()
            }),
            persistent_volume_claim_retention_policy: retention,
            volume_claim_templates,
            template: pod_template(ctx, config_map),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

fn pod_template(ctx: &Ctx<'_>, config_map: &ConfigMap) -> PodTemplateSpec {
    let spec = &ctx.vc.spec;
    let scheduling = spec.scheduling.clone().unwrap_or_default();
    // The user's labels first: Valkyrie's own win (the CRD refuses them
    // in podLabels anyway).
    let mut labels = spec.pod_labels.clone();
    labels.extend(ctx.names.labels());
    let mut annotations = spec.pod_annotations.clone();
    annotations.insert(ANNOTATION_CONFIG_HASH.to_owned(), config_hash(config_map));
    let affinity = match (&scheduling.affinity, scheduling.anti_affinity) {
        (Some(affinity), _) => Some(affinity.clone()),
        (None, preset) => anti_affinity(ctx, preset),
    };
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(
                spec.termination_grace_period_seconds.unwrap_or(GRACE_SECS),
            ),
            security_context: Some(
                spec.pod_security_context
                    .clone()
                    .unwrap_or_else(default_pod_security_context),
            ),
            image_pull_secrets: (!spec.image_pull_secrets.is_empty())
                .then(|| spec.image_pull_secrets.clone()),
            affinity,
            node_selector: non_empty(scheduling.node_selector),
            tolerations: (!scheduling.tolerations.is_empty()).then_some(scheduling.tolerations),
            topology_spread_constraints: (!scheduling.topology_spread_constraints.is_empty())
                .then_some(scheduling.topology_spread_constraints),
            priority_class_name: scheduling.priority_class_name,
            containers: vec![container(ctx)],
            volumes: Some(volumes(ctx)),
            ..PodSpec::default()
        }),
    }
}

/// The anti-affinity preset over nodes, or none.
fn anti_affinity(ctx: &Ctx<'_>, preset: AntiAffinity) -> Option<Affinity> {
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(ctx.names.selector_labels()),
            ..LabelSelector::default()
        }),
        topology_key: HOSTNAME_KEY.to_owned(),
        ..PodAffinityTerm::default()
    };
    let anti = match preset {
        AntiAffinity::Disabled => return None,
        AntiAffinity::Preferred => PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: term,
                },
            ]),
            ..PodAntiAffinity::default()
        },
        AntiAffinity::Required => PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..PodAntiAffinity::default()
        },
    };
    Some(Affinity {
        pod_anti_affinity: Some(anti),
        ..Affinity::default()
    })
}

/// Non-root as the image's `valkey` user, with the RuntimeDefault seccomp
/// profile: what the restricted Pod Security profile asks.
fn default_pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(VALKEY_UID),
        run_as_group: Some(VALKEY_UID),
        fs_group: Some(VALKEY_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

fn default_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

fn container(ctx: &Ctx<'_>) -> Container {
    let spec = &ctx.vc.spec;
    let mut mounts = vec![
        mount("data", DATA_DIR, false),
        mount("config", CONFIG_DIR, true),
        mount("run", RUN_DIR, false),
    ];
    if acl_ref(ctx).is_some() {
        mounts.push(mount("acl", ACL_DIR, true));
    }
    if tls_secret(ctx).is_some() {
        mounts.push(mount("tls", TLS_DIR, true));
    }
    // valkey-cli over TLS presents the pod's own certificate
    // (`tls-auth-clients` is yes unless spec.config says otherwise).
    let cli = match tls_secret(ctx) {
        Some(_) => format!(
            "valkey-cli --tls --cacert {TLS_DIR}/ca.crt --cert {TLS_DIR}/tls.crt \
             --key {TLS_DIR}/tls.key -h 127.0.0.1 -p {VALKEY_PORT}"
        ),
        None => format!("valkey-cli -h 127.0.0.1 -p {VALKEY_PORT}"),
    };
    Container {
        name: "valkey".to_owned(),
        image: Some(spec.image.clone()),
        image_pull_policy: spec.image_pull_policy.map(|p| p.as_str().to_owned()),
        command: Some(vec![
            "sh".to_owned(),
            format!("{CONFIG_DIR}/{KEY_START_SH}"),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("valkey".to_owned()),
            container_port: VALKEY_PORT,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        env: Some(env(ctx)),
        resources: spec.resources.clone(),
        security_context: Some(
            spec.security_context
                .clone()
                .unwrap_or_else(default_security_context),
        ),
        volume_mounts: Some(mounts),
        // Ready as a master, or as a replica whose link to its master is
        // up: not while loading, and not while (re)synchronising, so the
        // PodDisruptionBudget counts a replica that is not in sync as
        // away, and a drain evicts the next pod only once it is.
        readiness_probe: Some(Probe {
            exec: Some(ExecAction {
                command: Some(vec!["sh".to_owned(), "-c".to_owned(), ready(&cli)]),
            }),
            initial_delay_seconds: Some(5),
            period_seconds: Some(5),
            timeout_seconds: Some(3),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        lifecycle: handover_wait(spec.termination_grace_period_seconds.unwrap_or(GRACE_SECS)).map(
            |wait| Lifecycle {
                pre_stop: Some(LifecycleHandler {
                    exec: Some(ExecAction {
                        command: Some(vec!["sh".to_owned(), "-c".to_owned(), pre_stop(&cli, wait)]),
                    }),
                    ..LifecycleHandler::default()
                }),
                ..Lifecycle::default()
            },
        ),
        // Alive while it accepts connections: a long load is not a hang.
        liveness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("valkey".to_owned()),
                ..TCPSocketAction::default()
            }),
            initial_delay_seconds: Some(30),
            period_seconds: Some(10),
            timeout_seconds: Some(5),
            failure_threshold: Some(6),
            ..Probe::default()
        }),
        ..Container::default()
    }
}

/// The pods' grace period unless the CR sets one (Kubernetes' default).
const GRACE_SECS: i64 = 30;
/// The longest the `preStop` hook waits for the switchover.
const HANDOVER_WAIT_SECS: i64 = 20;
/// What the hook leaves of the grace period, for Valkey's own stop (a
/// snapshot on SIGTERM) when no switchover comes (no Valkyrie running,
/// say).
const STOP_SECS: i64 = 10;

/// How long the hook waits in a pod whose grace period is `grace`: the
/// hook's time counts against it. None when nothing is left to wait.
fn handover_wait(grace: i64) -> Option<i64> {
    Some((grace - STOP_SECS).min(HANDOVER_WAIT_SECS)).filter(|w| *w > 0)
}

/// The `preStop` hook: while this Valkey is a master with replicas, wait
/// (bounded) for the switchover the reconciler starts when it sees the
/// pod being deleted (`kube/controller/handover.rs`). A replica, or a
/// master without replicas, stops at once.
/// The readiness check: `INFO replication` shows a master, or a linked
/// replica (INFO's lines end in CR LF; the patterns match their start).
fn ready(cli: &str) -> String {
    format!("{cli} info replication | grep -qE '^(role:master|master_link_status:up)'")
}

fn pre_stop(cli: &str, wait: i64) -> String {
    format!(
        "end=$(($(date +%s) + {wait})); \
         while [ \"$(date +%s)\" -lt \"$end\" ]; do \
           info=$({cli} info replication 2>/dev/null) || exit 0; \
           case \"$info\" in *role:master*) ;; *) exit 0 ;; esac; \
           case \"$info\" in *connected_slaves:0*) exit 0 ;; esac; \
           sleep 0.2; \
         done"
    )
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// The password Secret: the CR's, else the generated `<name>-auth`.
fn password_ref(ctx: &Ctx<'_>) -> (String, String) {
    match ctx
        .vc
        .spec
        .auth
        .as_ref()
        .and_then(|a| a.password_secret_ref.as_ref())
    {
        Some(r) => (r.name.clone(), r.key.clone()),
        None => (ctx.names.auth_secret(), SECRET_KEY_PASSWORD.to_owned()),
    }
}

fn acl_ref<'a>(ctx: &Ctx<'a>) -> Option<&'a crate::kube::crd::SecretKeyRef> {
    ctx.vc.spec.auth.as_ref()?.acl_secret_ref.as_ref()
}

fn env(ctx: &Ctx<'_>) -> Vec<EnvVar> {
    let (secret, key) = password_ref(ctx);
    let field = |name: &str, path: &str| EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    let value = |name: &str, value: String| EnvVar {
        name: name.to_owned(),
        value: Some(value),
        ..EnvVar::default()
    };
    let password = |name: &str| EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.clone(),
                key: key.clone(),
                ..SecretKeySelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    // Optional: a ConfigMap of an older Valkyrie lacks the key.
    let from_config = |name: &str, key: &str| EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: ctx.names.config_map(),
                key: key.to_owned(),
                optional: Some(true),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    vec![
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
        value("HEADLESS", ctx.names.headless()),
        value("CLUSTER_DOMAIN", ctx.observed.cluster_domain.to_owned()),
        password("VALKEY_PASSWORD"),
        // valkey-cli (the readiness probe) logs in with it.
        password("REDISCLI_AUTH"),
        from_config("VALKYRIE_MASTER", CONFIG_KEY_MASTER),
        from_config("VALKYRIE_START_FENCE", CONFIG_KEY_FENCE),
    ]
}

fn volumes(ctx: &Ctx<'_>) -> Vec<Volume> {
    let mut volumes = vec![
        Volume {
            name: "config".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: ctx.names.config_map(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        // The full configuration holds the password: memory only.
        Volume {
            name: "run".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_owned()),
                size_limit: Some(Quantity("1Mi".to_owned())),
            }),
            ..Volume::default()
        },
    ];
    if ctx.vc.spec.storage.is_none() {
        volumes.push(Volume {
            name: "data".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
    }
    if let Some(acl) = acl_ref(ctx) {
        volumes.push(Volume {
            name: "acl".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(acl.name.clone()),
                items: Some(vec![KeyToPath {
                    key: acl.key.clone(),
                    path: ACL_FILE.to_owned(),
                    ..KeyToPath::default()
                }]),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    if let Some(secret) = tls_secret(ctx) {
        // Mode as the ACL Secret's: the pod's own securityContext may set
        // no fsGroup, and valkey-server must read the key whatever its uid.
        volumes.push(Volume {
            name: "tls".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                items: Some(
                    ["ca.crt", "tls.crt", "tls.key"]
                        .into_iter()
                        .map(|key| KeyToPath {
                            key: key.to_owned(),
                            path: key.to_owned(),
                            ..KeyToPath::default()
                        })
                        .collect(),
                ),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    volumes
}
