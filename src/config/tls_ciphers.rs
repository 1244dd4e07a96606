//! `tls-ciphers` (TLS 1.2, OpenSSL's cipher-list syntax) and
//! `tls-ciphersuites` (TLS 1.3, IANA names) read against the suites rustls
//! implements.
//!
//! rustls offers only forward-secret AEAD suites. A suite named explicitly
//! that it does not implement is an error naming it: the operator asked for
//! something Valkyrie cannot offer. OpenSSL's keywords and expressions
//! (`DEFAULT`, `HIGH`, `!aNULL`, `@STRENGTH` …) select among suites rustls
//! never offers anyway, so they are ignored with a note; exclusions of
//! suites rustls does implement (`!ECDHE-RSA-CHACHA20-POLY1305`) are
//! honoured.

/// The TLS 1.2 suites rustls implements, by their OpenSSL names, in
/// rustls's order of preference.
pub const TLS12_SUITES: [&str; 6] = [
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-RSA-CHACHA20-POLY1305",
];

/// The TLS 1.3 suites rustls implements.
pub const TLS13_SUITES: [&str; 3] = [
    "TLS_AES_256_GCM_SHA384",
    "TLS_AES_128_GCM_SHA256",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// `tls-ciphers`: the TLS 1.2 suites to offer, in the order given, or
/// `None` for rustls's own list.
pub fn tls12(value: &str, note: &mut dyn FnMut(String)) -> Result<Option<Vec<String>>, String> {
    let mut chosen: Vec<String> = Vec::new();
    let mut excluded: Vec<String> = Vec::new();
    let mut ignored: Vec<&str> = Vec::new();
    for item in value.split([':', ',', ' ']).filter(|i| !i.is_empty()) {
        let (exclude, name) = match item.strip_prefix(['!', '-']) {
            Some(rest) => (true, rest),
            None => (false, item),
        };
        let known = TLS12_SUITES.iter().find(|s| s.eq_ignore_ascii_case(name));
        match known {
            Some(suite) if exclude => excluded.push(suite.to_string()),
            Some(suite) => {
                if !chosen.iter().any(|c| c == suite) {
                    chosen.push(suite.to_string());
                }
            }
            // A name in OpenSSL's suite form (`AES256-SHA`,
            // `DHE-RSA-AES256-GCM-SHA384`) asked for outright.
            None if !exclude && looks_like_suite(name) => {
                return Err(format!(
                    "'{name}' is a cipher suite Valkyrie's TLS (rustls) does not implement; \
                     TLS 1.2 suites on offer: {}",
                    TLS12_SUITES.join(":")
                ));
            }
            None => ignored.push(item),
        }
    }
    if !ignored.is_empty() {
        note(format!(
            "'tls-ciphers': {} ignored: rustls offers only forward-secret AEAD suites \
             ({}), none of which these keywords would remove",
            ignored.join(":"),
            TLS12_SUITES.join(":")
        ));
    }
    if chosen.is_empty() && excluded.is_empty() {
        return Ok(None);
    }
    if chosen.is_empty() {
        chosen = TLS12_SUITES.iter().map(|s| s.to_string()).collect();
    }
    chosen.retain(|c| !excluded.contains(c));
    if chosen.is_empty() {
        return Err("'tls-ciphers' leaves no TLS 1.2 suite".into());
    }
    Ok(Some(chosen))
}

/// `tls-ciphersuites`: TLS 1.3 suites separated by `:`, every one known.
pub fn tls13(value: &str) -> Result<Vec<String>, String> {
    let mut chosen: Vec<String> = Vec::new();
    for name in value.split(':').filter(|i| !i.is_empty()) {
        let Some(suite) = TLS13_SUITES.iter().find(|s| s.eq_ignore_ascii_case(name)) else {
            return Err(format!(
                "'{name}' is a TLS 1.3 suite Valkyrie's TLS (rustls) does not implement; \
                 on offer: {}",
                TLS13_SUITES.join(":")
            ));
        };
        if !chosen.iter().any(|c| c == suite) {
            chosen.push(suite.to_string());
        }
    }
    if chosen.is_empty() {
        return Err("'tls-ciphersuites' names no suite".into());
    }
    Ok(chosen)
}

/// Whether `name` has the shape of an OpenSSL suite name rather than a
/// keyword: upper-case words joined by `-`, e.g. `AES256-SHA`.
fn looks_like_suite(name: &str) -> bool {
    name.contains('-')
        && !name.starts_with('@')
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}
