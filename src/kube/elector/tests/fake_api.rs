//! A fake Kubernetes API server for unit tests: a tower `Service` that a
//! `kube::Client` talks to, holding `coordination.k8s.io/v1` Leases in
//! memory.
//!
//! It does what the elector relies on, as the real API server does: GET
//! (404 when absent), POST (201; 409 `AlreadyExists`), PUT with a
//! `metadata.resourceVersion` compare-and-swap (409 `Conflict` on a stale
//! version, 404 when absent). Every client has its own [`Faults`]: a delay
//! before the request reaches the store or before a write's answer
//! comes back, a black hole (the request never
//! returns, as in a partition), a refused connection, or a 5xx answer.
//! Delays use `tokio::time`, so tests run under paused time.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use ::kube::client::Body;
use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};
use tokio::time::Instant;

/// What happens to a client's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Served at once.
    #[default]
    None,
    /// Served after this delay.
    Delay(Duration),
    /// Never answered (a partition: the request is lost).
    BlackHole,
    /// Fails at once, as a refused connection does.
    Refuse,
    /// Answered with this 5xx status, the store untouched.
    ServerError(u16),
    /// Writes are applied at once, but their answers come this much later.
    LateWriteAnswer(Duration),
}

/// One client's fault switch.
#[derive(Clone, Debug, Default)]
pub(crate) struct Faults(Arc<Mutex<Fault>>);

impl Faults {
    pub(crate) fn set(&self, fault: Fault) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = fault;
    }

    fn get(&self) -> Fault {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A successful write, as the store applied it.
#[derive(Clone, Debug)]
pub(crate) struct Write {
    pub(crate) at: Instant,
    pub(crate) holder: Option<String>,
    pub(crate) transitions: i32,
}

#[derive(Debug, Default)]
struct Store {
    /// (namespace, name) → object.
    leases: BTreeMap<(String, String), Value>,
    last_version: u64,
    writes: Vec<Write>,
    conflicts: u64,
}

/// The shared store; [`FakeApi::client`] gives clients onto it.
#[derive(Clone, Debug, Default)]
pub(crate) struct FakeApi {
    store: Arc<Mutex<Store>>,
}

impl FakeApi {
    pub(crate) fn new() -> FakeApi {
        FakeApi::default()
    }

    /// A client (default namespace `default`) and its fault switch.
    pub(crate) fn client(&self) -> (::kube::Client, Faults) {
        let faults = Faults::default();
        let service = FakeService {
            store: self.store.clone(),
            faults: faults.clone(),
        };
        (::kube::Client::new(service, "default"), faults)
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The Lease as stored.
    pub(crate) fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        let key = (namespace.to_string(), name.to_string());
        let value = self.store().leases.get(&key).cloned()?;
        serde_json::from_value(value).ok()
    }

    /// Deletes a Lease behind everyone's back (as `kubectl delete` would).
    pub(crate) fn delete(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.store().leases.remove(&key);
    }

    /// Every successful POST and PUT so far.
    pub(crate) fn writes(&self) -> Vec<Write> {
        self.store().writes.clone()
    }

    /// How many writes were refused with 409.
    pub(crate) fn conflicts(&self) -> u64 {
        self.store().conflicts
    }
}

#[derive(Clone, Debug)]
struct FakeService {
    store: Arc<Mutex<Store>>,
    faults: Faults,
}

type Answer = Result<Response<Body>, tower::BoxError>;

impl tower::Service<Request<Body>> for FakeService {
    type Response = Response<Body>;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let store = self.store.clone();
        let fault = self.faults.get();
        Box::pin(async move {
            match fault {
                Fault::None | Fault::LateWriteAnswer(_) => {}
                Fault::Delay(d) => tokio::time::sleep(d).await,
                Fault::BlackHole => std::future::pending::<()>().await,
                Fault::Refuse => return Err("connection refused (fake partition)".into()),
                Fault::ServerError(code) => {
                    return Ok(status(code, "InternalError", "injected server error"));
                }
            }
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await?;
            let response = {
                let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
                serve(&mut store, &parts.method, parts.uri.path(), &bytes)
            };
            if let Fault::LateWriteAnswer(d) = fault
                && parts.method != Method::GET
            {
                tokio::time::sleep(d).await;
            }
            Ok(response)
        })
    }
}

/// `/apis/coordination.k8s.io/v1/namespaces/<ns>/leases[/<name>]`.
fn route(path: &str) -> Option<(String, Option<String>)> {
    let rest = path.strip_prefix("/apis/coordination.k8s.io/v1/namespaces/")?;
    let mut parts = rest.split('/');
    let namespace = parts.next()?.to_string();
    if parts.next()? != "leases" {
        return None;
    }
    let name = parts.next().map(str::to_string);
    match parts.next() {
        None => Some((namespace, name)),
        Some(_) => None,
    }
}

fn serve(store: &mut Store, method: &Method, path: &str, body: &[u8]) -> Response<Body> {
    let Some((namespace, name)) = route(path) else {
        return status(404, "NotFound", "the fake API serves Leases only");
    };
    match (method, name) {
        (&Method::GET, Some(name)) => match store.leases.get(&(namespace, name.clone())) {
            Some(lease) => object(200, lease),
            None => not_found(&name),
        },
        (&Method::POST, None) => write(store, namespace, None, body),
        (&Method::PUT, Some(name)) => write(store, namespace, Some(name), body),
        _ => status(405, "MethodNotAllowed", "not served by the fake API"),
    }
}

/// POST (`put_name` None) or PUT.
fn write(
    store: &mut Store,
    namespace: String,
    put_name: Option<String>,
    body: &[u8],
) -> Response<Body> {
    let Ok(mut lease) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not JSON");
    };
    let name = match lease.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if put_name.as_deref().is_none_or(|p| p == n) => n.to_string(),
        _ => return status(400, "BadRequest", "metadata.name is missing or differs"),
    };
    let key = (namespace.clone(), name.clone());
    let existing = store.leases.get(&key);
    let uid = match (&put_name, existing) {
        (None, Some(_)) => {
            store.conflicts += 1;
            return status(
                409,
                "AlreadyExists",
                &format!("leases \"{name}\" already exists"),
            );
        }
        (Some(_), None) => return not_found(&name),
        (None, None) => format!("uid-{}", store.last_version + 1),
        (Some(_), Some(current)) => {
            let stored = current.pointer("/metadata/resourceVersion");
            let sent = lease.pointer("/metadata/resourceVersion");
            if sent.is_some() && sent != stored {
                store.conflicts += 1;
                let message = format!(
                    "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": \
                     the object has been modified; please apply your changes to the latest \
                     version and try again"
                );
                return status(409, "Conflict", &message);
            }
            let uid = current.pointer("/metadata/uid").and_then(Value::as_str);
            uid.unwrap_or_default().to_string()
        }
    };
    store.last_version += 1;
    let version = store.last_version;
    if let Some(meta) = lease.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), json!(namespace));
        meta.insert("uid".into(), json!(uid));
        meta.insert("resourceVersion".into(), json!(version.to_string()));
    }
    let spec = lease.get("spec");
    let field = |f: &str| spec.and_then(|s| s.get(f));
    store.writes.push(Write {
        at: Instant::now(),
        holder: field("holderIdentity")
            .and_then(Value::as_str)
            .map(str::to_string),
        transitions: field("leaseTransitions")
            .and_then(Value::as_i64)
            .and_then(|t| i32::try_from(t).ok())
            .unwrap_or(0),
    });
    let code = if put_name.is_some() { 200 } else { 201 };
    let response = object(code, &lease);
    store.leases.insert(key, lease);
    response
}

fn object(code: u16, value: &Value) -> Response<Body> {
    respond(code, value.to_string())
}

fn not_found(name: &str) -> Response<Body> {
    let message = format!("leases.coordination.k8s.io \"{name}\" not found");
    status(404, "NotFound", &message)
}

/// A `Status` answer, as the API server sends with every error.
fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    respond(code, body.to_string())
}

fn respond(code: u16, body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(body.into_bytes()));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
