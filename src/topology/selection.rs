//! Which groups an operator means ([`Selection`]): names, globs of names
//! and a Kubernetes label selector ([`LabelSelector`]) over the labels of
//! the `ValkeyCluster` resources that own groups, resolved against the
//! advertised [`Topology`] into group names (`VALKYRIE PAUSE SELECTOR`).
//!
//! The selector is parsed here by hand because kube-core's `Selector` has
//! no string parser and sits behind the optional `kubernetes` feature,
//! while this must build with `--no-default-features` too.
//!
//! Everything is bounded, whatever a client sends: the selector's text
//! ([`MAX_SELECTOR_BYTES`]), its requirements ([`MAX_REQUIREMENTS`]),
//! keys and values (Kubernetes' own limits), and the lists of names and
//! globs ([`MAX_NAMES`], [`MAX_GLOBS`], [`MAX_GLOB_BYTES`]).
//!
//! - `selection/selector.rs`: the [`LabelSelector`], matched and printed;
//! - `selection/parse.rs`: its syntax and Kubernetes' key and value rules;
//! - `selection/error.rs`: the bounds and the [`SelectionError`]s.

use std::collections::BTreeSet;
use std::fmt;

use valkyrie_protocol::glob;

use super::views::Topology;

mod error;
mod parse;
mod selector;

pub use error::{
    MAX_GLOB_BYTES, MAX_GLOBS, MAX_NAMES, MAX_REQUIREMENTS, MAX_SELECTOR_BYTES, SelectionError,
};
pub use selector::LabelSelector;

use error::shown;

/// Which groups an operator means: names, globs and/or a label selector;
/// the union of all given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Group names, each of which must be a group.
    pub names: Vec<String>,
    /// Globs of group names (Valkey's, as `SENTINEL RESET` takes them).
    pub globs: Vec<String>,
    /// The groups of the resources whose labels match.
    pub selector: Option<LabelSelector>,
}

impl Selection {
    /// The groups of `topology` this selection means: sorted, each once.
    /// A name that is not a group is an error naming it, and so is a
    /// selection that matches nothing. A selector matches only the groups
    /// resources own (those of the configuration have no labels).
    pub fn resolve(&self, topology: &Topology) -> Result<Vec<String>, SelectionError> {
        if self.names.len() > MAX_NAMES {
            return Err(SelectionError::TooMany {
                what: "names",
                max: MAX_NAMES,
            });
        }
        if self.globs.len() > MAX_GLOBS {
            return Err(SelectionError::TooMany {
                what: "globs",
                max: MAX_GLOBS,
            });
        }
        if self.globs.iter().any(|g| g.len() > MAX_GLOB_BYTES) {
            return Err(SelectionError::TooMany {
                what: "bytes in a glob",
                max: MAX_GLOB_BYTES,
            });
        }
        let mut out = BTreeSet::new();
        for name in &self.names {
            if !topology.groups.contains_key(name) {
                return Err(SelectionError::NoSuchGroup(shown(name)));
            }
            out.insert(name.clone());
        }
        for (name, view) in &topology.groups {
            let globbed = || {
                self.globs
                    .iter()
                    .any(|g| glob::matches(g.as_bytes(), name.as_bytes()))
            };
            let labelled = || {
                self.selector
                    .as_ref()
                    .is_some_and(|s| view.managed && s.matches(&view.labels))
            };
            if !out.contains(name) && (globbed() || labelled()) {
                out.insert(name.clone());
            }
        }
        if out.is_empty() {
            return Err(SelectionError::NothingMatched(self.to_string()));
        }
        Ok(out.into_iter().collect())
    }
}

/// What the selection asks for, shortened, for an error.
impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |items: &[String]| {
            let mut shown: Vec<String> = items.iter().take(3).map(|s| shown(s)).collect();
            if items.len() > 3 {
                shown.push(format!("and {} more", items.len() - 3));
            }
            shown.join(", ")
        };
        let mut parts = Vec::new();
        if !self.names.is_empty() {
            parts.push(format!("the names {}", list(&self.names)));
        }
        if !self.globs.is_empty() {
            parts.push(format!("the globs {}", list(&self.globs)));
        }
        if let Some(s) = &self.selector {
            parts.push(format!("the label selector {}", shown(&s.to_string())));
        }
        if parts.is_empty() {
            return f.write_str("an empty selection");
        }
        f.write_str(&parts.join(" or "))
    }
}
