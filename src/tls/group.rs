//! A group's own TLS toward its instances: the material of a Kubernetes
//! `ValkeyCluster`'s Secret (`spec.tls.secretName`), held in memory, with
//! the daemon's `tls-*` settings for everything else (protocols, suites,
//! `tls-verify-hostnames`).
//!
//! The Secret's `ca.crt` checks the servers' certificates and its
//! `tls.crt` and `tls.key` are the client certificate the links present
//! (the one the Valkey pods present to each other, which their
//! `tls-auth-clients` accepts). The bytes stand in [`Sources`] as files
//! named `<source>/ca.crt` and so on, so the build, the errors and the
//! expiry metric are the file-based material's own.
//!
//! One [`TlsContext`] per group is shared by all of the group's links: a
//! rotated Secret replaces its material, and new connections use it while
//! connections already up keep theirs, as a reload of the daemon's files
//! does.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Material, Outbound, Sources, TlsContext, TlsError};
use crate::config::{GroupTls, TlsSettings};

/// The settings a group's material is built with: `base` (the daemon's)
/// with TLS links on, no port, and the Secret's keys as the files.
fn settings(base: &TlsSettings, tls: &GroupTls) -> TlsSettings {
    let path = |key: &str| Some(PathBuf::from(format!("{}/{key}", tls.source)));
    TlsSettings {
        port: None,
        index: false,
        admin: false,
        replication: true,
        cert_file: path("tls.crt"),
        key_file: path("tls.key"),
        key_file_pass: None,
        client_cert_file: None,
        client_key_file: None,
        client_key_file_pass: None,
        ca_cert_file: path("ca.crt"),
        ca_cert_dir: None,
        ..base.clone()
    }
}

/// The Secret's bytes as the files [`settings`] names.
fn sources(settings: &TlsSettings, tls: &GroupTls) -> Sources {
    let files = [
        (&settings.cert_file, tls.cert.clone()),
        (&settings.key_file, tls.key.expose().as_bytes().to_vec()),
        (&settings.ca_cert_file, tls.ca.clone()),
    ];
    Sources {
        files: files
            .into_iter()
            .filter_map(|(path, bytes)| Some((path.clone()?, bytes)))
            .collect(),
    }
}

/// Checks that `tls` builds: a CA, and a certificate with its key. The
/// Kubernetes input checks a Secret before applying it, so a broken one
/// is reported on the CR and never replaces working material.
pub fn check(base: &TlsSettings, tls: &GroupTls) -> Result<(), TlsError> {
    let settings = settings(base, tls);
    Material::build(&settings, &sources(&settings, tls)).map(|_| ())
}

/// The links' TLS of `group`. Material that is not there yet (a group
/// restored from the state file) or does not build gives a context
/// without material: links fail their handshake, never fall back to
/// plain text, until [`update`] gives it some.
pub fn outbound(base: &TlsSettings, group: &str, tls: &GroupTls) -> Outbound {
    let settings = settings(base, tls);
    let context = if tls.is_pending() {
        TlsContext::empty(settings)
    } else {
        let sources = sources(&settings, tls);
        match TlsContext::from_sources(settings.clone(), sources) {
            Ok(context) => context,
            Err(e) => {
                tracing::warn!(group, source = %tls.source, "TLS material refused: {e}");
                crate::metrics::tls_reloaded(false);
                TlsContext::empty(settings)
            }
        }
    };
    let outbound = Outbound::of_group(Arc::new(context), &tls.source);
    record_expiry(group, &outbound);
    outbound
}

/// Puts `tls` in use for `group`'s new connections. `Ok(false)`: the
/// material was already in use (or is not there yet); on error the
/// material in use stays.
pub fn update(group: &str, outbound: &Outbound, tls: &GroupTls) -> Result<bool, TlsError> {
    if tls.is_pending() {
        return Ok(false);
    }
    let context = outbound.context();
    let replaced = context.replace(sources(context.settings(), tls), false)?;
    if replaced {
        crate::metrics::tls_reloaded(true);
        tracing::info!(group, source = %tls.source, "TLS material of the group replaced; new connections use it");
        record_expiry(group, outbound);
    }
    Ok(replaced)
}

#[allow(clippy::disallowed_methods)] // a certificate's expiry is wall-clock time
/// Sets `valkyrie_tls_cert_expiry_seconds` of `group`'s certificates (the
/// shell calls it with its gauges, once a second).
pub fn record_expiry(group: &str, outbound: &Outbound) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    for cert in &outbound.context().material().certs {
        crate::metrics::tls_group_cert_expiry(group, cert.role, &cert.path, cert.not_after - now);
    }
}
