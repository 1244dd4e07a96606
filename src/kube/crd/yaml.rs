//! A small, deterministic JSON-to-YAML writer for documents Valkyrie
//! generates (the CRD that `valkyrie crd` prints): block mappings and
//! sequences indented by two spaces, keys in the JSON object's order.
//!
//! Strings are written plain only when no YAML 1.1 or 1.2 reader could
//! take them for anything but a string (a letter first, then a small safe
//! set of characters, not a boolean or null word); text of several lines
//! as a literal block when that keeps it exactly; everything else
//! double-quoted, with escapes that YAML and JSON share. The output is
//! therefore read back as the same JSON value by any YAML reader.

use serde_json::Value;

/// The document for `value`, after `header` as `#` comment lines.
pub fn to_yaml(value: &Value, header: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(header) = header {
        for line in header.lines() {
            if line.is_empty() {
                out.push_str("#\n");
            } else {
                out.push_str("# ");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    match value {
        Value::Object(map) if !map.is_empty() => write_mapping(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => write_sequence(&mut out, items, 0, false),
        scalar => {
            write_scalar(&mut out, scalar, 0);
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A mapping whose keys sit at column `col`; `inline` when the first key
/// continues a line already started (after `- `).
fn write_mapping(out: &mut String, map: &serde_json::Map<String, Value>, col: usize, inline: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline {
            indent(out, col);
        }
        write_key(out, key);
        out.push(':');
        write_nested(out, value, col);
    }
}

/// A sequence whose dashes sit at column `col`.
fn write_sequence(out: &mut String, items: &[Value], col: usize, inline: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline {
            indent(out, col);
        }
        out.push('-');
        match item {
            Value::Object(map) if !map.is_empty() => {
                out.push(' ');
                write_mapping(out, map, col + 2, true);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push(' ');
                write_sequence(out, inner, col + 2, true);
            }
            scalar => {
                out.push(' ');
                write_scalar(out, scalar, col + 2);
                out.push('\n');
            }
        }
    }
}

/// The value of a key at column `col`, after its colon.
fn write_nested(out: &mut String, value: &Value, col: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_mapping(out, map, col + 2, false);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_sequence(out, items, col + 2, false);
        }
        scalar => {
            out.push(' ');
            write_scalar(out, scalar, col + 2);
            out.push('\n');
        }
    }
}

fn write_key(out: &mut String, key: &str) {
    if is_plain(key) {
        out.push_str(key);
    } else {
        write_quoted(out, key);
    }
}

/// A scalar (or an empty collection) in flow position; a literal block's
/// lines are indented to `block_col`. Leaves the line open.
fn write_scalar(out: &mut String, value: &Value, block_col: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => write_string(out, s, block_col),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A number as YAML 1.1 readers take it too: a float needs a dot, and its
/// exponent a sign.
fn number(n: &serde_json::Number) -> String {
    let text = n.to_string();
    if !n.is_f64() {
        return text;
    }
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(e) => (&text[..e], Some(&text[e + 1..])),
        None => (text.as_str(), None),
    };
    let mut out = mantissa.to_owned();
    if !mantissa.contains('.') {
        out.push_str(".0");
    }
    if let Some(exponent) = exponent {
        out.push('e');
        if !exponent.starts_with(['+', '-']) {
            out.push('+');
        }
        out.push_str(exponent);
    }
    out
}

fn write_string(out: &mut String, s: &str, block_col: usize) {
    if is_plain(s) {
        out.push_str(s);
    } else if let Some(chomp) = literal_chomping(s) {
        out.push('|');
        out.push_str(chomp);
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            out.push('\n');
            if !line.is_empty() {
                indent(out, block_col);
                out.push_str(line);
            }
        }
        // The caller ends the last line.
    } else {
        write_quoted(out, s);
    }
}

/// Words that YAML 1.1 or 1.2 readers turn into booleans or null.
const RESERVED: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null"];

/// Whether `s` can be written as a plain scalar and read back as the same
/// string by any reader: a letter first, then letters, digits, spaces and
/// `-_./(),;=+'` only, no trailing space, and no reserved word.
fn is_plain(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || " -_./(),;=+'".contains(c))
        && !s.ends_with(' ')
        && !RESERVED.contains(&s.to_ascii_lowercase().as_str())
}

/// The chomping indicator that keeps `s` exactly as a literal block, or
/// `None` when a literal block cannot: a single line, a leading space or
/// line break (indentation would be guessed from it), blank lines of
/// spaces, trailing spaces, several final line breaks, or any character
/// that is not printable.
fn literal_chomping(s: &str) -> Option<&'static str> {
    if !s.contains('\n') || s.starts_with([' ', '\n']) || s.ends_with("\n\n") {
        return None;
    }
    if s.chars().any(|c| c != '\n' && !printable(c) || c == '\t') {
        return None;
    }
    if s.split('\n').any(|line| line.ends_with(' ')) {
        return None;
    }
    Some(if s.ends_with('\n') { "" } else { "-" })
}

/// Characters YAML allows unescaped in a document, less the line breaks
/// and byte-order mark that some readers treat specially.
fn printable(c: char) -> bool {
    match c {
        '\u{20}'..='\u{7e}' => true,
        '\u{a0}'..='\u{d7ff}' => !matches!(c, '\u{2028}' | '\u{2029}'),
        '\u{e000}'..='\u{fffd}' => c != '\u{feff}',
        '\u{10000}'..='\u{10ffff}' => true,
        _ => false,
    }
}

fn write_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c => out.push_str(&format!("\\u{:04X}", u32::from(c))),
        }
    }
    out.push('"');
}
