//! `WATCH` patterns: group names with `*` (any run of bytes) and `?` (one
//! byte). A percent-escaped byte is always literal, so `%2A` matches a
//! group whose name contains `*`. Matching is the crate's one glob
//! matcher ([`crate::glob`]), with every other byte made literal.

use super::IndexError;
use super::wire::unescape_with;

/// A compiled `WATCH` pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// The pattern in [`crate::glob`]'s syntax: unescaped `*` and `?`
    /// kept, every other byte literal (`\`-escaped where the matcher
    /// would read it as syntax).
    glob: Vec<u8>,
    /// Whether it is made of stars only (it then matches an empty name,
    /// which Valkey's matcher would refuse).
    stars_only: bool,
    text: String,
}

impl Pattern {
    /// Compiles a pattern token as it appears on the wire.
    pub fn parse(token: &[u8]) -> Result<Pattern, IndexError> {
        let mut glob = Vec::with_capacity(token.len());
        let mut stars_only = true;
        unescape_with(token, |byte, escaped| {
            stars_only &= byte == b'*' && !escaped;
            match (byte, escaped) {
                (b'*' | b'?', false) => {}
                (b'*' | b'?' | b'[' | b'\\', _) => glob.push(b'\\'),
                _ => {}
            }
            glob.push(byte);
        })?;
        Ok(Pattern {
            glob,
            stars_only,
            text: String::from_utf8_lossy(token).into_owned(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches ([`crate::glob::matches`]; its cost is at
    /// most about the product of the two lengths).
    pub fn matches(&self, name: &str) -> bool {
        if name.is_empty() {
            return self.stars_only;
        }
        crate::glob::matches(&self.glob, name.as_bytes())
    }
}
