//! The label selector's syntax: tokens, [`Requirement`]s, and Kubernetes'
//! rules for label keys (an optional DNS subdomain prefix and `/`, then a
//! name of at most 63 characters) and values (at most 63 characters,
//! letters, digits, `-`, `_` and `.`, starting and ending alphanumeric).

use std::collections::BTreeSet;

use super::error::{MAX_REQUIREMENTS, MAX_SELECTOR_BYTES, SelectionError, shown};

/// One requirement of a selector, on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Requirement {
    /// `k=v`, `k==v`: the label is present with this value.
    Equals(String, String),
    /// `k!=v`: the label is absent or has another value.
    NotEquals(String, String),
    /// `k in (a,b)`: the label is present with one of these values.
    In(String, BTreeSet<String>),
    /// `k notin (a,b)`: the label is absent or has none of these values.
    NotIn(String, BTreeSet<String>),
    /// `k`: the label is present.
    Exists(String),
    /// `!k`: the label is absent.
    NotExists(String),
}

/// One token of a selector's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    /// A run of anything but spaces and `=!(),<>`.
    Word(&'a str),
    /// `=` or `==`.
    Equals,
    /// `!=`.
    NotEquals,
    /// `!`.
    Bang,
    /// `(`.
    Open,
    /// `)`.
    Close,
    /// `,`.
    Comma,
    /// `<` or `>`: Kubernetes' numeric comparisons, refused.
    Comparison,
    /// The end of the text.
    End,
}

fn special(c: char) -> bool {
    c.is_whitespace() || "=!(),<>".contains(c)
}

/// The tokens of `text`, each with its byte offset, then [`Token::End`].
fn tokens(text: &str) -> Vec<(usize, Token<'_>)> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '=' | '!' => {
                let double = chars.next_if(|(_, n)| *n == '=').is_some();
                match (c, double) {
                    ('!', true) => Token::NotEquals,
                    ('!', false) => Token::Bang,
                    _ => Token::Equals,
                }
            }
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            '<' | '>' => Token::Comparison,
            _ => {
                let mut end = at + c.len_utf8();
                while let Some((i, n)) = chars.next_if(|(_, n)| !special(*n)) {
                    end = i + n.len_utf8();
                }
                Token::Word(&text[at..end])
            }
        };
        out.push((at, token));
    }
    out.push((text.len(), Token::End));
    out
}

/// The requirements of selector `text`.
pub(super) fn selector(text: &str) -> Result<Vec<Requirement>, SelectionError> {
    if text.len() > MAX_SELECTOR_BYTES {
        return Err(SelectionError::SelectorTooLong(text.len()));
    }
    let tokens = tokens(text);
    if tokens.len() == 1 {
        return Err(SelectionError::EmptySelector);
    }
    let mut p = Parser { tokens, next: 0 };
    let mut requirements = Vec::new();
    loop {
        if requirements.len() == MAX_REQUIREMENTS {
            return Err(SelectionError::TooManyRequirements);
        }
        requirements.push(p.requirement()?);
        match p.take() {
            (_, Token::Comma) => {}
            (_, Token::End) => return Ok(requirements),
            (at, t) => return Err(unexpected(at, t, "\",\" or the end")),
        }
    }
}

fn unexpected(at: usize, token: Token<'_>, expected: &'static str) -> SelectionError {
    let found = match token {
        Token::Comparison => return SelectionError::Comparison(at),
        Token::Word(w) => shown(w),
        Token::Equals => "\"=\"".into(),
        Token::NotEquals => "\"!=\"".into(),
        Token::Bang => "\"!\"".into(),
        Token::Open => "\"(\"".into(),
        Token::Close => "\")\"".into(),
        Token::Comma => "\",\"".into(),
        Token::End => "the end".into(),
    };
    SelectionError::Syntax {
        at,
        expected,
        found,
    }
}

struct Parser<'a> {
    tokens: Vec<(usize, Token<'a>)>,
    next: usize,
}

impl<'a> Parser<'a> {
    /// The next token (the end, again and again, once there).
    fn take(&mut self) -> (usize, Token<'a>) {
        let t = self.tokens[self.next.min(self.tokens.len() - 1)];
        self.next += 1;
        t
    }

    /// The next token, left there.
    fn peek(&self) -> (usize, Token<'a>) {
        self.tokens[self.next.min(self.tokens.len() - 1)]
    }

    fn key(&mut self) -> Result<String, SelectionError> {
        match self.take() {
            (_, Token::Word(w)) => key(w).map(|()| w.to_string()),
            (at, t) => Err(unexpected(at, t, "a label key")),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectionError> {
        if self.peek().1 == Token::Bang {
            self.take();
            return Ok(Requirement::NotExists(self.key()?));
        }
        let k = self.key()?;
        let (at, next) = self.peek();
        Ok(match next {
            Token::Comma | Token::End => Requirement::Exists(k),
            Token::Equals | Token::NotEquals => {
                let equals = self.take().1 == Token::Equals;
                // `k=` is the empty value, as in Kubernetes.
                let v = match self.peek().1 {
                    Token::Word(w) => {
                        self.take();
                        value(&k, w)?
                    }
                    _ => String::new(),
                };
                if equals {
                    Requirement::Equals(k, v)
                } else {
                    Requirement::NotEquals(k, v)
                }
            }
            Token::Word("in") | Token::Word("notin") => {
                let is_in = self.take().1 == Token::Word("in");
                let vs = self.set(&k)?;
                if is_in {
                    Requirement::In(k, vs)
                } else {
                    Requirement::NotIn(k, vs)
                }
            }
            t => {
                return Err(unexpected(
                    at,
                    t,
                    "an operator (=, ==, !=, in, notin), \",\" or the end",
                ));
            }
        })
    }

    /// `(a,b,…)`: at least one value, none empty.
    fn set(&mut self, k: &str) -> Result<BTreeSet<String>, SelectionError> {
        match self.take() {
            (_, Token::Open) => {}
            (at, t) => return Err(unexpected(at, t, "\"(\"")),
        }
        let mut vs = BTreeSet::new();
        if self.peek().1 == Token::Close {
            return Err(SelectionError::EmptySet(shown(k)));
        }
        loop {
            match self.take() {
                (_, Token::Word(w)) => vs.insert(value(k, w)?),
                (at, t) => return Err(unexpected(at, t, "a label value")),
            };
            match self.take() {
                (_, Token::Comma) => {}
                (_, Token::Close) => return Ok(vs),
                (at, t) => return Err(unexpected(at, t, "\",\" or \")\"")),
            }
        }
    }
}

/// A name part or a value: at most 63 characters, alphanumerics, `-`,
/// `_`, `.`, starting and ending alphanumeric (empty allowed by callers
/// that allow it).
fn name_rule(s: &str) -> Result<(), &'static str> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if s.len() > 63 {
        return Err("longer than 63 characters");
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err("only letters, digits, '-', '_' and '.' are allowed");
    }
    if !alnum(s.chars().next()) || !alnum(s.chars().last()) {
        return Err("it must start and end with a letter or a digit");
    }
    Ok(())
}

/// A DNS subdomain: at most 253 characters, dot-separated labels of
/// lower-case letters, digits and `-`, each starting and ending
/// alphanumeric.
fn prefix_rule(s: &str) -> Result<(), &'static str> {
    const WHY: &str = "the prefix must be a DNS subdomain (lower-case letters, digits, '-' \
                       and '.', each part starting and ending with a letter or a digit)";
    if s.len() > 253 {
        return Err("the prefix is longer than 253 characters");
    }
    let part_ok = |p: &str| {
        let edge =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        edge(p.chars().next())
            && edge(p.chars().last())
            && p.len() <= 63
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if s.split('.').all(part_ok) {
        Ok(())
    } else {
        Err(WHY)
    }
}

/// Checks a label key: `[prefix/]name`.
fn key(k: &str) -> Result<(), SelectionError> {
    let bad = |why| SelectionError::Key { key: shown(k), why };
    let name = match k.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() {
                return Err(bad("the prefix before '/' is empty"));
            }
            prefix_rule(prefix).map_err(bad)?;
            name
        }
        None => k,
    };
    if name.is_empty() {
        return Err(bad("the name is empty"));
    }
    if name.contains('/') {
        return Err(bad("at most one '/' (between the prefix and the name)"));
    }
    name_rule(name).map_err(bad)
}

/// Checks label value `v` of key `k`, and returns it.
fn value(k: &str, v: &str) -> Result<String, SelectionError> {
    name_rule(v).map_err(|why| SelectionError::Value {
        key: shown(k),
        value: shown(v),
        why,
    })?;
    Ok(v.to_string())
}
