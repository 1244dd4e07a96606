//! Why certificate material could not be used ([`TlsError`]).

use std::path::PathBuf;

/// Why certificate material could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A file's content is unusable.
    #[error("{path}: {message}")]
    Bad {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A certificate file holds no certificate.
    #[error("{0}: no certificate found")]
    NoCertificate(PathBuf),
    /// A key that is not the certificate's.
    #[error("the key in {key} does not match the certificate in {cert}")]
    Mismatch {
        /// The certificate.
        cert: PathBuf,
        /// The key.
        key: PathBuf,
    },
    /// A directive the material needs is not set.
    #[error("{0} must be set")]
    Missing(&'static str),
    /// rustls refused the configuration.
    #[error("TLS configuration refused: {0}")]
    Rustls(String),
}
