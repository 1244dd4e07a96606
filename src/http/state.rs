//! What the admin port serves from ([`AdminState`]), its bounds
//! ([`Limits`]) and why a request cannot be answered ([`RequestError`]).

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

/// Bounds on what one admin client may cost.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head (request line and headers) read.
    pub max_head: usize,
    /// Time allowed to send the whole request head.
    pub read_timeout: Duration,
    /// Time allowed to take the response.
    pub write_timeout: Duration,
    /// Connections served at once; a new one past it evicts the oldest.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 8 * 1024,
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(10),
            max_connections: 64,
        }
    }
}

/// What the admin port serves from.
#[derive(Clone, Debug)]
pub struct AdminState {
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The readiness latch; its sender lives as long as the runtime.
    pub ready: watch::Receiver<bool>,
    /// Trouble the runtime reports without stopping.
    pub health: watch::Receiver<crate::runtime::Health>,
    /// `admin-tls yes`: every connection is HTTPS, the handshake bounded
    /// by the read timeout.
    pub tls: Option<Arc<crate::tls::TlsContext>>,
    /// The status page's and API's source (`None`: they answer 404).
    pub status: Option<Arc<super::hub::Hub>>,
    /// Credentials the status page and API ask for (`None`: open, and
    /// no write is taken).
    pub auth: Option<Arc<super::auth::Auth>>,
    /// The planned switchovers, pause and resume of the API's writes
    /// (`None`: they answer 404).
    pub plans: Option<Arc<crate::plan::Plans>>,
}

/// Why a request could not be answered normally.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The head did not fit in [`Limits::max_head`].
    #[error("request head larger than {0} bytes")]
    TooLarge(usize),
    /// The client did not send a whole head in time.
    #[error("request head not received in time")]
    Timeout,
    /// The request line is not `METHOD SP TARGET SP HTTP/1.x`.
    #[error("malformed request line")]
    Malformed,
    /// The connection closed before a whole head arrived.
    #[error("connection closed before the request was complete")]
    Closed,
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
