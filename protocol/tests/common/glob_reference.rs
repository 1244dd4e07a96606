//! A reference glob matcher, written differently from
//! `valkyrie_protocol::glob` on purpose, for differential tests (the
//! `glob` proptest and the `glob` fuzz target): the pattern is first
//! parsed into tokens, then matched by memoised recursion over (token,
//! byte) positions — slow, obviously correct, no nesting limit (callers
//! keep patterns under Valkey's 1000 stars).
//!
//! The grammar is Valkey's `stringmatchlen`, quirks included: a class
//! left open runs to the end of the pattern, a range's upper end may be
//! `]`, a trailing `\` is literal, and an empty text matches only the
//! empty pattern.

#[derive(Debug)]
enum Token {
    Star,
    One,
    Byte(u8),
    Class {
        negate: bool,
        bytes: Vec<u8>,
        ranges: Vec<(u8, u8)>,
    },
}

fn tokens(p: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                out.push(Token::Star);
                i += 1;
            }
            b'?' => {
                out.push(Token::One);
                i += 1;
            }
            b'\\' if i + 1 < p.len() => {
                out.push(Token::Byte(p[i + 1]));
                i += 2;
            }
            b'[' => {
                i += 1;
                let negate = p.get(i) == Some(&b'^');
                if negate {
                    i += 1;
                }
                let (mut bytes, mut ranges) = (Vec::new(), Vec::new());
                while i < p.len() {
                    if p[i] == b'\\' && i + 1 < p.len() {
                        bytes.push(p[i + 1]);
                        i += 2;
                    } else if p[i] == b']' {
                        i += 1;
                        break;
                    } else if i + 2 < p.len() && p[i + 1] == b'-' {
                        ranges.push((p[i].min(p[i + 2]), p[i].max(p[i + 2])));
                        i += 3;
                    } else {
                        bytes.push(p[i]);
                        i += 1;
                    }
                }
                out.push(Token::Class {
                    negate,
                    bytes,
                    ranges,
                });
            }
            b => {
                out.push(Token::Byte(b));
                i += 1;
            }
        }
    }
    out
}

fn one(t: &Token, c: u8) -> bool {
    match t {
        Token::Star => unreachable!(),
        Token::One => true,
        Token::Byte(b) => *b == c,
        Token::Class {
            negate,
            bytes,
            ranges,
        } => {
            let hit = bytes.contains(&c) || ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c));
            hit != *negate
        }
    }
}

/// Whether `text` matches `pattern`, by the reference method.
pub fn reference_matches(pattern: &[u8], text: &[u8]) -> bool {
    if text.is_empty() {
        return pattern.is_empty();
    }
    let toks = tokens(pattern);
    let mut memo = vec![None; (toks.len() + 1) * (text.len() + 1)];
    go(&toks, text, 0, 0, &mut memo)
}

fn go(toks: &[Token], s: &[u8], t: usize, i: usize, memo: &mut [Option<bool>]) -> bool {
    let key = t * (s.len() + 1) + i;
    if let Some(v) = memo[key] {
        return v;
    }
    let v = match toks.get(t) {
        None => i == s.len(),
        Some(Token::Star) => {
            go(toks, s, t + 1, i, memo) || (i < s.len() && go(toks, s, t, i + 1, memo))
        }
        Some(tok) => i < s.len() && one(tok, s[i]) && go(toks, s, t + 1, i + 1, memo),
    };
    memo[key] = Some(v);
    v
}
