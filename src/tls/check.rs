//! What a reload must prove before its certificates are served: every
//! leaf (the ports' certificate, the links' client certificate) is inside
//! its validity window now, and chains to the configured CA when one is
//! configured. A certificate no client can verify is refused and the
//! material in use stays: taking it would break every new handshake while
//! `valkyrie_tls_reloads_total{result="ok"}` said all was well (and, for
//! one not yet valid, while the expiry metric stayed positive).
//!
//! The first load is not held to this (a daemon must be able to start
//! during a certificate incident; its handshakes then fail as the files
//! say); reloads and a group's rotated Secret are.

use std::path::Path;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::error::TlsError;

/// Which use a leaf is checked for (its extended key usage, when it has
/// one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// Presented by the TLS ports.
    Server,
    /// Presented by the links to instances and peers.
    Client,
}

/// Checks `chain` (leaf first) at `now`: the leaf's validity window, then
/// its path to `roots` when there are any.
pub fn usable(
    usage: Usage,
    path: &Path,
    chain: &[CertificateDer<'static>],
    roots: &RootCertStore,
    provider: &CryptoProvider,
    now: UnixTime,
) -> Result<(), TlsError> {
    let bad = |message: String| TlsError::Bad {
        path: path.to_path_buf(),
        message,
    };
    let Some(leaf) = chain.first() else {
        return Err(bad("no certificate".into()));
    };
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| bad(format!("not an X.509 certificate: {e}")))?;
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = parsed.validity();
    if secs < validity.not_before.timestamp() {
        return Err(bad(format!(
            "not valid before {} (refused: no client could verify it yet)",
            validity.not_before
        )));
    }
    if secs > validity.not_after.timestamp() {
        return Err(bad(format!("expired at {} (refused)", validity.not_after)));
    }
    if roots.is_empty() {
        return Ok(());
    }
    let end = webpki::EndEntityCert::try_from(leaf)
        .map_err(|e| bad(format!("not a usable end-entity certificate: {e}")))?;
    let key_usage = match usage {
        Usage::Server => webpki::KeyUsage::server_auth(),
        Usage::Client => webpki::KeyUsage::client_auth(),
    };
    end.verify_for_usage(
        provider.signature_verification_algorithms.all,
        &roots.roots,
        &chain[1..],
        now,
        key_usage,
        None,
        None,
    )
    .map(|_| ())
    .map_err(|e| {
        bad(format!(
            "does not chain to the configured CA ({e:?}); refused"
        ))
    })
}
