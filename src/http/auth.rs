//! Access to the status page and API: optional basic auth
//! (`admin-auth-basic-file`, one `user:password` line) and bearer token
//! (`admin-auth-token-file`), each read once at start. A request passes
//! when one `Authorization` header matches either. Credentials are
//! compared as SHA-256 digests in constant time (neither their content
//! nor their length shows in the timing) and never logged or shown;
//! `/metrics`, `/healthz` and `/readyz` stay open for probes and
//! scrapers (docs/security.md).

use std::path::Path;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The accepted credentials, as digests only.
#[derive(Clone)]
pub struct Auth {
    bearer: Option<[u8; 32]>,
    basic: Option<[u8; 32]>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("bearer", &self.bearer.is_some())
            .field("basic", &self.basic.is_some())
            .finish()
    }
}

/// Why the credentials could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds nothing usable.
    #[error("{0}: {1}")]
    Bad(String, &'static str),
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The file's first line, trimmed of surrounding white space.
fn first_line(path: &Path) -> Result<String, AuthError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

impl Auth {
    /// The credentials in the files given; `None` when neither is.
    pub fn load(token: Option<&Path>, basic: Option<&Path>) -> Result<Option<Auth>, AuthError> {
        if token.is_none() && basic.is_none() {
            return Ok(None);
        }
        let bearer = match token {
            None => None,
            Some(path) => {
                let t = first_line(path)?;
                if t.is_empty() {
                    return Err(AuthError::Bad(path.display().to_string(), "empty token"));
                }
                Some(digest(t.as_bytes()))
            }
        };
        let basic = match basic {
            None => None,
            Some(path) => {
                let pair = first_line(path)?;
                match pair.split_once(':') {
                    Some((user, pass)) if !user.is_empty() && !pass.is_empty() => {
                        Some(digest(pair.as_bytes()))
                    }
                    _ => {
                        return Err(AuthError::Bad(
                            path.display().to_string(),
                            "expected one line user:password",
                        ));
                    }
                }
            }
        };
        Ok(Some(Auth { bearer, basic }))
    }

    /// Credentials from explicit values (tests).
    pub fn new(token: Option<&str>, basic: Option<(&str, &str)>) -> Auth {
        Auth {
            bearer: token.map(|t| digest(t.as_bytes())),
            basic: basic.map(|(u, p)| digest(format!("{u}:{p}").as_bytes())),
        }
    }

    /// Whether one `Authorization` value carries accepted credentials.
    pub fn allows(&self, authorization: &[u8]) -> bool {
        let (scheme, rest) = match authorization.iter().position(|&b| b == b' ') {
            Some(i) => (&authorization[..i], &authorization[i + 1..]),
            None => return false,
        };
        let rest = rest.trim_ascii();
        if scheme.eq_ignore_ascii_case(b"bearer") {
            self.bearer
                .is_some_and(|want| bool::from(digest(rest).ct_eq(&want)))
        } else if scheme.eq_ignore_ascii_case(b"basic") {
            let Some(want) = self.basic else { return false };
            match base64::engine::general_purpose::STANDARD.decode(rest) {
                Ok(pair) => bool::from(digest(&pair).ct_eq(&want)),
                Err(_) => false,
            }
        } else {
            false
        }
    }

    /// The challenge of a refusal.
    fn challenge(&self) -> &'static str {
        match self.basic {
            Some(_) => "Basic realm=\"valkyrie\", charset=\"UTF-8\"",
            None => "Bearer realm=\"valkyrie\"",
        }
    }
}

/// Lets the request through when no credentials are configured or one
/// `Authorization` header matches; 401 otherwise.
pub(super) async fn require(
    State(auth): State<Option<Arc<Auth>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(auth) = auth.as_deref() else {
        return next.run(request).await;
    };
    let allowed = request
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .any(|v| auth.allows(v.as_bytes()));
    if allowed {
        return next.run(request).await;
    }
    let mut r = super::reply::plain(
        StatusCode::UNAUTHORIZED,
        "text/plain",
        "unauthorized\n".into(),
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(auth.challenge()),
    );
    r
}
