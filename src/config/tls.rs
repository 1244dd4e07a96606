//! The TLS directives of `sentinel.conf`, as Valkey 8 spells them, and
//! Valkyrie's own `index-tls` and `admin-tls`.
//!
//! This module owns what the file says about TLS ([`TlsSettings`]) and how
//! each directive is read. Loading the files those directives name, and
//! reloading them, is [`crate::tls`]'s. What rustls cannot honour exactly
//! is an error naming the line (a protocol older than TLS 1.2, a cipher
//! suite it does not implement, a DH parameters file that would be silently
//! unused by a client that needs it …) or a note that says what is done
//! instead, never a silent difference.

use std::path::PathBuf;

use super::secret::Secret;

/// `tls-auth-clients`: whether clients of Valkyrie's TLS ports must
/// present a certificate signed by the CA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthClients {
    /// `yes` (Valkey's default): a client without a valid certificate is
    /// refused during the handshake.
    #[default]
    Required,
    /// `optional`: a certificate, when sent, must be valid; none is fine.
    Optional,
    /// `no`: no certificate is asked for.
    No,
}

/// A TLS protocol version rustls implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// Everything the configuration says about TLS. Paths are kept as written
/// (relative ones are relative to the working directory, as in Valkey).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsSettings {
    /// `tls-port`: the Sentinel port over TLS. `None`: no TLS port; in a
    /// [`Config`](super::Config) built in code, `Some(0)` takes any free
    /// port (the file's `tls-port 0` means none, as in Valkey).
    pub port: Option<u16>,
    /// `tls-cert-file`: the certificate chain every TLS port presents, and
    /// the client certificate of links unless `tls-client-cert-file` is
    /// set.
    pub cert_file: Option<PathBuf>,
    /// `tls-key-file`.
    pub key_file: Option<PathBuf>,
    /// `tls-key-file-pass`: the passphrase of an encrypted (PKCS#8) key.
    pub key_file_pass: Option<Secret>,
    /// `tls-client-cert-file`: the certificate links to Valkey and to
    /// peers present.
    pub client_cert_file: Option<PathBuf>,
    /// `tls-client-key-file`.
    pub client_key_file: Option<PathBuf>,
    /// `tls-client-key-file-pass`.
    pub client_key_file_pass: Option<Secret>,
    /// `tls-ca-cert-file`: the CA clients' certificates and the monitored
    /// servers' certificates are checked against.
    pub ca_cert_file: Option<PathBuf>,
    /// `tls-ca-cert-dir`: every PEM certificate in the directory is a CA.
    pub ca_cert_dir: Option<PathBuf>,
    /// `tls-auth-clients`.
    pub auth_clients: AuthClients,
    /// `tls-protocols`: the versions offered (both when empty).
    pub protocols: Vec<TlsVersion>,
    /// `tls-ciphers`: TLS 1.2 suites, by their OpenSSL names (`None`:
    /// rustls's own list).
    pub ciphers: Option<Vec<String>>,
    /// `tls-ciphersuites`: TLS 1.3 suites, by their IANA names.
    pub ciphersuites: Option<Vec<String>>,
    /// `tls-prefer-server-ciphers`: the server's order of suites wins.
    pub prefer_server_ciphers: bool,
    /// `tls-session-caching` (default yes): TLS 1.2 session ids and 1.3
    /// resumption tickets kept by the server.
    pub session_caching: bool,
    /// `tls-session-cache-size` (default 20,480 sessions, as Valkey).
    pub session_cache_size: usize,
    /// `tls-replication`: links to the monitored instances and to peers
    /// use TLS; the hello announces `tls-port`.
    pub replication: bool,
    /// `tls-verify-hostnames` (Valkyrie's, default yes): links check that
    /// the server's certificate names the host they dial, not only that
    /// the CA signed it. `no` checks the chain only, as Valkey Sentinel
    /// does, for certificates without the addresses in their SANs.
    pub verify_hostnames: bool,
    /// `index-tls` (Valkyrie's): the index port speaks TLS.
    pub index: bool,
    /// `admin-tls` (Valkyrie's): the admin HTTP port speaks TLS (HTTPS).
    pub admin: bool,
}

/// Valkey's default `tls-session-cache-size`.
pub const SESSION_CACHE_SIZE: usize = 20 * 1024;

impl TlsSettings {
    /// Settings with Valkey's defaults and TLS off.
    pub fn new() -> TlsSettings {
        TlsSettings {
            session_caching: true,
            session_cache_size: SESSION_CACHE_SIZE,
            verify_hostnames: true,
            ..TlsSettings::default()
        }
    }

    /// Whether anything uses TLS: a TLS port, TLS on the index or admin
    /// port, or TLS links.
    pub fn enabled(&self) -> bool {
        self.port.is_some() || self.replication || self.index || self.admin
    }

    /// Whether a port serves TLS (and so needs the certificate and key).
    pub fn serves(&self) -> bool {
        self.port.is_some() || self.index || self.admin
    }

    /// What is missing for the TLS in use, naming the directive: the
    /// certificate and key of a TLS port, the CA that checks clients'
    /// certificates or the monitored servers'.
    pub fn missing(&self) -> Option<&'static str> {
        let has_ca = self.ca_cert_file.is_some() || self.ca_cert_dir.is_some();
        if self.serves() && (self.cert_file.is_none() || self.key_file.is_none()) {
            return Some("a TLS port needs 'tls-cert-file' and 'tls-key-file'");
        }
        if self.serves() && self.auth_clients != AuthClients::No && !has_ca {
            return Some(
                "'tls-auth-clients' yes or optional needs 'tls-ca-cert-file' or 'tls-ca-cert-dir' \
                 (or set 'tls-auth-clients no')",
            );
        }
        if self.replication && !has_ca {
            return Some(
                "'tls-replication yes' needs 'tls-ca-cert-file' or 'tls-ca-cert-dir': the \
                 monitored servers' certificates are checked against it",
            );
        }
        let client_cert = self.client_cert_file.is_some() || self.cert_file.is_some();
        let client_key = self.client_key_file.is_some() || self.key_file.is_some();
        if self.replication && client_cert != client_key {
            return Some("a client certificate needs its key, and a key its certificate");
        }
        None
    }

    /// Reads one TLS directive (`name` in lower case, `tls-…`, `index-tls`
    /// or `admin-tls`); notes go to `note`. An unknown `tls-…` directive
    /// is an error.
    pub fn directive(
        &mut self,
        name: &str,
        args: &[String],
        note: &mut dyn FnMut(String),
    ) -> Result<(), String> {
        let one = || match args {
            [v] => Ok(v.as_str()),
            _ => Err(format!("wrong number of arguments for '{name}'")),
        };
        let path = || one().map(|v| (!v.is_empty()).then(|| PathBuf::from(v)));
        let secret = || one().map(|v| (!v.is_empty()).then(|| Secret::new(v)));
        match name {
            "tls-port" => {
                let port = super::bounds::listen_port(one()?)?;
                self.port = (port != 0).then_some(port);
            }
            "tls-cert-file" => self.cert_file = path()?,
            "tls-key-file" => self.key_file = path()?,
            "tls-key-file-pass" => self.key_file_pass = secret()?,
            "tls-client-cert-file" => self.client_cert_file = path()?,
            "tls-client-key-file" => self.client_key_file = path()?,
            "tls-client-key-file-pass" => self.client_key_file_pass = secret()?,
            "tls-ca-cert-file" => self.ca_cert_file = path()?,
            "tls-ca-cert-dir" => self.ca_cert_dir = path()?,
            "tls-auth-clients" => {
                self.auth_clients = match one()?.to_ascii_lowercase().as_str() {
                    "yes" => AuthClients::Required,
                    "optional" => AuthClients::Optional,
                    "no" => AuthClients::No,
                    other => return Err(format!("'{other}' must be yes, no or optional")),
                }
            }
            "tls-protocols" => self.protocols = protocols(&args.join(" "))?,
            "tls-ciphers" => self.ciphers = super::tls_ciphers::tls12(one()?, note)?,
            "tls-ciphersuites" => self.ciphersuites = Some(super::tls_ciphers::tls13(one()?)?),
            "tls-prefer-server-ciphers" => self.prefer_server_ciphers = yes_no(one()?)?,
            "tls-session-caching" => self.session_caching = yes_no(one()?)?,
            "tls-session-cache-size" => {
                let v = one()?;
                self.session_cache_size = v
                    .parse()
                    .map_err(|_| format!("'{v}' is not a non-negative integer"))?;
            }
            "tls-session-cache-timeout" => {
                one()?;
                note(format!(
                    "'{name}' has no effect in Valkyrie: rustls keeps cached sessions until the \
                     cache ('tls-session-cache-size') is full, and resumption tickets for 6 hours"
                ));
            }
            "tls-replication" => self.replication = yes_no(one()?)?,
            "tls-cluster" => {
                one()?;
                note(format!(
                    "'{name}' has no effect in Valkyrie: a sentinel has no cluster bus"
                ));
            }
            "tls-dh-params-file" => {
                one()?;
                note(format!(
                    "'{name}' has no effect in Valkyrie: rustls offers no finite-field \
                     Diffie-Hellman suites; key exchange is ECDHE (X25519, P-256, P-384)"
                ));
            }
            "tls-verify-hostnames" => self.verify_hostnames = yes_no(one()?)?,
            "index-tls" => self.index = yes_no(one()?)?,
            "admin-tls" => self.admin = yes_no(one()?)?,
            other => return Err(format!("unknown directive '{other}'")),
        }
        Ok(())
    }
}

/// `tls-protocols "TLSv1.2 TLSv1.3"`: the names, case-insensitive, in any
/// order. TLS 1.0 and 1.1 are refused: rustls does not implement them.
fn protocols(value: &str) -> Result<Vec<TlsVersion>, String> {
    let mut versions = Vec::new();
    for word in value.split_ascii_whitespace() {
        let version = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => TlsVersion::Tls12,
            "tlsv1.3" => TlsVersion::Tls13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "'{word}' is not supported: Valkyrie's TLS (rustls) offers TLSv1.2 and TLSv1.3 only"
                ));
            }
            _ => return Err(format!("invalid TLS protocol '{word}'")),
        };
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    if versions.is_empty() {
        return Err("'tls-protocols' names no protocol".into());
    }
    versions.sort();
    Ok(versions)
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("'{v}' must be yes or no")),
    }
}

/// A group's own TLS toward its instances, from a Kubernetes CR's Secret
/// (`spec.tls.secretName`): the CA its servers' certificates are checked
/// against and the client certificate its links present, as PEM bytes.
/// The daemon's `tls-*` settings give the rest (protocols, suites,
/// `tls-verify-hostnames`). The key is never logged and never written to
/// the state file: only [`GroupTls::source`] is, so a restart knows the
/// group speaks TLS before its Secret has been read again.
#[derive(Clone, PartialEq, Eq)]
pub struct GroupTls {
    /// Where the material comes from, for logs and metrics
    /// (`secret:<namespace>/<name>`).
    pub source: String,
    /// `ca.crt`.
    pub ca: Vec<u8>,
    /// `tls.crt`.
    pub cert: Vec<u8>,
    /// `tls.key`.
    pub key: Secret,
}

impl GroupTls {
    /// TLS from `source` whose material has not been read yet (a group
    /// restored from the state file): its links wait for it instead of
    /// speaking plain text to a TLS port.
    pub fn pending(source: impl Into<String>) -> GroupTls {
        GroupTls {
            source: source.into(),
            ca: Vec::new(),
            cert: Vec::new(),
            key: Secret::new(""),
        }
    }

    /// Whether the material is there.
    pub fn is_pending(&self) -> bool {
        self.ca.is_empty()
    }
}

impl std::fmt::Debug for GroupTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupTls")
            .field("source", &self.source)
            .field("ca", &format_args!("{} bytes", self.ca.len()))
            .field("cert", &format_args!("{} bytes", self.cert.len()))
            .field("key", &self.key)
            .finish()
    }
}
