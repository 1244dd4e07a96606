//! TLS test support: certificates made at test time (nothing is
//! committed), PEM files put in place by atomic rename, a blocking rustls
//! client (RESP, HTTP, raw lines) that can say which certificate a server
//! presented, `sentinel.conf` snippets, TLS-only `valkey-server`s and a
//! daemon process (Valkyrie, or a real `valkey-sentinel` for comparison)
//! that is stopped and signalled by PID.
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

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use valkyrie_protocol::{Frame, FrameDecoder, encode_command};

use super::wait_until;

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
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let day = 86_400;
    params.not_before = x509_parser::time::ASN1Time::from_timestamp(now - day)
        .unwrap()
        .to_datetime();
    params.not_after = x509_parser::time::ASN1Time::from_timestamp(now + VALID_DAYS as i64 * day)
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
        validity(&mut params);
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

/// One TLS connection to `127.0.0.1:port`, the handshake done.
pub struct TlsConn {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    dec: FrameDecoder,
    buf: BytesMut,
}

impl TlsConn {
    /// Connects and completes the handshake (both directions bounded by
    /// `timeout`). With TLS 1.3 a server's refusal of the client's
    /// certificate arrives after this returns, as an alert on the first
    /// read: use [`TlsConn::call`] to know whether the server accepted.
    pub fn connect(
        port: u16,
        cfg: Arc<rustls::ClientConfig>,
        timeout: Duration,
    ) -> Result<TlsConn, String> {
        let sock = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        sock.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        sock.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        sock.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(cfg, name).map_err(|e| e.to_string())?;
        let mut stream = rustls::StreamOwned::new(conn, sock);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| format!("handshake: {e}"))?;
        }
        Ok(TlsConn {
            stream,
            dec: FrameDecoder::new(),
            buf: BytesMut::new(),
        })
    }

    /// The serial of the certificate the server presented.
    pub fn peer_serial(&self) -> String {
        let chain = self
            .stream
            .conn
            .peer_certificates()
            .expect("a server certificate");
        serial_of(&chain[0])
    }

    /// The TLS version agreed.
    pub fn version(&self) -> Option<rustls::ProtocolVersion> {
        self.stream.conn.protocol_version()
    }

    /// Sends one RESP command and reads one reply.
    pub fn call(&mut self, args: &[&str]) -> Result<Frame, String> {
        let mut out = BytesMut::new();
        encode_command(args, &mut out);
        self.stream
            .write_all(&out)
            .and_then(|_| self.stream.flush())
            .map_err(|e| format!("write: {e}"))?;
        self.read()
    }

    /// The next RESP frame.
    pub fn read(&mut self) -> Result<Frame, String> {
        loop {
            if let Some(f) = self.dec.decode(&mut self.buf).map_err(|e| e.to_string())? {
                return Ok(f);
            }
            let mut chunk = [0u8; 4096];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .and_then(|_| self.stream.flush())
            .map_err(|e| format!("write: {e}"))
    }

    /// The next line (without its terminator), for the index protocol.
    pub fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(i + 1);
                return Ok(String::from_utf8_lossy(&line)
                    .trim_end_matches(['\r', '\n'])
                    .to_string());
            }
            let mut chunk = [0u8; 4096];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed".into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Everything up to the end of the stream (a peer that closes without
    /// `close_notify` ends it too).
    pub fn read_to_end(&mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::UnexpectedEof && !out.is_empty() => {
                    return Ok(out);
                }
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
}

/// A fresh TLS connection, one command, its reply.
pub fn tls_call(port: u16, cfg: Arc<rustls::ClientConfig>, args: &[&str]) -> Result<Frame, String> {
    TlsConn::connect(port, cfg, Duration::from_secs(5))?.call(args)
}

/// A fresh TLS connection and `PING`: the serial the server presented,
/// once the server answered `PONG` (a refused client certificate, or any
/// other failure, is an error).
pub fn tls_ping(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<String, String> {
    let mut c = TlsConn::connect(port, cfg, Duration::from_secs(5))?;
    match c.call(&["PING"])? {
        Frame::Simple(s) if &s[..] == b"PONG" => Ok(c.peer_serial()),
        other => Err(format!("PING answered {other:?}")),
    }
}

/// The serial of the certificate a TLS server on `port` presents (the
/// handshake alone: the server need not accept `cfg`'s identity).
pub fn presented_serial(port: u16, cfg: Arc<rustls::ClientConfig>) -> Result<String, String> {
    Ok(TlsConn::connect(port, cfg, Duration::from_secs(5))?.peer_serial())
}

/// The address `SENTINEL get-master-addr-by-name <name>` gives over TLS.
pub fn tls_master_addr(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    name: &str,
) -> Option<(String, u16)> {
    match tls_call(port, cfg, &["SENTINEL", "get-master-addr-by-name", name]).ok()? {
        Frame::Array(v) if v.len() == 2 => Some((
            String::from_utf8_lossy(v[0].as_bytes()?).into_owned(),
            String::from_utf8_lossy(v[1].as_bytes()?).parse().ok()?,
        )),
        _ => None,
    }
}

/// A field of an `INFO` section read over TLS.
pub fn tls_info_field(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    section: &str,
    field: &str,
) -> Option<String> {
    let f = tls_call(port, cfg, &["INFO", section]).ok()?;
    let text = String::from_utf8(f.as_bytes()?.to_vec()).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|v| v.trim().to_string())
    })
}

/// One HTTP/1.1 GET over TLS: status code and body.
pub fn https_get(
    port: u16,
    cfg: Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<(u16, String), String> {
    let mut c = TlsConn::connect(port, cfg, Duration::from_secs(5))?;
    c.send(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    parse_http(&c.read_to_end()?)
}

/// One HTTP/1.1 GET in clear: status code and body.
pub fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| e.to_string())?;
    parse_http(&out)
}

fn parse_http(raw: &[u8]) -> Result<(u16, String), String> {
    let out = String::from_utf8_lossy(raw);
    let (head, body) = out
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP head in {out:?}"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((code, body.to_string()))
}

/// The value of the Prometheus series `name` whose labels include
/// `labels`, in the text exposition `text`.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            if all { value.parse().ok() } else { None }
        })
}

/// The sum of every series `name` whose labels include `labels` (0 when
/// there is none).
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let all = labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            if n == name && all {
                value.parse::<f64>().ok()
            } else {
                None
            }
        })
        .sum()
}

/// A `valkey-server` reachable over TLS only (`port 0`), replicating over
/// TLS, stopped by PID on drop.
pub struct TlsServer {
    pub port: u16,
    child: Option<Child>,
    pub dir: PathBuf,
}

impl TlsServer {
    /// Starts one on `tls_port` (a replica of `replicaof` when given), with
    /// `tls-auth-clients auth_clients`, and returns once it answers `PING`
    /// to a client with the PKI's client certificate.
    pub fn start(
        bin: &Path,
        dir: &Path,
        pki: &Pki,
        tls_port: u16,
        replicaof: Option<u16>,
        auth_clients: &str,
    ) -> TlsServer {
        let dir = dir.join(format!("tls{tls_port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut conf = format!(
            "port 0\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {}\nlogfile {}\n\
             repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n",
            dir.display(),
            dir.join("valkey.log").display()
        );
        conf.push_str(&pki.server_directives(tls_port, auth_clients));
        conf.push_str(&pki.replication_directives(false));
        if let Some(m) = replicaof {
            conf.push_str(&format!("replicaof 127.0.0.1 {m}\n"));
        }
        let path = dir.join("valkey.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(bin)
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = TlsServer {
            port: tls_port,
            child: Some(child),
            dir,
        };
        let cfg = pki.client_config(Who::Client);
        wait_until(Duration::from_secs(10), || {
            tls_ping(tls_port, cfg.clone()).is_ok()
        });
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TLS-only master and two replicas, returned once both replicas report
/// an up link to the master.
pub fn start_tls_trio(bin: &Path, dir: &Path, pki: &Pki) -> (TlsServer, TlsServer, TlsServer) {
    let pm = super::free_port();
    let master = TlsServer::start(bin, dir, pki, pm, None, "yes");
    let r1 = TlsServer::start(bin, dir, pki, super::free_port(), Some(pm), "yes");
    let r2 = TlsServer::start(bin, dir, pki, super::free_port(), Some(pm), "yes");
    let cfg = pki.client_config(Who::Client);
    wait_until(Duration::from_secs(10), || {
        [r1.port, r2.port].iter().all(|&p| {
            tls_info_field(p, cfg.clone(), "replication", "master_link_status").as_deref()
                == Some("up")
        })
    });
    (master, r1, r2)
}

/// A Sentinel daemon process (Valkyrie's binary, or a real
/// `valkey-sentinel`) run on a configuration file, its stderr and stdout
/// in a log file; killed by PID on drop.
pub struct DaemonProc {
    child: Option<Child>,
    pub conf: PathBuf,
    pub log: PathBuf,
}

impl DaemonProc {
    /// Starts `bin conf`; nothing is waited for.
    pub fn start(bin: &Path, conf: &Path, log: &Path) -> DaemonProc {
        let out = std::fs::File::create(log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(bin)
            .arg(conf)
            .env_remove("VALKYRIE_LOG")
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        DaemonProc {
            child: Some(child),
            conf: conf.to_path_buf(),
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends a signal by PID (`HUP`, `TERM`).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{sig} {}", self.pid());
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for DaemonProc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {} ---\n{}",
                self.log.display(),
                self.log_text()
                    .lines()
                    .rev()
                    .take(60)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        self.kill();
    }
}
