//! `SENTINEL PENDING-SCRIPTS`'s entries, from the queue on a fake clock.

use super::queue::{SENTINEL, argv};
use crate::scripts::{Exit, Field, Queue};

#[test]
fn snapshot_in_queue_order_with_sentinels_fields() {
    let mut q = Queue::new(SENTINEL);
    q.push(argv(0));
    q.push(argv(1));
    let (first, _) = q.next_due(0).expect("due");
    q.started(first, 100, 0);
    let (second, _) = q.next_due(0).expect("due");
    q.started(second, 101, 0);
    q.exited(second, Exit::Code(1), 1_000);
    q.push(argv(2));
    assert_eq!((q.running(), q.len()), (1, 3));
    let now = 1_500;
    let s = q.snapshot(now);
    let rows: Vec<_> = s
        .iter()
        .map(|p| (p.argv[0].as_str(), p.running, p.pid, p.millis, p.retry_num))
        .collect();
    assert_eq!(
        rows,
        [
            ("/s/0", true, 100, 1_500, 1),
            ("/s/1", false, 0, 30_000 - 500, 1),
            ("/s/2", false, 0, 0, 0),
        ]
    );
    let text = |f: &Field<'_>| match f {
        Field::Strings(a) => a.join("|"),
        Field::Text(t) => t.clone(),
    };
    let fields: Vec<Vec<(&str, String)>> = s
        .iter()
        .map(|p| p.fields().iter().map(|(k, v)| (*k, text(v))).collect())
        .collect();
    assert_eq!(
        fields[0],
        [
            ("argv", "/s/0|+sdown|master g 10.0.0.1 6379".to_string()),
            ("flags", "running".into()),
            ("pid", "100".into()),
            ("run-time", "1500".into()),
            ("retry-num", "1".into()),
        ]
    );
    assert_eq!(
        fields[1][1..],
        [
            ("flags", "scheduled".to_string()),
            ("pid", "0".into()),
            ("run-delay", "29500".into()),
            ("retry-num", "1".into()),
        ]
    );
    // Past its due time a job's delay is 0, not negative.
    assert_eq!(q.snapshot(40_000)[1].millis, 0);
}
