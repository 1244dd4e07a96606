//! A group's own TLS from in-memory PEM (a CR's Secret): pending material
//! never falls back to plain text, a rotation replaces the material the
//! group's links share, a broken one is refused and the old one stays.

use super::*;
use crate::config::GroupTls;

fn group_tls(pki: &Pki, cert: &str, key: &str) -> GroupTls {
    let read = |name: &str| std::fs::read(pki.path(name)).unwrap();
    GroupTls {
        source: "secret:shop/cache-tls".into(),
        ca: read("ca.crt"),
        cert: read(&format!("{cert}.crt")),
        key: Secret::new(String::from_utf8(read(&format!("{key}.key"))).unwrap()),
    }
}

/// A TLS server on loopback with `pki`'s `server` certificate; the port.
async fn serve(pki: &Pki) -> u16 {
    let context = TlsContext::load(&pki.settings()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let context = context.clone();
            tokio::spawn(async move {
                if let Ok(mut s) = accept(&context, tcp, "sentinel").await {
                    let _ = s.write_all(b"+PONG\r\n").await;
                }
            });
        }
    });
    port
}

async fn dial(outbound: &Outbound, port: u16) -> Result<(), HandshakeError> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut s = outbound
        .connect("127.0.0.1", port, tcp, HANDSHAKE_TIMEOUT)
        .await?;
    let mut pong = [0u8; 7];
    s.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    Ok(())
}

#[tokio::test]
async fn pending_material_fails_the_handshake_and_a_rotation_is_shared() {
    let pki = Pki::new("group");
    pki.leaf("server");
    let port = serve(&pki).await;
    let base = TlsSettings::new();

    let pending = GroupTls::pending("secret:shop/cache-tls");
    let outbound = crate::tls::group::outbound(&base, "shop.cache", &pending);
    let link = outbound.clone();
    let e = dial(&link, port).await.unwrap_err();
    assert_eq!(
        e,
        HandshakeError::NoMaterial("secret:shop/cache-tls".into())
    );

    // The Secret read: every clone of the group's TLS takes it.
    let good = group_tls(&pki, "server", "server");
    assert!(crate::tls::group::update("shop.cache", &outbound, &good).unwrap());
    dial(&link, port).await.unwrap();
    assert!(!crate::tls::group::update("shop.cache", &outbound, &good).unwrap());

    // A key that is not the certificate's is refused, by the check and by
    // an update; the material in use stays.
    pki.leaf("other");
    let mismatched = group_tls(&pki, "server", "other");
    let refused = crate::tls::group::check(&base, &mismatched).unwrap_err();
    assert!(refused.to_string().contains("does not match"), "{refused}");
    assert!(crate::tls::group::update("shop.cache", &outbound, &mismatched).is_err());
    dial(&link, port).await.unwrap();
    crate::tls::group::check(&base, &good).unwrap();
}

#[test]
fn broken_material_at_creation_gives_no_material_not_plain_text() {
    let pki = Pki::new("group-broken");
    pki.leaf("server");
    let mut broken = group_tls(&pki, "server", "server");
    broken.cert = b"-----BEGIN CERTIFICATE-----\nbroken\n".to_vec();
    let outbound = crate::tls::group::outbound(&TlsSettings::new(), "shop.cache", &broken);
    assert!(outbound.context().connector().is_none());
    assert!(format!("{broken:?}").contains("key: ******"), "{broken:?}");
}
