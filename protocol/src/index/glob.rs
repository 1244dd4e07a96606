//! `WATCH` patterns: group names with `*` (any run of bytes) and `?` (one
//! byte). A percent-escaped byte is always literal, so `%2A` matches a
//! group whose name contains `*`.

use super::IndexError;
use super::wire::unescape_with;

/// One element of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Byte(u8),
    Any,
    One,
}

/// A compiled `WATCH` pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    items: Vec<Item>,
    text: String,
}

impl Pattern {
    /// Compiles a pattern token as it appears on the wire.
    pub fn parse(token: &[u8]) -> Result<Pattern, IndexError> {
        let mut items = Vec::with_capacity(token.len());
        unescape_with(token, |byte, escaped| {
            items.push(match (byte, escaped) {
                (b'*', false) => Item::Any,
                (b'?', false) => Item::One,
                (b, _) => Item::Byte(b),
            })
        })?;
        Ok(Pattern {
            items,
            text: String::from_utf8_lossy(token).into_owned(),
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches. Linear backtracking over the last `*`, so
    /// the cost is at most the product of the two lengths.
    pub fn matches(&self, name: &str) -> bool {
        let s = name.as_bytes();
        let p = &self.items;
        let (mut i, mut j) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            match p.get(j) {
                Some(Item::Any) => {
                    star = Some((j, i));
                    j += 1;
                }
                Some(Item::One) => {
                    i += 1;
                    j += 1;
                }
                Some(Item::Byte(b)) if *b == s[i] => {
                    i += 1;
                    j += 1;
                }
                _ => match star {
                    Some((sj, si)) => {
                        j = sj + 1;
                        i = si + 1;
                        star = Some((sj, si + 1));
                    }
                    None => return false,
                },
            }
        }
        p[j.min(p.len())..].iter().all(|x| *x == Item::Any)
    }
}
