//! The TLS directives: Valkey's spelling, what rustls cannot honour, and
//! what a TLS port needs.

use super::{bad, ok};
use crate::config::{AuthClients, TlsVersion};

const BASE: &str =
    "tls-cert-file /c/server.crt\ntls-key-file /c/server.key\ntls-ca-cert-file /c/ca.crt\n";

#[test]
fn every_directive_as_valkey_spells_it() {
    let text = format!(
        "port 0\ntls-port 26380\n{BASE}tls-key-file-pass secret1\n\
         tls-client-cert-file /c/client.crt\ntls-client-key-file /c/client.key\n\
         tls-client-key-file-pass secret2\ntls-ca-cert-dir /c/cas\n\
         tls-auth-clients optional\ntls-protocols \"TLSv1.3 TLSv1.2\"\n\
         tls-ciphers ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256\n\
         tls-ciphersuites TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\n\
         tls-prefer-server-ciphers yes\ntls-session-caching no\n\
         tls-session-cache-size 100\ntls-replication yes\nindex-tls yes\nadmin-tls yes\n\
         tls-verify-hostnames no\n"
    );
    let (c, notes) = ok(&text);
    let t = &c.tls;
    assert_eq!(c.port, 0);
    assert_eq!(t.port, Some(26380));
    assert_eq!(
        t.cert_file.as_deref(),
        Some(std::path::Path::new("/c/server.crt"))
    );
    assert_eq!(
        t.key_file_pass.as_ref().map(|p| p.expose()),
        Some("secret1")
    );
    assert_eq!(
        t.client_key_file_pass.as_ref().map(|p| p.expose()),
        Some("secret2")
    );
    assert_eq!(
        t.ca_cert_dir.as_deref(),
        Some(std::path::Path::new("/c/cas"))
    );
    assert_eq!(t.auth_clients, AuthClients::Optional);
    assert_eq!(t.protocols, vec![TlsVersion::Tls12, TlsVersion::Tls13]);
    assert_eq!(
        t.ciphers.as_deref(),
        Some(
            &[
                "ECDHE-RSA-AES256-GCM-SHA384".to_string(),
                "ECDHE-RSA-AES128-GCM-SHA256".to_string()
            ][..]
        )
    );
    assert_eq!(t.ciphersuites.as_ref().map(Vec::len), Some(2));
    assert!(t.prefer_server_ciphers && !t.session_caching && t.replication && t.index && t.admin);
    assert_eq!(t.session_cache_size, 100);
    assert!(!t.verify_hostnames);
    assert!(notes.is_empty(), "{notes:?}");
    // Secrets never print.
    assert!(!format!("{c:?}").contains("secret1"));
}

#[test]
fn defaults_are_valkeys() {
    let (c, _) = ok(&format!("tls-port 26380\n{BASE}"));
    assert_eq!(c.tls.auth_clients, AuthClients::Required);
    assert!(c.tls.session_caching);
    assert_eq!(c.tls.session_cache_size, 20 * 1024);
    assert!(!c.tls.replication);
    assert!(c.tls.verify_hostnames);
    // `tls-port 0` is no TLS port.
    let (c, _) = ok("tls-port 0\n");
    assert_eq!(c.tls.port, None);
    assert!(!c.tls.enabled());
}

#[test]
fn what_rustls_cannot_honour_is_an_error_naming_the_line() {
    let e = bad(&format!("{BASE}tls-protocols \"TLSv1.1 TLSv1.2\"\n"));
    assert!(
        e.starts_with("sentinel.conf:4:") && e.contains("TLSv1.2 and TLSv1.3 only"),
        "{e}"
    );
    let e = bad(&format!(
        "{BASE}tls-ciphers AES256-SHA:ECDHE-RSA-AES256-GCM-SHA384\n"
    ));
    assert!(
        e.starts_with("sentinel.conf:4:") && e.contains("'AES256-SHA'"),
        "{e}"
    );
    let e = bad(&format!("{BASE}tls-ciphersuites TLS_AES_128_CCM_SHA256\n"));
    assert!(e.contains("'TLS_AES_128_CCM_SHA256'"), "{e}");
    let e = bad(&format!(
        "{BASE}tls-ciphers !ECDHE-ECDSA-AES256-GCM-SHA384:!ECDHE-ECDSA-AES128-GCM-SHA256:!ECDHE-ECDSA-CHACHA20-POLY1305:!ECDHE-RSA-AES256-GCM-SHA384:!ECDHE-RSA-AES128-GCM-SHA256:!ECDHE-RSA-CHACHA20-POLY1305\n"
    ));
    assert!(e.contains("leaves no TLS 1.2 suite"), "{e}");
    assert!(bad("tls-auth-clients maybe\n").contains("yes, no or optional"));
    assert!(bad("tls-frobnicate yes\n").contains("unknown directive 'tls-frobnicate'"));
}

#[test]
fn openssl_keywords_are_noted_and_exclusions_honoured() {
    let (c, notes) = ok(&format!(
        "tls-port 1\n{BASE}tls-ciphers HIGH:!aNULL:!ECDHE-RSA-CHACHA20-POLY1305\n"
    ));
    let ciphers = c.tls.ciphers.unwrap();
    assert_eq!(ciphers.len(), 5);
    assert!(!ciphers.iter().any(|s| s == "ECDHE-RSA-CHACHA20-POLY1305"));
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].line, 5);
    assert!(
        notes[0].message.contains("HIGH:!aNULL ignored"),
        "{}",
        notes[0].message
    );
    // Only keywords: rustls's own list, with a note.
    let (c, notes) = ok(&format!(
        "tls-port 1\n{BASE}tls-ciphers DEFAULT:@STRENGTH\n"
    ));
    assert_eq!(c.tls.ciphers, None);
    assert_eq!(notes.len(), 1);
}

#[test]
fn accepted_but_without_effect_is_noted() {
    let (_, notes) = ok(&format!(
        "tls-port 1\n{BASE}tls-cluster yes\ntls-dh-params-file /c/dh.pem\ntls-session-cache-timeout 60\n"
    ));
    let lines: Vec<usize> = notes.iter().map(|n| n.line).collect();
    assert_eq!(lines, vec![5, 6, 7]);
    assert!(notes[1].message.contains("ECDHE"));
}

#[test]
fn a_tls_port_needs_its_files() {
    assert!(bad("tls-port 26380\ntls-cert-file /c/s.crt\n").contains("'tls-key-file'"));
    // Checking clients' certificates needs a CA, unless it is off.
    let e = bad("tls-port 26380\ntls-cert-file /c/s.crt\ntls-key-file /c/s.key\n");
    assert!(e.contains("'tls-ca-cert-file' or 'tls-ca-cert-dir'"), "{e}");
    ok("tls-port 26380\ntls-cert-file /c/s.crt\ntls-key-file /c/s.key\ntls-auth-clients no\n");
    // TLS links check the servers against a CA.
    let e = bad("tls-replication yes\n");
    assert!(e.contains("'tls-replication yes' needs"), "{e}");
    // The error names the last TLS line.
    assert!(bad("tls-port 26380\nport 1\n").starts_with("sentinel.conf:1:"));
    // Two ports on one number.
    let (c, _) = ok(&format!("port 26379\ntls-port 26379\n{BASE}"));
    assert!(c.port_conflict().unwrap().contains("'port' and 'tls-port'"));
}
