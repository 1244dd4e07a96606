//! Errors of the index protocol's wire format: one variant per way a line
//! can be wrong. Each maps to the `ERR <code> <text>` reply a server sends.

/// Why a line of the index protocol is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// A line longer than the limit for its side.
    #[error("line longer than {limit} bytes")]
    LineTooLong {
        /// The limit.
        limit: usize,
    },
    /// A control byte other than space or tab inside a line.
    #[error("invalid byte {0:#04x} in line")]
    InvalidByte(u8),
    /// A command word the server does not know.
    #[error("unknown command '{0}'")]
    UnknownCommand(String),
    /// A known command or message with the wrong arguments.
    #[error("{0}")]
    Syntax(String),
    /// `HELLO` asked for a version below 1.
    #[error("unsupported protocol version {0}; this server speaks 1 to {max}", max = super::PROTOCOL_VERSION)]
    Version(u32),
    /// More `WATCH` patterns than one connection may hold.
    #[error("more than {limit} patterns")]
    TooManyPatterns {
        /// The limit.
        limit: usize,
    },
    /// A snapshot with more replicas than the client accepts.
    #[error("snapshot with more than {limit} replicas")]
    TooManyReplicas {
        /// The limit.
        limit: usize,
    },
}

impl IndexError {
    /// The error's code word in an `ERR` reply.
    pub fn code(&self) -> &'static str {
        match self {
            IndexError::LineTooLong { .. }
            | IndexError::TooManyPatterns { .. }
            | IndexError::TooManyReplicas { .. } => "limit",
            IndexError::InvalidByte(_) | IndexError::Syntax(_) => "syntax",
            IndexError::UnknownCommand(_) => "unknown-command",
            IndexError::Version(_) => "version",
        }
    }

    /// Whether the connection must be closed after the reply (the stream
    /// can no longer be trusted to be in step).
    pub fn is_fatal(&self) -> bool {
        matches!(self, IndexError::LineTooLong { .. })
    }
}
