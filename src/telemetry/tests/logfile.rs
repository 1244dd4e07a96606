//! The `logfile` writer: appends, and follows a file moved away.

use std::io::Write;
use std::time::Duration;

use tokio::time::Instant;

use crate::telemetry::LogFile;

#[test]
fn appends_and_reopens_a_file_moved_away() {
    let dir = std::env::temp_dir().join(format!("valkyrie-logfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log.txt");
    std::fs::write(&path, "before\n").unwrap();
    let log = LogFile::open(&path).unwrap();
    (&log).write_all(b"first\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\nfirst\n");
    let moved = dir.join("log.txt.1");
    std::fs::rename(&path, &moved).unwrap();
    // Within a second of the last check a line may still go to the moved
    // file; then the path is opened anew.
    let start = Instant::now();
    let mut n = 0;
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(5), "never reopened");
        n += 1;
        (&log).write_all(format!("line {n}\n").as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    // The line that found the file gone is the new file's first.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("line {n}\n")
    );
    let old = std::fs::read_to_string(&moved).unwrap();
    assert!(old.starts_with("before\nfirst\n") && !old.contains(&format!("line {n}\n")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_cannot_be_opened_is_an_error() {
    assert!(LogFile::open(std::path::Path::new("/nonexistent-dir/valkyrie/log.txt")).is_err());
}
