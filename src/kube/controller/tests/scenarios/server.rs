//! The scripted API server of the scenarios: a `tower_test` mock behind a
//! `kube::Client`. Each request the reconciler makes is taken in turn,
//! checked (method, path, query, content type, body) and answered; a
//! request out of turn, or one missing, fails the test.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use ::kube::Client;
use ::kube::client::Body;
use http::{Method, Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::timeout;
use tower_test::mock::{self, SendResponse};

/// How long a request may take to come (virtual time in paused tests).
const WAIT: Duration = Duration::from_secs(30);

/// The content type of a server-side apply.
pub(super) const APPLY: &str = "application/apply-patch+yaml";
/// The content type of a JSON patch.
pub(super) const JSON_PATCH: &str = "application/json-patch+json";

/// The server's end of the client.
pub(super) struct ApiServer(mock::Handle<Request<Body>, Response<Body>>);

impl fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiServer")
    }
}

/// A client whose every request reaches the returned server.
pub(super) fn pair() -> (Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), ApiServer(handle))
}

impl ApiServer {
    /// The next request; fails when none comes.
    pub(super) async fn next(&mut self) -> Call {
        let (request, reply) = timeout(WAIT, self.0.next_request())
            .await
            .expect("the reconciler makes a request")
            .expect("the client is still alive");
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("a readable body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("a JSON body")
        };
        let query = parts
            .uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => (p.to_owned(), String::new()),
            })
            .collect();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Call {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query,
            content_type,
            body,
            reply,
        }
    }

    /// The next request, which must be `method path`.
    pub(super) async fn expect(&mut self, method: Method, path: &str) -> Call {
        let call = self.next().await;
        assert_eq!(
            (&call.method, call.path.as_str()),
            (&method, path),
            "expected {method} {path}, got {call:?}"
        );
        call
    }

    /// The next request, which must be a forced server-side apply of `obj`
    /// at `path` by the field manager `valkyrie`, with `obj` as its body.
    pub(super) async fn expect_apply<K: Serialize>(&mut self, path: &str, obj: &K) -> Call {
        let call = self.expect(Method::PATCH, path).await;
        call.assert_query(&[("fieldManager", "valkyrie"), ("force", "true")]);
        call.assert_content_type(APPLY);
        let want = serde_json::to_value(obj).expect("a JSON object");
        assert_eq!(call.body, want, "the body applied at {path}");
        call
    }

    /// No request comes any more: every client has been dropped, and no
    /// request was left unanswered.
    pub(super) async fn done(mut self) {
        match timeout(WAIT, self.0.next_request()).await {
            Ok(None) => {}
            Ok(Some((request, _))) => {
                panic!("unexpected request {} {}", request.method(), request.uri())
            }
            Err(_) => panic!("a client is still alive"),
        }
    }
}

/// One request, read.
pub(super) struct Call {
    pub(super) method: Method,
    pub(super) path: String,
    pub(super) query: BTreeMap<String, String>,
    pub(super) content_type: Option<String>,
    pub(super) body: Value,
    reply: SendResponse<Response<Body>>,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {:?} {}",
            self.method, self.path, self.query, self.body
        )
    }
}

impl Call {
    /// The query is exactly `pairs`.
    pub(super) fn assert_query(&self, pairs: &[(&str, &str)]) {
        let want: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(
            self.query, want,
            "the query of {} {}",
            self.method, self.path
        );
    }

    pub(super) fn assert_content_type(&self, want: &str) {
        assert_eq!(
            self.content_type.as_deref(),
            Some(want),
            "the content type of {} {}",
            self.method,
            self.path
        );
    }

    /// Answers `code` with `body`.
    pub(super) fn reply(self, code: u16, body: &Value) {
        let mut response = Response::new(Body::from(body.to_string().into_bytes()));
        *response.status_mut() = StatusCode::from_u16(code).expect("a status code");
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        self.reply.send_response(response);
    }

    /// Answers 200 (201 for a POST) with the body sent.
    pub(super) fn echo(self) {
        let code = if self.method == Method::POST {
            201
        } else {
            200
        };
        let body = self.body.clone();
        self.reply(code, &body);
    }

    /// Answers with a `Status` of `code`, as the API server does on errors.
    pub(super) fn fail(self, code: u16, reason: &str) {
        let status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("{reason} (scripted)"),
            "reason": reason, "code": code,
        });
        self.reply(code, &status);
    }

    /// Answers 404 `NotFound`.
    pub(super) fn not_found(self) {
        self.fail(404, "NotFound");
    }
}
