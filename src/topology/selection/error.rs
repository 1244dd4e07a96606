//! What a selection may hold at most, and why one is refused
//! ([`SelectionError`]), in words for the operator; hostile input is
//! quoted and shortened ([`shown`]) before it is echoed.

/// At most this many bytes of selector text.
pub const MAX_SELECTOR_BYTES: usize = 4096;
/// At most this many comma-separated requirements in a selector.
pub const MAX_REQUIREMENTS: usize = 64;
/// At most this many names in a selection.
pub const MAX_NAMES: usize = 1024;
/// At most this many globs in a selection.
pub const MAX_GLOBS: usize = 1024;
/// At most this many bytes in one glob.
pub const MAX_GLOB_BYTES: usize = 4096;

/// Why a selection is refused, in words for the operator.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// An empty selector would select every group by accident.
    #[error("the label selector is empty (it would select every group; the glob * does that)")]
    EmptySelector,
    /// The selector text is too long.
    #[error("the label selector is {0} bytes long: at most {MAX_SELECTOR_BYTES}")]
    SelectorTooLong(usize),
    /// More requirements than [`MAX_REQUIREMENTS`].
    #[error("the label selector has more than {MAX_REQUIREMENTS} requirements")]
    TooManyRequirements,
    /// The selector does not follow the syntax.
    #[error("bad label selector at byte {at}: expected {expected}, found {found}")]
    Syntax {
        /// Byte offset of the offending token.
        at: usize,
        /// What the syntax allows there.
        expected: &'static str,
        /// What is there (quoted, shortened), or `the end`.
        found: String,
    },
    /// `<` and `>` (numeric comparisons) are not supported.
    #[error("bad label selector at byte {0}: the operators < and > are not supported")]
    Comparison(usize),
    /// `k in ()`: an empty set of values.
    #[error("bad label selector: {0} in () or notin () needs at least one value")]
    EmptySet(String),
    /// A key that is not a Kubernetes label key.
    #[error("bad label key {key}: {why}")]
    Key {
        /// The key (quoted, shortened).
        key: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A value that is not a Kubernetes label value.
    #[error("bad label value {value} of {key}: {why}")]
    Value {
        /// The key (quoted, shortened).
        key: String,
        /// The value (quoted, shortened).
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Too many names or globs, or too long a glob.
    #[error("too many {what}: at most {max}")]
    TooMany {
        /// `names`, `globs` or `bytes in a glob`.
        what: &'static str,
        /// The bound.
        max: usize,
    },
    /// A name that is not a group's.
    #[error("no such group: {0}")]
    NoSuchGroup(String),
    /// Nothing matched.
    #[error("no group matches {0}")]
    NothingMatched(String),
}

/// `s` quoted with its control characters escaped, and shortened: an
/// error never echoes a client's input at length.
pub(crate) fn shown(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((at, _)) => format!("{:?}…", &s[..at]),
        None => format!("{s:?}"),
    }
}
