//! Tests of the TLS material, its reload and the split stream
//! (certificates made with rcgen at test time).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::config::tls_ciphers::{TLS12_SUITES, TLS13_SUITES};
use crate::config::{AuthClients, Secret, TlsSettings};

struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("valkyrie-tls-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "unit ca");
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.crt"), cert.pem()).unwrap();
        Pki {
            dir,
            issuer: Issuer::new(params, key),
        }
    }

    /// A fresh server certificate and key in `name.crt` / `name.key`;
    /// its serial.
    fn leaf(&self, name: &str) -> (String, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        self.put(&format!("{name}.crt"), cert.pem().as_bytes());
        self.put(&format!("{name}.key"), key.serialize_pem().as_bytes());
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.der()).unwrap();
        let serial = parsed
            .tbs_certificate
            .raw_serial_as_string()
            .replace(':', "");
        (serial, key)
    }

    /// As [`Pki::leaf`], with `params` changed first and signed by
    /// `issuer` (this CA when `None`).
    fn leaf_with(
        &self,
        name: &str,
        change: impl FnOnce(&mut CertificateParams),
        issuer: Option<&Issuer<'static, KeyPair>>,
    ) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        change(&mut params);
        let cert = params
            .signed_by(&key, issuer.unwrap_or(&self.issuer))
            .unwrap();
        self.put(&format!("{name}.crt"), cert.pem().as_bytes());
        self.put(&format!("{name}.key"), key.serialize_pem().as_bytes());
    }

    /// Writes by atomic rename, as cert-manager does.
    fn put(&self, name: &str, bytes: &[u8]) {
        let tmp = self.dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, self.dir.join(name)).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn settings(&self) -> TlsSettings {
        TlsSettings {
            port: Some(0),
            cert_file: Some(self.path("server.crt")),
            key_file: Some(self.path("server.key")),
            ca_cert_file: Some(self.path("ca.crt")),
            auth_clients: AuthClients::No,
            replication: true,
            ..TlsSettings::new()
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serial(context: &TlsContext) -> String {
    context.material().server_serial().unwrap().to_string()
}

#[test]
fn every_suite_name_is_one_rustls_implements() {
    // Each name alone keeps exactly one suite of ring's provider: a name
    // that maps to nothing would silently offer none.
    let lists: [(&[&str], bool); 2] = [(&TLS12_SUITES, false), (&TLS13_SUITES, true)];
    for (names, tls13) in lists {
        for name in names {
            let only = Some(vec![name.to_string()]);
            let settings = if tls13 {
                TlsSettings {
                    ciphersuites: only,
                    ..TlsSettings::new()
                }
            } else {
                TlsSettings {
                    ciphers: only,
                    ..TlsSettings::new()
                }
            };
            let kept = material::tests_provider(&settings);
            let of_version = kept.iter().filter(|s| s.tls13().is_some() == tls13);
            assert_eq!(of_version.count(), 1, "{name}");
        }
    }
    let all = material::tests_provider(&TlsSettings::new());
    assert_eq!(all.len(), TLS12_SUITES.len() + TLS13_SUITES.len());
}

#[test]
fn material_builds_and_records_its_certificates() {
    let pki = Pki::new("build");
    let (serial_now, _) = pki.leaf("server");
    let context = TlsContext::load(&pki.settings()).unwrap();
    let m = context.material();
    assert!(m.server.is_some() && m.client.is_some());
    assert_eq!(m.server_serial(), Some(serial_now.as_str()));
    let roles: Vec<&str> = m.certs.iter().map(|c| c.role).collect();
    assert_eq!(roles, vec!["ca", "server", "client"]);
    assert!(m.certs.iter().all(|c| c.not_after > 1_700_000_000));
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused() {
    let pki = Pki::new("mismatch");
    pki.leaf("server");
    pki.leaf("other");
    std::fs::copy(pki.path("other.key"), pki.path("server.key")).unwrap();
    let e = TlsContext::load(&pki.settings()).unwrap_err();
    assert!(matches!(e, TlsError::Mismatch { .. }), "{e}");
}

#[test]
fn encrypted_keys_need_their_passphrase() {
    let pki = Pki::new("encrypted");
    let (_, key) = pki.leaf("server");
    let info = pkcs8::PrivateKeyInfo::try_from(key.serialized_der()).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7u8; 16], &[9u8; 16])
            .unwrap();
    let encrypted = info.encrypt_with_params(params, "hunter2").unwrap();
    let pem = encrypted
        .to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
        .unwrap();
    pki.put("server.key", pem.as_bytes());
    let mut settings = pki.settings();
    let e = TlsContext::load(&settings).unwrap_err();
    assert!(e.to_string().contains("no passphrase is set"), "{e}");
    settings.key_file_pass = Some(Secret::new("wrong"));
    let e = TlsContext::load(&settings).unwrap_err();
    assert!(e.to_string().contains("wrong passphrase"), "{e}");
    assert!(!e.to_string().contains("wrong\""));
    settings.key_file_pass = Some(Secret::new("hunter2"));
    TlsContext::load(&settings).unwrap();
}

#[test]
fn reload_takes_new_files_and_refuses_broken_ones() {
    let pki = Pki::new("reload");
    let (first, _) = pki.leaf("server");
    let context = TlsContext::load(&pki.settings()).unwrap();
    assert!(!context.reload(false).unwrap(), "nothing changed");
    let (second, _) = pki.leaf("server");
    assert!(context.reload(false).unwrap());
    assert_eq!(serial(&context), second);
    assert_ne!(first, second);
    // Garbage in place of the certificate: refused, the second stays.
    pki.put("server.crt", b"-----BEGIN CERTIFICATE-----\nnot base64\n");
    assert!(context.reload(false).is_err());
    assert_eq!(serial(&context), second);
    // A rotation caught half way (new certificate, old key): refused.
    let (_, _) = pki.leaf("next");
    std::fs::copy(pki.path("next.crt"), pki.path("server.crt")).unwrap();
    assert!(matches!(
        context.reload(false),
        Err(TlsError::Mismatch { .. })
    ));
    std::fs::copy(pki.path("next.key"), pki.path("server.key")).unwrap();
    assert!(context.reload(false).unwrap());
    assert_ne!(serial(&context), second);
    // A file that disappears: refused too.
    std::fs::remove_file(pki.path("ca.crt")).unwrap();
    assert!(matches!(context.reload(true), Err(TlsError::Read { .. })));
    assert!(context.material().server.is_some());
}

#[test]
fn a_reload_refuses_certificates_no_client_can_verify() {
    let pki = Pki::new("unverifiable");
    let (good, _) = pki.leaf("server");
    let context = TlsContext::load(&pki.settings()).unwrap();
    let foreign = {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        Issuer::new(params, key)
    };
    type Change = Box<dyn FnOnce(&mut CertificateParams)>;
    let cases: [(&str, Change, bool, &str); 3] = [
        (
            "expired",
            Box::new(|p| {
                p.not_before = rcgen::date_time_ymd(2020, 1, 1);
                p.not_after = rcgen::date_time_ymd(2021, 1, 1);
            }),
            false,
            "expired",
        ),
        (
            "not yet valid",
            Box::new(|p| {
                p.not_before = rcgen::date_time_ymd(2090, 1, 1);
                p.not_after = rcgen::date_time_ymd(2091, 1, 1);
            }),
            false,
            "not valid before",
        ),
        ("foreign CA", Box::new(|_| {}), true, "does not chain"),
    ];
    for (what, change, foreign_ca, says) in cases {
        pki.leaf_with("server", change, foreign_ca.then_some(&foreign));
        let e = context.reload(false).expect_err(what);
        assert!(e.to_string().contains(says), "{what}: {e}");
        assert_eq!(serial(&context), good, "{what}: the old material stays");
    }
    // The links' client certificate is held to the same rules.
    let (_, _) = pki.leaf("server");
    let mut settings = pki.settings();
    settings.client_cert_file = Some(pki.path("client.crt"));
    settings.client_key_file = Some(pki.path("client.key"));
    pki.leaf("client");
    let context = TlsContext::load(&settings).unwrap();
    pki.leaf_with(
        "client",
        |p| {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        },
        None,
    );
    assert!(context.reload(false).is_err());
    // A good one is taken.
    pki.leaf("client");
    assert!(context.reload(false).unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_reported_once_after_it_settles() {
    let mut refused = Refused::default();
    let e = TlsError::Missing("x");
    assert!(!refused.report(&e, false));
    tokio::time::advance(SETTLE / 2).await;
    assert!(!refused.report(&e, false));
    tokio::time::advance(SETTLE).await;
    assert!(refused.report(&e, false));
    assert!(!refused.report(&e, false), "once");
    // Another error starts over; SIGHUP reports at once.
    let other = TlsError::NoCertificate(Path::new("/x").to_path_buf());
    assert!(refused.report(&other, true));
}

/// A TLS server and client over loopback with the unit PKI.
async fn pair(pki: &Pki) -> (Stream, Stream) {
    let context = TlsContext::load(&pki.settings()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = {
        let context = context.clone();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            accept(&context, tcp, "sentinel").await.unwrap()
        })
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let client = Outbound::new(context)
        .connect("127.0.0.1", port, tcp, HANDSHAKE_TIMEOUT)
        .await
        .unwrap();
    (server.await.unwrap(), client)
}

#[tokio::test]
async fn split_halves_carry_large_replies_whole() {
    let pki = Pki::new("split");
    pki.leaf("server");
    let (mut server, mut client) = pair(&pki).await;
    assert!(server.is_tls() && client.is_tls());
    // 4 MiB: more than the socket buffers hold, so rustls keeps records
    // the socket has not taken, and `write_some` must be called again
    // while `unflushed` says so, with nothing new to write.
    let payload: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let expected = payload.clone();
    let reader = tokio::spawn(async move {
        let mut got = vec![0u8; expected.len()];
        client.read_exact(&mut got).await.unwrap();
        assert!(got == expected, "bytes differ");
        client.write_all(b"done").await.unwrap();
        client.flush().await.unwrap();
        client
    });
    let (mut rd, mut wr) = server.split();
    let mut out = &payload[..];
    while !out.is_empty() || wr.unflushed() {
        let n = wr.write_some(out).await.unwrap();
        out = &out[n..];
    }
    rd.readable().await.unwrap();
    let mut buf = [0u8; 16];
    let n = rd.read(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"done");
    reader.await.unwrap();
}

#[tokio::test]
async fn a_link_refuses_a_server_whose_certificate_does_not_name_it() {
    let pki = Pki::new("name");
    pki.leaf("server");
    let context = TlsContext::load(&pki.settings()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = {
        let context = context.clone();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            accept(&context, tcp, "sentinel").await
        })
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let refused = Outbound::new(context)
        .connect("valkey-0.example", port, tcp, HANDSHAKE_TIMEOUT)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("certificate"), "{refused}");
    assert!(server.await.unwrap().is_err());
}

#[test]
fn contexts_are_shared_not_copied() {
    let pki = Pki::new("shared");
    pki.leaf("server");
    let context = TlsContext::load(&pki.settings()).unwrap();
    let a = context.material();
    let b = context.material();
    assert!(Arc::ptr_eq(&a, &b));
}

#[tokio::test]
async fn tls13_sessions_resume_from_stateless_tickets() {
    let pki = Pki::new("tickets");
    pki.leaf("server");
    let context = TlsContext::load(&pki.settings()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = {
        let context = context.clone();
        tokio::spawn(async move {
            for _ in 0..2 {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut s = accept(&context, tcp, "sentinel").await.unwrap();
                s.write_all(b"+OK\r\n").await.unwrap();
                s.flush().await.unwrap();
                let mut end = [0u8; 1];
                let _ = s.read(&mut end).await;
            }
        })
    };
    let outbound = Outbound::new(context);
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mut c = outbound
            .connect("127.0.0.1", port, tcp, HANDSHAKE_TIMEOUT)
            .await
            .unwrap();
        let mut buf = [0u8; 5];
        // Reading takes the tickets the server sent after its handshake.
        c.read_exact(&mut buf).await.unwrap();
        let Stream::Client(tls) = &c else {
            panic!("not TLS")
        };
        kinds.push(tls.get_ref().1.handshake_kind());
        c.shutdown().await.unwrap();
    }
    server.await.unwrap();
    assert_eq!(
        kinds,
        vec![
            Some(rustls::HandshakeKind::Full),
            Some(rustls::HandshakeKind::Resumed)
        ]
    );
}

/// One handshake: `client`'s link material toward a server with
/// `server`'s, dialled as `host`.
async fn handshake(
    client: &Arc<TlsContext>,
    server: &Arc<TlsContext>,
    host: &str,
) -> Result<Stream, HandshakeError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = server.clone();
    let accepted = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        accept(&server, tcp, "sentinel").await
    });
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let linked = Outbound::new(client.clone())
        .connect(host, port, tcp, HANDSHAKE_TIMEOUT)
        .await;
    let _ = accepted.await.unwrap();
    linked
}

#[tokio::test]
async fn without_hostname_checks_the_chain_still_decides() {
    let pki = Pki::new("chain");
    pki.leaf("server");
    let server = TlsContext::load(&pki.settings()).unwrap();
    let mut settings = pki.settings();
    settings.verify_hostnames = false;
    let client = TlsContext::load(&settings).unwrap();
    // Dialled by a name its certificate lacks: accepted, as Sentinel does.
    handshake(&client, &server, "valkey-0.example")
        .await
        .unwrap();
    // With the check on, refused.
    let strict = TlsContext::load(&pki.settings()).unwrap();
    assert!(
        handshake(&strict, &server, "valkey-0.example")
            .await
            .is_err()
    );
    // A server whose certificate another CA signed: refused either way.
    let other = Pki::new("chain-other");
    other.leaf("server");
    let stranger = TlsContext::load(&other.settings()).unwrap();
    let e = handshake(&client, &stranger, "127.0.0.1")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
}

mod group;
