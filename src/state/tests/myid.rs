//! The daemon id's precedence: configured, then saved, then random.

#![allow(clippy::unwrap_used)]

use crate::state::myid::choose;

#[test]
fn configured_then_saved_then_random() {
    let a = "a".repeat(40);
    let b = "b".repeat(40);
    assert_eq!(choose(Some(&a), Some(&b)).unwrap(), (a.clone(), true));
    assert_eq!(choose(Some(&a), Some(&a)).unwrap(), (a.clone(), false));
    assert_eq!(choose(None, Some(&b)).unwrap(), (b.clone(), false));
    let (fresh, persist) = choose(None, None).unwrap();
    assert!(persist && crate::config::valid_myid(&fresh), "{fresh}");
    assert_ne!(choose(None, None).unwrap().0, fresh);
}
