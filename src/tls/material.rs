//! Certificate material: the files the TLS directives name, read into
//! rustls's server and client configurations.
//!
//! [`Sources`] is the bytes of every file, read in one pass: the reloader
//! compares them to what is in use, so a change of any file (an atomic
//! rename included) is seen, and a half-finished rotation (a new
//! certificate beside the old key) is refused by [`Material::build`]
//! instead of served.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};

use super::check::{Usage, usable};
use super::error::TlsError;
use crate::config::tls_ciphers::{TLS12_SUITES, TLS13_SUITES};
use crate::config::{AuthClients, Secret, TlsSettings, TlsVersion};

/// The bytes of every file the settings name, in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// `(path, bytes)` of each file; a CA directory contributes its files
    /// in name order.
    pub files: Vec<(PathBuf, Vec<u8>)>,
}

impl Sources {
    /// Reads every file `settings` names.
    pub fn read(settings: &TlsSettings) -> Result<Sources, TlsError> {
        let mut files = Vec::new();
        let named = [
            &settings.cert_file,
            &settings.key_file,
            &settings.client_cert_file,
            &settings.client_key_file,
            &settings.ca_cert_file,
        ];
        for path in named.into_iter().flatten() {
            files.push((path.clone(), read(path)?));
        }
        if let Some(dir) = &settings.ca_cert_dir {
            for path in ca_dir_files(dir)? {
                let bytes = read(&path)?;
                files.push((path, bytes));
            }
        }
        Ok(Sources { files })
    }

    fn get(&self, path: &Option<PathBuf>) -> Option<(&Path, &[u8])> {
        let path = path.as_ref()?;
        self.files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(p, b)| (p.as_path(), b.as_slice()))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The regular files of a CA directory (OpenSSL's hashed links and plain
/// PEM files alike), in name order; hidden entries (Kubernetes' `..data`)
/// are skipped, their targets appear under their own names.
fn ca_dir_files(dir: &Path) -> Result<Vec<PathBuf>, TlsError> {
    let entries = std::fs::read_dir(dir).map_err(|e| TlsError::Read {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    Ok(paths)
}

/// One certificate in use, for the expiry metric and the logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// `server`, `client` or `ca`.
    pub role: &'static str,
    /// The file it came from.
    pub path: PathBuf,
    /// Its serial number, in hexadecimal.
    pub serial: String,
    /// The end of its validity, in seconds since the Unix epoch.
    pub not_after: i64,
}

/// rustls configurations built from one set of [`Sources`].
#[derive(Debug)]
pub struct Material {
    /// For the TLS ports (`None` when no port serves TLS).
    pub server: Option<Arc<ServerConfig>>,
    /// For links to instances and peers (`None` without `tls-replication`).
    pub client: Option<Arc<ClientConfig>>,
    /// The certificates in use.
    pub certs: Vec<CertInfo>,
}

impl Material {
    /// Builds both configurations; any unreadable, mismatched or
    /// unusable file is an error naming it.
    pub fn build(settings: &TlsSettings, sources: &Sources) -> Result<Material, TlsError> {
        Material::build_at(settings, sources, None)
    }

    /// As [`Material::build`], and every leaf must also be usable at
    /// `now` ([`super::check::usable`]): what a reload takes.
    pub fn build_checked(
        settings: &TlsSettings,
        sources: &Sources,
        now: UnixTime,
    ) -> Result<Material, TlsError> {
        Material::build_at(settings, sources, Some(now))
    }

    fn build_at(
        settings: &TlsSettings,
        sources: &Sources,
        check: Option<UnixTime>,
    ) -> Result<Material, TlsError> {
        let provider = Arc::new(provider(settings));
        let versions = versions(settings);
        let mut certs = Vec::new();
        let roots = roots(settings, sources, &mut certs)?;
        let server = if settings.serves() {
            let (chain, key) = key_pair(
                sources,
                &settings.cert_file,
                &settings.key_file,
                settings.key_file_pass.as_ref(),
                &provider,
            )?
            .ok_or(TlsError::Missing("tls-cert-file and tls-key-file"))?;
            if let Some(now) = check {
                let path = settings.cert_file.as_deref().unwrap_or(Path::new(""));
                usable(Usage::Server, path, &chain, &roots, &provider, now)?;
            }
            certs.push(info("server", settings.cert_file.as_deref(), &chain[0])?);
            Some(Arc::new(server_config(
                settings, &provider, &versions, &roots, chain, key,
            )?))
        } else {
            None
        };
        let client = if settings.replication {
            let (cert, key, pass) = if settings.client_cert_file.is_some() {
                (
                    &settings.client_cert_file,
                    &settings.client_key_file,
                    settings.client_key_file_pass.as_ref(),
                )
            } else {
                (
                    &settings.cert_file,
                    &settings.key_file,
                    settings.key_file_pass.as_ref(),
                )
            };
            let builder = ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&versions)
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
            let builder = if settings.verify_hostnames {
                builder.with_root_certificates(roots.clone())
            } else {
                let chain =
                    WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
                        .build()
                        .map_err(|e| TlsError::Rustls(e.to_string()))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(super::verify::ChainOnly(chain)))
            };
            let config = match key_pair(sources, cert, key, pass, &provider)? {
                Some((chain, key)) => {
                    if let Some(now) = check {
                        let path = cert.as_deref().unwrap_or(Path::new(""));
                        usable(Usage::Client, path, &chain, &roots, &provider, now)?;
                    }
                    certs.push(info("client", cert.as_deref(), &chain[0])?);
                    builder
                        .with_client_auth_cert(chain, key)
                        .map_err(|e| TlsError::Rustls(e.to_string()))?
                }
                None => builder.with_no_client_auth(),
            };
            Some(Arc::new(config))
        } else {
            None
        };
        Ok(Material {
            server,
            client,
            certs,
        })
    }

    /// The serial of the certificate the TLS ports present.
    pub fn server_serial(&self) -> Option<&str> {
        self.certs
            .iter()
            .find(|c| c.role == "server")
            .map(|c| c.serial.as_str())
    }
}

fn server_config(
    settings: &TlsSettings,
    provider: &Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    roots: &Arc<RootCertStore>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, TlsError> {
    let rustls_err = |e: rustls::Error| TlsError::Rustls(e.to_string());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(rustls_err)?;
    let builder = match settings.auth_clients {
        AuthClients::No => builder.with_no_client_auth(),
        mode => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
            let verifier = if mode == AuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(rustls_err)?;
    config.ignore_client_order = settings.prefer_server_ciphers;
    // Resumption by stateless tickets (encrypted with a key rustls rotates
    // every 6 hours), as OpenSSL does, whatever `tls-session-caching` says:
    // Valkey's `no` turns off the server's session cache, not OpenSSL's
    // tickets. Without a ticketer rustls keeps every TLS 1.3 session it
    // issues a ticket for (two per handshake, client certificate
    // included) in the cache, which grew the daemon by ~30 MiB over
    // 24,000 mutual-TLS handshakes; and with no ticket at all, clients
    // that send their first command in a second segment without
    // TCP_NODELAY (valkey-benchmark) waited 40 ms for a delayed ACK on
    // every connection.
    config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(rustls_err)?;
    config.session_storage = if settings.session_caching && settings.session_cache_size > 0 {
        // TLS 1.2 session ids only, now.
        ServerSessionMemoryCache::new(settings.session_cache_size)
    } else {
        Arc::new(NoServerSessionStorage {})
    };
    Ok(config)
}

/// ring's provider with the suites `tls-ciphers` and `tls-ciphersuites`
/// keep, in their order.
fn provider(settings: &TlsSettings) -> CryptoProvider {
    let base = rustls::crypto::ring::default_provider();
    let name_of = |suite: &rustls::SupportedCipherSuite| -> Option<&'static str> {
        let iana = format!("{:?}", suite.suite());
        TLS12_SUITES
            .iter()
            .chain(TLS13_SUITES.iter())
            .copied()
            .find(|n| iana_name(n) == iana)
    };
    let mut suites: Vec<rustls::SupportedCipherSuite> = Vec::new();
    for (wanted, tls13) in [(&settings.ciphersuites, true), (&settings.ciphers, false)] {
        let of_version: Vec<_> = base
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some() == tls13)
            .copied()
            .collect();
        match wanted {
            None => suites.extend(of_version),
            Some(names) => {
                for name in names {
                    if let Some(s) = of_version
                        .iter()
                        .find(|s| name_of(s) == Some(name.as_str()))
                    {
                        suites.push(*s);
                    }
                }
            }
        }
    }
    CryptoProvider {
        cipher_suites: suites,
        ..base
    }
}

/// rustls's debug name of a suite given its OpenSSL (TLS 1.2) or IANA
/// (TLS 1.3) name.
fn iana_name(name: &str) -> String {
    if let Some(rest) = name.strip_prefix("TLS_") {
        return format!("TLS13_{rest}");
    }
    // ECDHE-RSA-AES128-GCM-SHA256 -> TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    let (kx, rest) = name
        .strip_prefix("ECDHE-ECDSA-")
        .map(|r| ("ECDHE_ECDSA", r))
        .or_else(|| name.strip_prefix("ECDHE-RSA-").map(|r| ("ECDHE_RSA", r)))
        .unwrap_or(("", name));
    let cipher = match rest {
        "AES128-GCM-SHA256" => "AES_128_GCM_SHA256",
        "AES256-GCM-SHA384" => "AES_256_GCM_SHA384",
        "CHACHA20-POLY1305" => "CHACHA20_POLY1305_SHA256",
        other => other,
    };
    format!("TLS_{kx}_WITH_{cipher}")
}

fn versions(settings: &TlsSettings) -> Vec<&'static SupportedProtocolVersion> {
    if settings.protocols.is_empty() {
        return vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    settings
        .protocols
        .iter()
        .rev()
        .map(|v| match v {
            TlsVersion::Tls13 => &rustls::version::TLS13,
            TlsVersion::Tls12 => &rustls::version::TLS12,
        })
        .collect()
}

fn roots(
    settings: &TlsSettings,
    sources: &Sources,
    certs: &mut Vec<CertInfo>,
) -> Result<Arc<RootCertStore>, TlsError> {
    let mut store = RootCertStore::empty();
    let mut ca_files: Vec<(&Path, &[u8])> =
        sources.get(&settings.ca_cert_file).into_iter().collect();
    if let Some(dir) = &settings.ca_cert_dir {
        ca_files.extend(
            sources
                .files
                .iter()
                .filter(|(p, _)| p.starts_with(dir))
                .map(|(p, b)| (p.as_path(), b.as_slice())),
        );
    }
    for (path, bytes) in ca_files {
        let found = parse_certs(path, bytes)?;
        if found.is_empty() && settings.ca_cert_file.as_deref() == Some(path) {
            return Err(TlsError::NoCertificate(path.to_path_buf()));
        }
        for cert in found {
            certs.push(info("ca", Some(path), &cert)?);
            store.add(cert).map_err(|e| TlsError::Bad {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        }
    }
    Ok(Arc::new(store))
}

fn parse_certs(path: &Path, bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Bad {
            path: path.to_path_buf(),
            message: format!("not a PEM certificate file: {e}"),
        })
}

/// The chain and key of `cert`/`key`, checked to belong together; `None`
/// when neither file is set.
#[allow(clippy::type_complexity)]
fn key_pair(
    sources: &Sources,
    cert: &Option<PathBuf>,
    key: &Option<PathBuf>,
    pass: Option<&Secret>,
    provider: &CryptoProvider,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, TlsError> {
    let (Some((cert_path, cert_bytes)), Some((key_path, key_bytes))) =
        (sources.get(cert), sources.get(key))
    else {
        return Ok(None);
    };
    let chain = parse_certs(cert_path, cert_bytes)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert_path.to_path_buf()));
    }
    let key = private_key(key_path, key_bytes, pass)?;
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| TlsError::Bad {
            path: key_path.to_path_buf(),
            message: format!("unusable private key: {e}"),
        })?;
    // A rotation caught half way (new certificate, old key) must not be
    // served: every handshake would fail.
    match CertifiedKey::new(chain.clone(), signing).keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(_) => {
            return Err(TlsError::Mismatch {
                cert: cert_path.to_path_buf(),
                key: key_path.to_path_buf(),
            });
        }
    }
    Ok(Some((chain, key)))
}

/// A PEM private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC), or PKCS#8
/// encrypted with `pass`.
fn private_key(
    path: &Path,
    bytes: &[u8],
    pass: Option<&Secret>,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bad = |message: String| TlsError::Bad {
        path: path.to_path_buf(),
        message,
    };
    let text = String::from_utf8_lossy(bytes);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(bad(
            "a key encrypted in OpenSSL's legacy PEM format is not supported; \
                        convert it to PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)"
                .into(),
        ));
    }
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        let Some(pass) = pass else {
            return Err(bad(
                "the key is encrypted and no passphrase is set (tls-key-file-pass)".into(),
            ));
        };
        let (_, doc) = pkcs8::der::SecretDocument::from_pem(&text)
            .map_err(|e| bad(format!("not a PEM key: {e}")))?;
        let encrypted = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes())
            .map_err(|e| bad(format!("not an encrypted PKCS#8 key: {e}")))?;
        let plain = encrypted
            .decrypt(pass.expose())
            .map_err(|_| bad("cannot decrypt the key: wrong passphrase or cipher".into()))?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    PrivateKeyDer::from_pem_slice(bytes).map_err(|e| bad(format!("no private key found: {e}")))
}

/// What the expiry metric and the logs say of `cert`.
fn info(
    role: &'static str,
    path: Option<&Path>,
    cert: &CertificateDer<'_>,
) -> Result<CertInfo, TlsError> {
    let path = path.map(Path::to_path_buf).unwrap_or_default();
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|e| TlsError::Bad {
            path: path.clone(),
            message: format!("not an X.509 certificate: {e}"),
        })?;
    Ok(CertInfo {
        role,
        serial: parsed
            .tbs_certificate
            .raw_serial_as_string()
            .replace(':', ""),
        not_after: parsed.validity().not_after.timestamp(),
        path,
    })
}

/// The suites [`provider`] keeps for `settings` (the tests check every
/// name maps to one).
#[cfg(test)]
pub(crate) fn tests_provider(settings: &TlsSettings) -> Vec<rustls::SupportedCipherSuite> {
    provider(settings).cipher_suites
}
