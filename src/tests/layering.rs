//! The floors of the daemon, checked on its sources: every `crate::`
//! path a module's code names (comments and test modules left out) runs
//! to its own floor or one below, the top-level modules import one
//! another without a loop, and no file names a file that names it back,
//! directly or through others (`crate::`, `super::`, `self::` and child
//! module paths, resolved to the file that holds them; method calls name
//! no file, so an `impl` split over files is no loop).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, lowest first. The core and the protocol are crates of
/// their own, below every floor: the compiler keeps them from reaching up.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &[
            "backoff",
            "config",
            "events",
            "listen",
            "metrics",
            "scripts",
            "state",
            "telemetry",
            "tls",
        ],
    ),
    ("links", &["link", "peer"]),
    ("read side", &["topology"]),
    ("shell", &["runtime", "plan"]),
    ("ports", &["http", "index", "kube", "sentinel"]),
    ("daemon", &["daemon", "demo", "watch"]),
];

/// A source file: its module path (`runtime/shell`, `runtime/mod` for a
/// module root) and its code without comments and test modules.
struct Source {
    module: String,
    code: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(&root).ok()?.with_extension("");
            let module = rel.to_str()?.to_string();
            // Test code may reach anywhere; the binary uses the library.
            let test = rel.components().any(|c| c.as_os_str() == "tests");
            if test || module == "main" || module == "lib" {
                return None;
            }
            let text = std::fs::read_to_string(&path).ok()?;
            Some(Source {
                module,
                code: code_of(&text),
            })
        })
        .collect()
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        panic!("cannot read {}", dir.display());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `text` without its comments and its `#[cfg(test)] mod tests { … }`
/// block (always last in a file here).
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests {")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string (a URL) keeps the line.
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths `code` names from the crate root: `crate::a::b` as
/// `["a", "b"]`, including each item of `use crate::{a::b, c}`.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    let mut paths = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find("};").unwrap_or(group.len());
            for item in group[..end].split(',') {
                let item = item.trim().trim_start_matches('{');
                if !item.is_empty() {
                    paths.push(ident(item));
                }
            }
        } else {
            paths.push(ident(rest));
        }
    }
    paths.retain(|p| !p.is_empty());
    paths
}

/// The path `text` starts with: `a::b::C`, or `a::{b, c::D}` up to its
/// closing brace.
fn path_at(text: &str) -> &str {
    let mut depth = 0;
    let end = text
        .char_indices()
        .find(|&(_, c)| match c {
            '{' => {
                depth += 1;
                false
            }
            '}' => {
                depth -= 1;
                depth == 0
            }
            c => depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':'),
        })
        .map_or(text.len(), |(i, c)| if c == '}' { i + 1 } else { i });
    &text[..end]
}

fn floor_of(module: &str) -> usize {
    FLOORS
        .iter()
        .position(|(_, members)| members.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` is on no floor: add it to FLOORS"))
}

fn top(module: &str) -> &str {
    module.split('/').next().unwrap_or(module)
}

#[test]
fn imports_run_down_the_floors_and_top_level_modules_have_no_loop() {
    let sources = sources();
    assert!(
        sources.len() > 50,
        "only {} source files found",
        sources.len()
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut upward = Vec::new();
    for s in &sources {
        let from = top(&s.module);
        for path in crate_paths(&s.code) {
            let to = path[0].as_str();
            if to == from || to == "core" || to == "protocol" {
                continue;
            }
            if floor_of(to) > floor_of(from) {
                upward.push(format!("{} -> crate::{}", s.module, path.join("::")));
            }
            graph
                .entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
    }
    assert!(upward.is_empty(), "imports up the floors: {upward:#?}");
    let loops = loops(&graph);
    assert!(
        loops.is_empty(),
        "loops between top-level modules: {loops:?}"
    );
}

#[test]
fn no_file_reaches_back_to_a_file_that_reaches_it() {
    let sources = sources();
    let modules: BTreeSet<&str> = sources.iter().map(|s| s.module.as_str()).collect();
    // The file a path lands in: its longest prefix that is a file.
    let file_of = |path: &[String]| -> Option<String> {
        (1..=path.len()).rev().find_map(|n| {
            let joined = path[..n].join("/");
            [joined.clone(), format!("{joined}/mod")]
                .into_iter()
                .find(|m| modules.contains(m.as_str()))
        })
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &sources {
        let own: Vec<String> = s
            .module
            .trim_end_matches("/mod")
            .split('/')
            .map(String::from)
            .collect();
        let mut targets: Vec<Vec<String>> = crate_paths(&s.code);
        // `super::x` and `self::x`, relative to this module.
        for (keyword, up) in [("super::", 1usize), ("self::", 0)] {
            for (at, _) in s.code.match_indices(keyword) {
                if s.code[..at].ends_with("::") || s.code[..at].ends_with("super") {
                    continue;
                }
                let mut base = own.clone();
                let mut rest = &s.code[at..];
                let mut ups = 0;
                while let Some(r) = rest.strip_prefix(keyword) {
                    rest = r;
                    ups += up;
                }
                base.truncate(base.len().saturating_sub(ups));
                for p in crate_paths(&format!("crate::{}", path_at(rest))) {
                    targets.push(base.iter().cloned().chain(p).collect());
                }
            }
        }
        // `child::x` after `mod child;`.
        for line in s.code.lines() {
            let Some(child) = line
                .trim()
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ")
                .strip_prefix("mod ")
                .and_then(|l| l.strip_suffix(';'))
            else {
                continue;
            };
            let prefix = format!("{child}::");
            for (at, _) in s.code.match_indices(&prefix) {
                let before = s.code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                for p in crate_paths(&format!("crate::{}", path_at(&s.code[at..]))) {
                    targets.push(own.iter().cloned().chain(p).collect());
                }
            }
        }
        for t in targets {
            if let Some(f) = file_of(&t)
                && f != s.module
            {
                graph.entry(s.module.clone()).or_default().insert(f);
            }
        }
    }
    if std::env::var_os("VALKYRIE_LAYERING_EDGES").is_some() {
        for (from, to) in &graph {
            eprintln!("{from} -> {to:?}");
        }
    }
    let found = loops(&graph);
    assert!(found.is_empty(), "loops between files: {found:?}");
}

/// The strongly connected components of more than one node, each sorted.
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Reachability by search from each node: the graphs are small.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut out = BTreeSet::new();
    for (n, r) in &reached {
        let mut component: Vec<String> = r
            .iter()
            .filter(|m| reached.get(m).is_some_and(|back| back.contains(*n)))
            .cloned()
            .collect();
        if component.len() > 1 {
            component.sort();
            out.insert(component);
        }
    }
    out.into_iter().collect()
}
