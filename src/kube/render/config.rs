//! The ConfigMap `<name>-config` (`valkey.conf`, `start.sh`, and the
//! master pods start from) and the generated Secret `<name>-auth`.
//!
//! `start.sh` rebuilds the configuration at every container start, so a
//! configuration rewritten by `CONFIG REWRITE` never decides a pod's role:
//! the pod Valkyrie last advertised as the master (the ConfigMap's
//! `master`, read into the environment when the container starts) starts
//! as a master, every other pod as its replica. Each pod announces its
//! stable DNS name with `--replica-announce-ip`, so masters list replicas
//! by the names Valkyrie monitors them by.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use sha2::{Digest, Sha256};

use super::context::{Ctx, RenderError};
use super::names::{
    CONFIG_KEY_EPOCH, CONFIG_KEY_FENCE, CONFIG_KEY_MASTER, SECRET_KEY_PASSWORD, VALKEY_PORT,
};
use crate::kube::crd::{MANAGED_CONFIG, WriteFenceMode};

/// Where the ConfigMap is mounted.
pub const CONFIG_DIR: &str = "/etc/valkey";
/// Where the TLS Secret is mounted.
pub const TLS_DIR: &str = "/etc/valkey-tls";
/// Where the ACL Secret is mounted.
pub const ACL_DIR: &str = "/etc/valkey-acl";
/// The ACL file's name in [`ACL_DIR`].
pub const ACL_FILE: &str = "users.acl";
/// The in-memory directory `start.sh` writes the full configuration to.
pub const RUN_DIR: &str = "/run/valkey";
/// The data directory (`dir`).
pub const DATA_DIR: &str = "/data";
/// The ConfigMap key of the configuration template.
pub const KEY_VALKEY_CONF: &str = "valkey.conf";
/// The ConfigMap key of the start script.
pub const KEY_START_SH: &str = "start.sh";

/// The ConfigMap: `valkey.conf`, `start.sh`, and the master to start from
/// (the status's current master, else pod 0) with its config epoch.
pub(crate) fn config_map(ctx: &Ctx<'_>) -> Result<ConfigMap, RenderError> {
    let status = ctx.vc.status.as_ref();
    let master = status
        .and_then(|s| s.current_master.as_ref())
        .map(|m| m.address.clone())
        .unwrap_or_else(|| ctx.names.pod_address(0, ctx.observed.cluster_domain));
    let epoch = status.and_then(|s| s.config_epoch).unwrap_or(0);
    let data = BTreeMap::from([
        (KEY_VALKEY_CONF.to_owned(), valkey_conf(ctx)?),
        (KEY_START_SH.to_owned(), start_sh(ctx)),
        (CONFIG_KEY_MASTER.to_owned(), master),
        (CONFIG_KEY_EPOCH.to_owned(), epoch.to_string()),
        (CONFIG_KEY_FENCE.to_owned(), start_fence(ctx)),
    ]);
    Ok(ConfigMap {
        metadata: ctx.meta(ctx.names.config_map()),
        data: Some(data),
        ..ConfigMap::default()
    })
}

/// A digest of what a Valkey container starts from (`valkey.conf` and
/// `start.sh`, not the master): the pod template carries it, so a new
/// configuration makes a new StatefulSet revision.
pub(crate) fn config_hash(config_map: &ConfigMap) -> String {
    let mut hasher = Sha256::new();
    for key in [KEY_VALKEY_CONF, KEY_START_SH] {
        let value = config_map
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map_or("", String::as_str);
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(value.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize()[..8]
        .iter()
        .fold(String::with_capacity(16), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// `valkey.conf`: the CR's `spec.config`, then the directives Valkyrie
/// manages. `start.sh` appends the password and the master.
fn valkey_conf(ctx: &Ctx<'_>) -> Result<String, RenderError> {
    let spec = &ctx.vc.spec;
    let mut out = format!(
        "# valkey.conf of ValkeyCluster {}/{}, written by Valkyrie: edit the\n\
         # CR's spec.config, not this file. start.sh adds the password and\n\
         # the master at every start.\n",
        ctx.names.namespace, ctx.names.name
    );
    for (key, value) in &spec.config {
        check_directive(key, value)?;
        let _ = writeln!(out, "{key} {value}");
    }
    out.push_str("# Managed by Valkyrie.\n");
    if tls_secret(ctx).is_some() {
        // TLS only, on the port the pods are known by: clients, replicas
        // and Valkyrie alike.
        let _ = writeln!(out, "port 0");
        let _ = writeln!(out, "tls-port {VALKEY_PORT}");
        let _ = writeln!(out, "tls-cert-file {TLS_DIR}/tls.crt");
        let _ = writeln!(out, "tls-key-file {TLS_DIR}/tls.key");
        let _ = writeln!(out, "tls-ca-cert-file {TLS_DIR}/ca.crt");
        let _ = writeln!(out, "tls-replication yes");
    } else {
        let _ = writeln!(out, "port {VALKEY_PORT}");
    }
    let _ = writeln!(out, "dir {DATA_DIR}");
    if spec
        .auth
        .as_ref()
        .is_some_and(|a| a.acl_secret_ref.is_some())
    {
        let _ = writeln!(out, "aclfile {ACL_DIR}/{ACL_FILE}");
    }
    Ok(out)
}

/// The TLS Secret's name when the CR asks for TLS.
pub(crate) fn tls_secret<'a>(ctx: &Ctx<'a>) -> Option<&'a str> {
    let tls = ctx.vc.spec.tls.as_ref().filter(|t| t.enabled)?;
    tls.secret_name.as_deref()
}

/// What the CRD's rules check for `spec.config`, checked again: a line
/// break or a managed directive must not reach `valkey.conf` even if the
/// CRD installed is an older one.
fn check_directive(key: &str, value: &str) -> Result<(), RenderError> {
    let mut chars = key.chars();
    let well_formed = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !well_formed {
        return Err(RenderError::Config(format!(
            "{key:?} is not a valkey.conf directive in lower case"
        )));
    }
    if MANAGED_CONFIG.contains(&key) {
        return Err(RenderError::Config(format!("{key} is managed by Valkyrie")));
    }
    if value.contains(['\n', '\r']) {
        return Err(RenderError::Config(format!("{key}: a value is one line")));
    }
    Ok(())
}

/// The write fence a pod starting as the master starts with: a majority
/// of the group's replicas, the fence's lag (empty when the fence is off
/// or there are no replicas). A master that restarted, or a pod recreated
/// empty under the master's name, then acknowledges no write before its
/// replicas sync from it, which Valkyrie's empty-restart guard forestalls
/// by failing over: so no client write lands in the window between the
/// restart and that failover (the Sentinel port still names the pod's
/// stable address then). Once Valkyrie sees the master, its governor sets
/// the fence as the mode says (in `auto`, from the replicas online then).
/// Not hashed into the pod template: a scale changes it, and must not
/// restart the pods.
fn start_fence(ctx: &Ctx<'_>) -> String {
    use crate::core::group::write_fence::majority;
    let monitoring = ctx.vc.spec.monitoring.clone().unwrap_or_default();
    let replicas = u64::try_from(ctx.vc.spec.replicas.saturating_sub(1)).unwrap_or(0);
    match monitoring.write_fence {
        WriteFenceMode::Off => String::new(),
        _ if replicas == 0 => String::new(),
        _ => format!(
            "{} {}",
            majority(replicas),
            monitoring.write_fence_lag_seconds
        ),
    }
}

/// The container's entry point (POSIX sh; the environment is set by the
/// StatefulSet: POD_NAME, POD_NAMESPACE, HEADLESS, CLUSTER_DOMAIN,
/// VALKEY_PASSWORD, VALKYRIE_MASTER and VALKYRIE_START_FENCE).
fn start_sh(ctx: &Ctx<'_>) -> String {
    format!(
        r#"#!/bin/sh
# Starts valkey-server for ValkeyCluster {namespace}/{name}; written by Valkyrie.
# The configuration is rebuilt at every start: the pod Valkyrie last
# advertised as the master ($VALKYRIE_MASTER) starts as the master, every
# other pod as its replica; each announces its stable DNS name.
set -eu
fqdn="$POD_NAME.$HEADLESS.$POD_NAMESPACE.svc.$CLUSTER_DOMAIN"
quote() {{ printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"; }}
umask 077
{{
  cat {CONFIG_DIR}/{KEY_VALKEY_CONF}
  printf 'requirepass %s\n' "$(quote "$VALKEY_PASSWORD")"
  printf 'masterauth %s\n' "$(quote "$VALKEY_PASSWORD")"
  master="${{VALKYRIE_MASTER:-}}"
  if [ -n "$master" ] && [ "$master" != "$fqdn:{VALKEY_PORT}" ]; then
    printf 'replicaof %s %s\n' "${{master%:*}}" "${{master##*:}}"
  elif [ -n "${{VALKYRIE_START_FENCE:-}}" ]; then
    # The master starts fenced: no write before its replicas are back.
    printf 'min-replicas-to-write %s\n' "${{VALKYRIE_START_FENCE% *}}"
    printf 'min-replicas-max-lag %s\n' "${{VALKYRIE_START_FENCE#* }}"
  fi
}} > {RUN_DIR}/valkey.conf
exec valkey-server {RUN_DIR}/valkey.conf --replica-announce-ip "$fqdn" --replica-announce-port {VALKEY_PORT}
"#,
        namespace = ctx.names.namespace,
        name = ctx.names.name,
    )
}

/// The Secret `<name>-auth`, when the CR names no password Secret and the
/// caller passed a fresh password (only when the Secret does not exist).
pub(crate) fn generated_secret(ctx: &Ctx<'_>) -> Option<Secret> {
    let named = ctx
        .vc
        .spec
        .auth
        .as_ref()
        .is_some_and(|a| a.password_secret_ref.is_some());
    if named {
        return None;
    }
    let password = ctx.observed.generated_password?;
    Some(Secret {
        metadata: ctx.meta(ctx.names.auth_secret()),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            SECRET_KEY_PASSWORD.to_owned(),
            ByteString(password.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    })
}
