//! Decode errors: one variant per way a peer can be wrong.
//!
//! The `Display` texts of the request-side errors are Valkey's own
//! `Protocol error: …` texts, so a server can send `-ERR {error}` and a
//! client sees what a Valkey server would have said.

/// Why a byte stream is not valid RESP (or breaks a [`Limits`](crate::Limits)).
///
/// After any of these the stream cannot be resynchronised: the connection
/// should get an error reply and be closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Aggregates nested deeper than `max_depth`.
    #[error("Protocol error: nesting deeper than {limit}")]
    DepthExceeded {
        /// The configured limit.
        limit: usize,
    },
    /// A bulk length above `max_bulk` (or negative other than `-1`).
    #[error("Protocol error: invalid bulk length")]
    BulkTooLong {
        /// The declared length (saturated).
        len: i64,
        /// The configured limit.
        limit: usize,
    },
    /// An aggregate length above `max_aggregate`.
    #[error("Protocol error: invalid multibulk length")]
    AggregateTooLong {
        /// The declared length (saturated).
        len: i64,
        /// The configured limit.
        limit: usize,
    },
    /// A line (or inline request) longer than `max_line`.
    #[error("Protocol error: too big inline request")]
    LineTooLong {
        /// The configured limit.
        limit: usize,
    },
    /// A frame or request larger than `max_frame` bytes.
    #[error("Protocol error: frame larger than {limit} bytes")]
    FrameTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// A type byte that starts no RESP value.
    #[error("Protocol error: invalid type byte {0:#04x}")]
    InvalidType(u8),
    /// A request array element that is not a bulk string.
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0))]
    ExpectedBulk(u8),
    /// A length header that is not a number (or is too long to be one).
    #[error("Protocol error: invalid length")]
    InvalidLength,
    /// A request's `*<count>` that is not a number as Valkey reads it
    /// (`string2ll`: no sign but `-`, no leading zeros).
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// A request argument's `$<len>` that is not a number as Valkey reads it.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An integer frame that is not a signed 64-bit integer.
    #[error("Protocol error: invalid integer")]
    InvalidInteger,
    /// A double frame that is not a number, `inf`, `-inf` or `nan`.
    #[error("Protocol error: invalid double")]
    InvalidDouble,
    /// A boolean frame other than `#t` or `#f`.
    #[error("Protocol error: invalid boolean")]
    InvalidBoolean,
    /// A null frame with a payload.
    #[error("Protocol error: invalid null")]
    InvalidNull,
    /// A big number that is not an optionally signed run of digits.
    #[error("Protocol error: invalid big number")]
    InvalidBigNumber,
    /// A verbatim string without its `xxx:` format prefix.
    #[error("Protocol error: invalid verbatim string")]
    InvalidVerbatim,
    /// A line holding a CR or LF, or ending in a bare LF.
    #[error("Protocol error: invalid line")]
    InvalidLine,
    /// A bulk payload not followed by CRLF.
    #[error("Protocol error: expected CRLF after bulk data")]
    MissingCrlf,
    /// An inline request with an unterminated quote.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

impl DecodeError {
    /// A short, fixed label for metrics (`parser errors by kind`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            DecodeError::DepthExceeded { .. } => "depth",
            DecodeError::BulkTooLong { .. } => "bulk_length",
            DecodeError::AggregateTooLong { .. } => "aggregate_length",
            DecodeError::LineTooLong { .. } => "line_length",
            DecodeError::FrameTooLarge { .. } => "frame_size",
            DecodeError::InvalidType(_) => "type",
            DecodeError::ExpectedBulk(_) => "expected_bulk",
            DecodeError::InvalidLength => "length",
            DecodeError::InvalidMultibulkLength => "multibulk_length",
            DecodeError::InvalidBulkLength => "bulk_length",
            DecodeError::InvalidInteger => "integer",
            DecodeError::InvalidDouble => "double",
            DecodeError::InvalidBoolean => "boolean",
            DecodeError::InvalidNull => "null",
            DecodeError::InvalidBigNumber => "big_number",
            DecodeError::InvalidVerbatim => "verbatim",
            DecodeError::InvalidLine => "line",
            DecodeError::MissingCrlf => "crlf",
            DecodeError::UnbalancedQuotes => "quotes",
        }
    }
}
