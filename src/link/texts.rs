//! The last INFO text each instance answered, for `SENTINEL INFO-CACHE`:
//! written by the links, read by the Sentinel port. One text per watched
//! instance (its answer to `INFO server replication keyspace`, what the
//! link asks), replaced at each answer and dropped with the link, so the
//! memory is bounded by what is monitored.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::core::Addr;

/// An instance's last text and when it came.
type Text = (Instant, Arc<str>);

/// The texts, by group and instance; clones share them.
#[derive(Clone, Debug, Default)]
pub struct InfoTexts(Arc<RwLock<HashMap<(String, Addr), Text>>>);

impl InfoTexts {
    /// `addr` of `group` answered `text` now.
    pub fn put(&self, group: &str, addr: &Addr, text: &str) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        map.insert(
            (group.to_string(), addr.clone()),
            (Instant::now(), text.into()),
        );
    }

    /// The last text of `addr` in `group`, and how long ago it came.
    pub fn get(&self, group: &str, addr: &Addr) -> Option<(Duration, Arc<str>)> {
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        map.get(&(group.to_string(), addr.clone()))
            .map(|(at, text)| (at.elapsed(), text.clone()))
    }

    /// `addr` is no longer watched in `group`.
    pub fn forget(&self, group: &str, addr: &Addr) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        map.remove(&(group.to_string(), addr.clone()));
    }

    /// `group` is gone.
    pub fn forget_group(&self, group: &str) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        map.retain(|(g, _), _| g != group);
    }
}
