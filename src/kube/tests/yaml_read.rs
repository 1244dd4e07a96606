//! A YAML reader for the subset that the example CRs and the CRD writer
//! use, for tests only: block mappings and sequences, comments, plain,
//! single- and double-quoted scalars, literal blocks (`|`, `|-`), and the
//! empty flow collections `{}` and `[]`. Anything else panics, so an
//! example that strays from the subset fails loudly rather than being
//! misread.

use serde_json::{Map, Number, Value};

/// The value of the one document in `text`.
pub fn parse(text: &str) -> Value {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.trim() != "---")
        .map(str::to_owned)
        .collect();
    let mut i = 0;
    skip_blank(&lines, &mut i);
    let indent = indent_of(&lines[i]);
    let value = node(&mut lines, &mut i, indent);
    skip_blank(&lines, &mut i);
    assert!(
        i == lines.len(),
        "unread YAML from line {}: {:?}",
        i + 1,
        lines[i]
    );
    value
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

fn skip_blank(lines: &[String], i: &mut usize) {
    while *i < lines.len() && is_blank(&lines[*i]) {
        *i += 1;
    }
}

fn is_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// The node whose first line is `lines[*i]`, at column `indent`.
fn node(lines: &mut [String], i: &mut usize, indent: usize) -> Value {
    let content = lines[*i][indent..].to_owned();
    if is_item(&content) {
        sequence(lines, i, indent)
    } else if let Some(chomp) = content.strip_prefix('|') {
        // A literal block as a sequence item: its lines sit at `indent`,
        // deeper than the dash.
        *i += 1;
        literal(lines, i, indent - 1, chomp)
    } else if split_key(&content).is_some() {
        mapping(lines, i, indent)
    } else {
        *i += 1;
        scalar(&content)
    }
}

fn sequence(lines: &mut [String], i: &mut usize, indent: usize) -> Value {
    let mut items = Vec::new();
    loop {
        skip_blank(lines, i);
        if *i >= lines.len() || indent_of(&lines[*i]) != indent {
            break;
        }
        let content = lines[*i][indent..].to_owned();
        if !is_item(&content) {
            break;
        }
        let rest = content[1..].trim_start();
        if rest.is_empty() {
            *i += 1;
            skip_blank(lines, i);
            let child = indent_of(&lines[*i]);
            assert!(child > indent, "empty sequence item at line {}", *i + 1);
            items.push(node(lines, i, child));
        } else {
            // `- x`: read x as if it started two columns further in.
            let col = indent + (content.len() - rest.len());
            lines[*i] = format!("{}{rest}", " ".repeat(col));
            items.push(node(lines, i, col));
        }
    }
    Value::Array(items)
}

fn mapping(lines: &mut [String], i: &mut usize, indent: usize) -> Value {
    let mut map = Map::new();
    loop {
        skip_blank(lines, i);
        if *i >= lines.len() || indent_of(&lines[*i]) != indent {
            break;
        }
        let content = lines[*i][indent..].to_owned();
        let Some((key, rest)) = split_key(&content) else {
            break;
        };
        *i += 1;
        let rest = strip_comment(rest.trim());
        let value = if rest.is_empty() {
            skip_blank(lines, i);
            let next = lines
                .get(*i)
                .map(|l| (indent_of(l), l.trim_start().to_owned()));
            match next {
                Some((n, c)) if n > indent || (n == indent && is_item(&c)) => node(lines, i, n),
                _ => Value::Null,
            }
        } else if let Some(chomp) = rest.strip_prefix('|') {
            literal(lines, i, indent, chomp)
        } else {
            scalar(rest)
        };
        assert!(
            map.insert(key.clone(), value).is_none(),
            "duplicate key {key}"
        );
    }
    Value::Object(map)
}

/// A literal block after `key: |` (or `|-`), its lines deeper than `indent`.
fn literal(lines: &[String], i: &mut usize, indent: usize, chomp: &str) -> Value {
    let mut body: Vec<&str> = Vec::new();
    let mut block = None;
    while *i < lines.len() {
        let line = &lines[*i];
        if line.trim().is_empty() {
            body.push("");
        } else {
            let n = indent_of(line);
            if n <= indent {
                break;
            }
            let b = *block.get_or_insert(n);
            assert!(n >= b, "literal block line {} less indented", *i + 1);
            body.push(&line[b..]);
        }
        *i += 1;
    }
    while body.last() == Some(&"") {
        body.pop();
    }
    let mut text = body.join("\n");
    match chomp {
        "" => text.push('\n'),
        "-" => {}
        other => panic!("unsupported block indicator |{other}"),
    }
    Value::String(text)
}

/// `key: rest` or `key:` (the key plain or quoted), else `None`.
fn split_key(content: &str) -> Option<(String, &str)> {
    if content.starts_with('"') || content.starts_with('\'') {
        let (key, end) = quoted(content);
        let rest = content[end..].strip_prefix(':')?;
        return (rest.is_empty() || rest.starts_with(' ')).then_some((key, rest));
    }
    if content.starts_with('#') {
        return None;
    }
    let at = content
        .find(": ")
        .or_else(|| content.ends_with(':').then(|| content.len() - 1))?;
    Some((content[..at].to_owned(), &content[at + 1..]))
}

fn strip_comment(s: &str) -> &str {
    if s.starts_with('"') || s.starts_with('\'') {
        return s;
    }
    match s.find(" #") {
        Some(at) => s[..at].trim_end(),
        None => s,
    }
}

/// A quoted scalar at the start of `s`, and the byte after its closing quote.
fn quoted(s: &str) -> (String, usize) {
    let quote = s.chars().next().unwrap_or('"');
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        match c {
            c if c == quote => {
                if quote == '\'' && s[at + 1..].starts_with('\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                return (out, at + 1);
            }
            '\\' if quote == '"' => {
                let (_, e) = chars.next().expect("escape at end of string");
                match e {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'u' => {
                        let hex: String = (0..4).map(|_| chars.next().expect("\\u").1).collect();
                        let code = u32::from_str_radix(&hex, 16).expect("\\u hex");
                        out.push(char::from_u32(code).expect("\\u code point"));
                    }
                    other => panic!("unsupported escape \\{other}"),
                }
            }
            c => out.push(c),
        }
    }
    panic!("unterminated quoted scalar: {s}")
}

fn scalar(s: &str) -> Value {
    let s = strip_comment(s.trim());
    if s.starts_with('"') || s.starts_with('\'') {
        let (text, end) = quoted(s);
        assert!(
            s[end..].trim().is_empty(),
            "text after a quoted scalar: {s}"
        );
        return Value::String(text);
    }
    match s {
        "{}" => return Value::Object(Map::new()),
        "[]" => return Value::Array(Vec::new()),
        "null" | "~" => return Value::Null,
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    assert!(
        !s.starts_with(['{', '[', '&', '*', '!', '|', '>', '%', '@', '`']),
        "unsupported YAML: {s}"
    );
    if let Ok(n) = s.parse::<i64>() {
        return Value::Number(n.into());
    }
    let numeric = s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.');
    if numeric
        && s.contains(['.', 'e', 'E'])
        && let Ok(f) = s.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(s.to_owned())
}
