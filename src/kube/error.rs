//! The one error type of the Kubernetes input's reconcile layer: the
//! group source (`groups/`), the reconciler (`controller/`) and the
//! wiring (`input/`). Each variant has a bounded [`Error::metric_label`]
//! (the `reason` label of `valkyrie_reconcile_errors_total`) and an
//! [`Error::event_reason`] (the reason of the Warning event published on
//! the `ValkeyCluster`), so neither a metric nor an event ever carries an
//! unbounded text as a label.

use crate::kube::elector;
use crate::kube::labels::LabelError;
use crate::kube::render::RenderError;
use crate::runtime::Refusal;

/// Errors of the Kubernetes input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API request failed.
    #[error("{op}: {source}")]
    Api {
        /// What was asked (`apply StatefulSet cache`, `get Secret …`).
        op: String,
        /// The client's error.
        #[source]
        source: Box<::kube::Error>,
    },
    /// The finalizer `valkyrie.io/cleanup` could not be added or removed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<::kube::Error>),
    /// The CR cannot be rendered.
    #[error("render: {0}")]
    Render(#[from] RenderError),
    /// The role labels could not be repaired.
    #[error("role labels: {0}")]
    Labels(#[from] LabelError),
    /// The runtime refused the CR's group (a master name that
    /// sentinel.conf or another CR already uses).
    #[error("group {group}: {refusal}")]
    Refused {
        /// The group's name.
        group: String,
        /// The runtime's answer.
        refusal: Refusal,
    },
    /// A Secret the CR names (or the generated one) is missing, or lacks
    /// its key. The text names the Secret, never its content.
    #[error("Secret {namespace}/{name} has no key {key:?}")]
    SecretMissing {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// The key looked for.
        key: String,
    },
    /// The TLS Secret's certificate, key or CA does not build (not PEM,
    /// a key that is not the certificate's). The text names the Secret and
    /// the key, never the content.
    #[error("TLS Secret {namespace}/{name}: {message}")]
    TlsSecret {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The CR asks for something this release does not do.
    #[error("{reason}: {message}")]
    Invalid {
        /// A condition reason (`TLSReplicationRequired`, `NoMasterName`).
        reason: &'static str,
        /// For humans.
        message: String,
    },
    /// This process stopped leading while reconciling: nothing more is
    /// written.
    #[error("not the leader (the Lease is held elsewhere)")]
    NotLeader,
    /// A value could not be turned into JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The operating system's random source failed (a generated password).
    #[error("no random source: {0}")]
    Random(#[from] getrandom::Error),
    /// The Lease elector could not start.
    #[error(transparent)]
    Elector(#[from] elector::Error),
    /// The client configuration could not be inferred (in-cluster or
    /// `KUBECONFIG`).
    #[error("no Kubernetes client configuration: {0}")]
    Config(String),
}

impl Error {
    /// An API error for `op`.
    pub fn api(op: impl Into<String>, source: ::kube::Error) -> Error {
        Error::Api {
            op: op.into(),
            source: Box::new(source),
        }
    }

    /// The HTTP status of an API error, if the API server answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { source, .. } | Error::Finalizer(source) => match &**source {
                ::kube::Error::Api(s) => Some(s.code),
                _ => None,
            },
            Error::Labels(LabelError::Api(::kube::Error::Api(s))) => Some(s.code),
            _ => None,
        }
    }

    /// The `reason` label of `valkyrie_reconcile_errors_total`: one of a
    /// fixed set.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Api { .. } => match self.status() {
                Some(403) => "forbidden",
                Some(404) => "not_found",
                Some(409) => "conflict",
                Some(422) => "invalid",
                Some(_) => "api",
                None => "transport",
            },
            Error::Finalizer(_) => "finalizer",
            Error::Render(_) => "render",
            Error::Labels(_) => "labels",
            Error::Refused { .. } => "refused",
            Error::SecretMissing { .. } => "secret_missing",
            Error::TlsSecret { .. } => "tls_secret",
            Error::Invalid { .. } => "invalid_spec",
            Error::NotLeader => "not_leader",
            Error::Json(_) => "json",
            Error::Random(_) => "random",
            Error::Elector(_) => "elector",
            Error::Config(_) => "config",
        }
    }

    /// The reason of the Warning event published for this error.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Error::Api { .. } if self.status() == Some(403) => "Forbidden",
            Error::Api { .. } => "ApplyFailed",
            Error::Finalizer(_) => "FinalizerFailed",
            Error::Render(_) => "RenderError",
            Error::Labels(_) => "RoleLabelsFailed",
            Error::Refused { .. } => "GroupRefused",
            Error::SecretMissing { .. } => "SecretNotFound",
            Error::TlsSecret { .. } => "TLSSecretInvalid",
            Error::Invalid { reason, .. } => reason,
            Error::NotLeader => "NotLeader",
            Error::Json(_) | Error::Random(_) | Error::Elector(_) | Error::Config(_) => {
                "ReconcileFailed"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> Error {
        Error::api(
            "apply StatefulSet cache",
            ::kube::Error::Api(
                ::kube::core::Status::failure("no", "Forbidden")
                    .with_code(code)
                    .boxed(),
            ),
        )
    }

    #[test]
    fn api_errors_are_labelled_by_their_status() {
        assert_eq!(api(403).metric_label(), "forbidden");
        assert_eq!(api(403).event_reason(), "Forbidden");
        assert_eq!(api(409).metric_label(), "conflict");
        assert_eq!(api(500).metric_label(), "api");
        assert_eq!(api(500).event_reason(), "ApplyFailed");
        assert_eq!(api(500).status(), Some(500));
    }

    #[test]
    fn a_missing_secret_names_the_secret_not_its_content() {
        let e = Error::SecretMissing {
            namespace: "shop".into(),
            name: "cache-auth".into(),
            key: "password".into(),
        };
        assert_eq!(
            e.to_string(),
            "Secret shop/cache-auth has no key \"password\""
        );
        assert_eq!(e.metric_label(), "secret_missing");
        assert_eq!(e.event_reason(), "SecretNotFound");
    }
}
