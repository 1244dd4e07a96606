//! The Kubernetes label selector ([`LabelSelector`]): parsed once
//! (`parse.rs`), matched against a resource's labels, and printed back in
//! canonical form.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::error::SelectionError;
use super::parse::{self, Requirement};

/// A Kubernetes label selector, parsed once (`str::parse`): requirements
/// separated by commas, all of which must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        }
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectionError;

    /// Kubernetes' syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
    /// `k notin (a,b)`, `k`, `!k`, separated by commas (all must hold),
    /// spaces allowed between tokens. An empty selector is refused.
    fn from_str(text: &str) -> Result<LabelSelector, SelectionError> {
        parse::selector(text).map(|requirements| LabelSelector { requirements })
    }
}

/// The canonical text: `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
/// `k`, `!k`, separated by commas; it parses back to the same selector.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |vs: &BTreeSet<String>| vs.iter().cloned().collect::<Vec<_>>().join(",");
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", set(vs))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", set(vs))?,
                Requirement::Exists(k) => f.write_str(k)?,
                Requirement::NotExists(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}
