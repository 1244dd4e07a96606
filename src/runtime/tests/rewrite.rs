//! A state the file already holds is not written again: each write is two
//! fsyncs, and a switchover persists the same state twice on the path of
//! its write stall.

use std::os::unix::fs::MetadataExt;

use tokio::sync::watch;

use super::super::persistence::Persistence;
use super::state;
use crate::core::State;
use crate::state::StateFile;

#[tokio::test]
async fn an_unchanged_state_is_not_written_again_a_changed_one_or_epoch_is() {
    let dir = std::env::temp_dir().join(format!("valkyrie-rewrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = StateFile::in_dir(&dir);
    let mut p = Persistence {
        file: file.clone(),
        runtime_config: None,
        state: State::default(),
        unsaved: Default::default(),
        dirty: false,
        health: watch::channel(Default::default()).0,
    };
    // Every write renames a new file into place: a new inode.
    let inode = || std::fs::metadata(file.path()).expect("state file").ino();
    p.persist("g".into(), state(6379, 1), 1).await;
    let first = inode();
    p.persist("g".into(), state(6379, 1), 1).await;
    assert_eq!(inode(), first, "the same state was written again");
    p.persist("g".into(), state(6380, 1), 1).await;
    let second = inode();
    assert_ne!(second, first, "a new master was not written");
    p.persist("g".into(), state(6380, 1), 2).await;
    assert_ne!(inode(), second, "a new current epoch was not written");
    // After a failed write, the next persist writes even the same state.
    p.dirty = true;
    let third = inode();
    p.persist("g".into(), state(6380, 1), 2).await;
    assert_ne!(
        inode(),
        third,
        "a state waiting to be rewritten was skipped"
    );
    assert!(!p.dirty);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
