//! The TLS metrics: certificate expiry, reloads and handshakes.

use std::path::Path;

use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};

/// Seconds until a certificate in use expires (negative once expired), by
/// role (`server`, `client`, `ca`) and file.
pub const TLS_CERT_EXPIRY: &str = "valkyrie_tls_cert_expiry_seconds";
/// Reloads of the TLS files, by result (`ok`, `error`).
pub const TLS_RELOADS: &str = "valkyrie_tls_reloads_total";
/// TLS handshakes on Valkyrie's ports, by port and result.
pub const TLS_HANDSHAKES: &str = "valkyrie_tls_handshakes_total";

/// Describes the TLS metrics.
pub fn describe() {
    describe_gauge!(
        TLS_CERT_EXPIRY,
        Unit::Seconds,
        "Seconds until a certificate in use expires (negative once expired), by role \
         (server, client, ca) and file (and group, for a group's own TLS from a \
         Kubernetes Secret); updated every 250 ms."
    );
    describe_counter!(
        TLS_RELOADS,
        "Reloads of the TLS certificate, key and CA files, by result; on error the \
         certificates in use stay."
    );
    describe_counter!(
        TLS_HANDSHAKES,
        "TLS handshakes on Valkyrie's ports, by port (sentinel, index, admin) and result (ok, error)."
    );
}

/// Records how long the certificate of `path` has left.
pub fn tls_cert_expiry(role: &'static str, path: &Path, seconds: i64) {
    let file = path.display().to_string();
    gauge!(TLS_CERT_EXPIRY, "certificate" => role, "file" => file).set(seconds as f64);
}

/// Records how long a certificate of `group`'s own TLS (a CR's Secret)
/// has left; the series goes with the group.
pub fn tls_group_cert_expiry(group: &str, role: &'static str, path: &Path, seconds: i64) {
    let file = path.display().to_string();
    gauge!(TLS_CERT_EXPIRY, "certificate" => role, "file" => file, "group" => group.to_owned())
        .set(seconds as f64);
}

/// Counts a reload that put new material in use (`ok`) or was refused.
pub fn tls_reloaded(ok: bool) {
    let result = if ok { "ok" } else { "error" };
    counter!(TLS_RELOADS, "result" => result).increment(1);
}

/// Counts a handshake on `port`.
pub fn tls_handshake(port: &'static str, ok: bool) {
    let result = if ok { "ok" } else { "error" };
    counter!(TLS_HANDSHAKES, "port" => port, "result" => result).increment(1);
}
