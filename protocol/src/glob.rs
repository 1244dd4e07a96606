//! Glob matching as Valkey's `stringmatchlen` does it, byte for byte: the
//! one matcher behind `PSUBSCRIBE`, the ACL's channel patterns,
//! `SENTINEL RESET`/`SENTINEL DEBUG` patterns and the index protocol's
//! `WATCH` patterns.
//!
//! - `*` matches any run of bytes (consecutive stars count as one), `?`
//!   any one byte;
//! - `[abc]` one of the listed bytes, `[a-z]` a range (either order),
//!   `[^…]` the complement, `\x` inside a class a literal `x`; a class
//!   left open at the end of the pattern ends there;
//! - `\x` elsewhere is a literal `x` (a trailing `\` is itself);
//! - everything else matches itself;
//! - an empty text matches only the empty pattern (not even `*`).
//!
//! Valkey's quirks are kept, because a client's pattern must match the
//! same channels here as on a real Sentinel: a range's upper end is taken
//! even when it is `]` (so `[a-]x]` is one class of `]`…`a` and `x`), and
//! a pattern with more than 1000 stars that must be passed while text
//! remains matches nothing (Valkey's guard against abusive patterns).
//!
//! Cost: each star tries the rest of the pattern at each later position,
//! but once the rest fails from every position no earlier star tries a
//! longer match (Valkey's `skipLongerMatches`), so the work is bounded
//! by about the product of the two lengths, and the recursion by the
//! 1000-star limit.

/// Stars a match may pass through with text left, as Valkey allows.
pub const MAX_NESTING: usize = 1000;

/// Whether `text` matches `pattern` (Valkey's `stringmatchlen`, case
/// sensitive).
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let mut skip_longer = false;
    match_from(pattern, text, &mut skip_longer, 0)
}

fn match_from(mut p: &[u8], mut s: &[u8], skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    while let (Some(&pc), Some(&sc)) = (p.first(), s.first()) {
        match pc {
            b'*' => {
                while p.len() >= 2 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_from(&p[1..], s, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                // The rest of the pattern matches from nowhere in the
                // rest of the text: no earlier star can help by
                // matching more.
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
                p = &p[1..];
            }
            b'[' => {
                let (matched, rest) = class(&p[1..], sc);
                if !matched {
                    return false;
                }
                s = &s[1..];
                p = rest;
            }
            _ => {
                let (literal, rest) = match p {
                    [b'\\', c, ..] => (*c, &p[2..]),
                    _ => (pc, &p[1..]),
                };
                if literal != sc {
                    return false;
                }
                s = &s[1..];
                p = rest;
            }
        }
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// Matches `c` against the class whose body starts at `p` (just after
/// `[`). Returns whether it matched and the pattern after the class.
fn class(mut p: &[u8], c: u8) -> (bool, &[u8]) {
    let negate = p.first() == Some(&b'^');
    if negate {
        p = &p[1..];
    }
    let mut matched = false;
    loop {
        match p {
            [] => break,
            [b'\\', x, ..] => {
                matched |= *x == c;
                p = &p[2..];
            }
            [b']', ..] => {
                p = &p[1..];
                break;
            }
            [a, b'-', b, ..] => {
                let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                matched |= (lo..=hi).contains(&c);
                p = &p[3..];
            }
            [x, ..] => {
                matched |= *x == c;
                p = &p[1..];
            }
        }
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        for (p, t, m) in [
            ("*", "+switch-master", true),
            // Valkey: an empty text matches only an empty pattern.
            ("*", "", false),
            ("", "", true),
            ("", "a", false),
            ("+switch-master", "+switch-master", true),
            ("+*", "+sdown", true),
            ("[-+]sdown", "-sdown", true),
            ("[-+]sdown", "+sdown", true),
            ("[-+]sdown", "xsdown", false),
            ("+s?own", "+sdown", true),
            ("*master", "+switch-master", true),
            ("*master", "+switch-masters", false),
            ("[^+]odown", "-odown", true),
            ("[^+]odown", "+odown", false),
            ("[a-c]x", "bx", true),
            ("[c-a]x", "bx", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("a\\", "a\\", true),
            ("[\\]]", "]", true),
            ("[abc", "b", true),
            ("[^", "x", true),
            ("[", "x", false),
            ("a*", "a", true),
            ("a**", "a", true),
            ("a*b", "a", false),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
            ("a*b*c", "abbbc", true),
            ("a*b*c", "abbbcd", false),
            ("switch-master", "+switch-master", false),
            // Valkey takes `]` as a range's upper end.
            ("[a-]x]", "x", true),
            ("[a-]x]", "-", false),
            ("[a-]", "^", true),
        ] {
            assert_eq!(matches(p.as_bytes(), t.as_bytes()), m, "{p} ~ {t}");
        }
    }

    #[test]
    fn abusive_patterns_stay_cheap_and_bounded() {
        let p = "*a".repeat(100);
        assert!(!matches(p.as_bytes(), "a".repeat(99).as_bytes()));
        assert!(matches(p.as_bytes(), "a".repeat(100).as_bytes()));
        let p = "a*".repeat(20_000);
        let t = "a".repeat(30_000);
        // Past Valkey's 1000 stars a match with text left fails…
        assert!(!matches(p.as_bytes(), t.as_bytes()));
        // …but a trailing run of stars is skipped without nesting.
        let p = format!("{}{}", "a*".repeat(1000), "*".repeat(5000));
        assert!(matches(p.as_bytes(), "a".repeat(1000).as_bytes()));
    }
}
