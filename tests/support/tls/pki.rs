//! Certificates made at test time (nothing is committed), PEM files put
//! in place by atomic rename, and the rustls client configurations a test
//! builds from them.
//!
//! The PKI of one test ([`Pki`]) lives in a directory of its own:
//!
//! | file | what |
//! |---|---|
//! | `ca.crt` | the CA every test trusts |
//! | `server.crt`, `server.key` | a server certificate from the CA, SANs `127.0.0.1` and `localhost`, usable as a client certificate too (server and client EKUs), as Valkey's links use `tls-cert-file` unless `tls-client-cert-file` is set |
//! | `client.crt`, `client.key` | a client certificate from the CA |
//! | `other-ca.crt` | a second, unrelated CA |
//! | `stranger.crt`, `stranger.key` | a client certificate from the other CA |
//!
//! [`Pki::rotate_server`] mints a new server certificate (fresh key, fresh
//! serial) and renames it into place; [`presented_serial`] tells which one
//! a TLS port serves.
//!
//! [`presented_serial`]: super::presented_serial

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// How long certificates made here are valid: from a day ago to this many
/// days from now (so `valkyrie_tls_cert_expiry_seconds` has a known size).
pub const VALID_DAYS: u64 = 30;

/// Serials handed out in this process: each certificate gets a new one.
static SERIALS: AtomicU64 = AtomicU64::new(1);

/// A certificate authority: its certificate and what signs with its key.
pub struct Ca {
    pub cert_pem: String,
    pub cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

/// A leaf certificate and its private key.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
    /// The serial, as [`serial_of`] prints it.
    pub serial: String,
}

impl Leaf {
    /// The private key, as rustls takes it.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }

    /// The private key encrypted with `pass` (PKCS#8, PBES2: PBKDF2-SHA256
    /// and AES-256-CBC, as `openssl genpkey -aes256` writes it), in PEM.
    pub fn encrypted_key_pem(&self, pass: &str) -> String {
        use pkcs8::pkcs5::pbes2;
        let mut salt = [0u8; 16];
        let mut iv = [0u8; 16];
        getrandom::fill(&mut salt).unwrap();
        getrandom::fill(&mut iv).unwrap();
        let params = pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &salt, &iv).unwrap();
        let info = pkcs8::PrivateKeyInfo::try_from(self.key_der.as_slice()).unwrap();
        let doc = info.encrypt_with_params(params, pass).unwrap();
        doc.to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
            .unwrap()
            .to_string()
    }
}

/// A serial nobody used in this process: a counter in the low bytes,
/// the time in the high ones (positive: the first byte stays below 0x80).
fn fresh_serial() -> SerialNumber {
    let n = SERIALS.fetch_add(1, Ordering::SeqCst);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut bytes = vec![0x1a];
    bytes.extend_from_slice(&t.to_be_bytes());
    bytes.extend_from_slice(&n.to_be_bytes());
    SerialNumber::from_slice(&bytes)
}

fn validity(params: &mut CertificateParams) {
    window(params, -1, VALID_DAYS as i64);
}

/// Valid from `from` to `to` days from now.
fn window(params: &mut CertificateParams, from: i64, to: i64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let day = 86_400;
    params.not_before = x509_parser::time::ASN1Time::from_timestamp(now + from * day)
        .unwrap()
        .to_datetime();
    params.not_after = x509_parser::time::ASN1Time::from_timestamp(now + to * day)
        .unwrap()
        .to_datetime();
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Valkyrie tests");
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        params.serial_number = Some(fresh_serial());
        validity(&mut params);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(&self, cn: &str, sans: &[&str], ekus: &[ExtendedKeyUsagePurpose]) -> Leaf {
        self.leaf_in(cn, sans, ekus, (-1, VALID_DAYS as i64))
    }

    /// A server certificate valid from `days.0` to `days.1` days from now
    /// (an expired or a not yet valid one, for the reload's checks).
    pub fn server_in(&self, days: (i64, i64)) -> Leaf {
        self.leaf_in(
            "valkyrie-test-server",
            &["127.0.0.1", "localhost"],
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
            days,
        )
    }

    fn leaf_in(
        &self,
        cn: &str,
        sans: &[&str],
        ekus: &[ExtendedKeyUsagePurpose],
        days: (i64, i64),
    ) -> Leaf {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = ekus.to_vec();
        params.serial_number = Some(fresh_serial());
        window(&mut params, days.0, days.1);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_der = cert.der().clone();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            serial: serial_of(&cert_der),
            cert_der,
            key_der: key.serialize_der(),
        }
    }

    /// A server certificate (fresh key and serial) for `127.0.0.1` and
    /// `localhost`, which may also authenticate as a client.
    pub fn server(&self) -> Leaf {
        self.leaf(
            "valkyrie-test-server",
            &["127.0.0.1", "localhost"],
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    /// A certificate for `sans` (names, wildcards or addresses) that serves
    /// and authenticates as a client: a Valkey pod's, whose Secret
    /// Valkyrie's links present too.
    pub fn server_for(&self, sans: &[&str]) -> Leaf {
        self.leaf(
            "valkyrie-test-pod",
            sans,
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
    }

    /// A client certificate named `cn`.
    pub fn client(&self, cn: &str) -> Leaf {
        self.leaf(cn, &[], &[ExtendedKeyUsagePurpose::ClientAuth])
    }
}

/// The serial of a DER certificate: lowercase hex, no separators.
pub fn serial_of(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a certificate");
    cert.raw_serial()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `contents` to `path` as a rename does it: a temporary file in
/// the same directory, flushed, then renamed over `path`, so a reader
/// sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, contents: &[u8]) {
    static TMP: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().unwrap().to_string_lossy();
    let tmp = path.with_file_name(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        TMP.fetch_add(1, Ordering::SeqCst)
    ));
    {
        let mut f = std::fs::File::create(&tmp).unwrap();
        f.write_all(contents).unwrap();
        f.sync_all().unwrap();
    }
    std::fs::rename(&tmp, path).unwrap();
}

/// Bytes that look like a PEM certificate and are not one.
pub const GARBAGE_PEM: &str = "-----BEGIN CERTIFICATE-----\n\
    bm90IGEgY2VydGlmaWNhdGUsIGp1c3QgZ2FyYmFnZSBpbiBhIFBFTSBhcm1vdXIK\n\
    !!!! this is not base64 !!!!\n\
    -----END CERTIFICATE-----\n";

/// One test's certificates, written under `dir`.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: Ca,
    pub other_ca: Ca,
    /// The server certificate in place now (see [`Pki::rotate_server`]).
    pub server: Leaf,
    pub client: Leaf,
    /// A client certificate from `other_ca`.
    pub stranger: Leaf,
}

impl Pki {
    /// Makes both CAs and the three leaves, and writes them under `dir`
    /// (created if missing).
    pub fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let ca = Ca::new("Valkyrie test CA");
        let other_ca = Ca::new("Some other CA");
        let pki = Pki {
            dir: dir.to_path_buf(),
            server: ca.server(),
            client: ca.client("valkyrie-test-client"),
            stranger: other_ca.client("stranger"),
            ca,
            other_ca,
        };
        write_atomic(&pki.ca_file(), pki.ca.cert_pem.as_bytes());
        write_atomic(
            &pki.dir.join("other-ca.crt"),
            pki.other_ca.cert_pem.as_bytes(),
        );
        pki.write_leaf("server", &pki.server);
        pki.write_leaf("client", &pki.client);
        pki.write_leaf("stranger", &pki.stranger);
        pki
    }

    fn write_leaf(&self, name: &str, leaf: &Leaf) {
        // The key first: a reader that sees the new certificate may then
        // find its key in place already.
        write_atomic(
            &self.dir.join(format!("{name}.key")),
            leaf.key_pem.as_bytes(),
        );
        write_atomic(
            &self.dir.join(format!("{name}.crt")),
            leaf.cert_pem.as_bytes(),
        );
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
    pub fn cert_file(&self) -> PathBuf {
        self.dir.join("server.crt")
    }
    pub fn key_file(&self) -> PathBuf {
        self.dir.join("server.key")
    }
    pub fn client_cert_file(&self) -> PathBuf {
        self.dir.join("client.crt")
    }
    pub fn client_key_file(&self) -> PathBuf {
        self.dir.join("client.key")
    }
    pub fn stranger_cert_file(&self) -> PathBuf {
        self.dir.join("stranger.crt")
    }
    pub fn stranger_key_file(&self) -> PathBuf {
        self.dir.join("stranger.key")
    }

    /// Mints a new server certificate (new key, new serial), renames its
    /// key and then its certificate into place, and returns it.
    pub fn rotate_server(&mut self) -> Leaf {
        let leaf = self.ca.server();
        self.write_leaf("server", &leaf);
        self.server = leaf.clone();
        leaf
    }

    /// Puts `leaf` in place as the server certificate and key (key
    /// first), without making it the one [`Pki::server`] names.
    pub fn put_server(&self, leaf: &Leaf) {
        self.write_leaf("server", leaf);
    }

    /// Replaces the server certificate file with garbage PEM (by rename).
    pub fn corrupt_server_cert(&self) {
        write_atomic(&self.cert_file(), GARBAGE_PEM.as_bytes());
    }

    /// The TLS directives of a server's `sentinel.conf` (or
    /// `valkey.conf`): the TLS port, this PKI's server certificate, key
    /// and CA, and `tls-auth-clients` (left to its default when
    /// `auth_clients` is empty).
    pub fn server_directives(&self, tls_port: u16, auth_clients: &str) -> String {
        let mut s = format!(
            "tls-port {tls_port}\n\
             tls-cert-file {}\n\
             tls-key-file {}\n\
             tls-ca-cert-file {}\n",
            self.cert_file().display(),
            self.key_file().display(),
            self.ca_file().display(),
        );
        if !auth_clients.is_empty() {
            s.push_str(&format!("tls-auth-clients {auth_clients}\n"));
        }
        s
    }

    /// `tls-replication yes` (links over TLS), with the client
    /// certificate given explicitly when `client_cert` (else the links
    /// present `tls-cert-file`).
    pub fn replication_directives(&self, client_cert: bool) -> String {
        let mut s = String::from("tls-replication yes\n");
        if client_cert {
            s.push_str(&format!(
                "tls-client-cert-file {}\ntls-client-key-file {}\n",
                self.client_cert_file().display(),
                self.client_key_file().display()
            ));
        }
        s
    }

    /// A client configuration trusting this PKI's CA and presenting
    /// `who`'s certificate.
    pub fn client_config(&self, who: Who) -> Arc<rustls::ClientConfig> {
        let leaf = match who {
            Who::Anonymous => None,
            Who::Client => Some(&self.client),
            Who::Stranger => Some(&self.stranger),
        };
        client_config(std::slice::from_ref(&self.ca.cert_der), leaf)
    }
}

/// Which certificate a test client presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// None.
    Anonymous,
    /// The client certificate from the right CA.
    Client,
    /// A client certificate from another CA.
    Stranger,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration that trusts `roots` (and checks the
/// server's name, `127.0.0.1`) and presents `identity` when asked.
pub fn client_config(
    roots: &[CertificateDer<'static>],
    identity: Option<&Leaf>,
) -> Arc<rustls::ClientConfig> {
    client_config_versions(roots, identity, rustls::DEFAULT_VERSIONS)
}

/// [`client_config`] offering only the TLS `versions` given.
pub fn client_config_versions(
    roots: &[CertificateDer<'static>],
    identity: Option<&Leaf>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(store);
    let cfg = match identity {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.cert_der.clone()], leaf.key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    Arc::new(cfg)
}
