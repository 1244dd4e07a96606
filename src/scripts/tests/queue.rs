//! The queue's rules on a fake clock (plan §10, test 1).

use crate::core::{Channel, Event};
use crate::scripts::{
    Exit, JobId, JobState, MAX_ATTEMPTS, MAX_QUEUE, MAX_RUNNING, Outcome, Queue, SPAWN_RETRY,
    ScriptTimers, SpawnError,
};

pub(super) const SENTINEL: ScriptTimers = ScriptTimers {
    max_runtime: 60_000,
    retry_delay: 30_000,
};

pub(super) fn argv(n: usize) -> Vec<String> {
    vec![
        format!("/s/{n}"),
        "+sdown".into(),
        "master g 10.0.0.1 6379".into(),
    ]
}

/// Starts every due job at `now`, giving job `n` pid `1000 + n`.
fn start_due(q: &mut Queue, now: u64) -> Vec<JobId> {
    let mut started = Vec::new();
    while let Some((id, _)) = q.next_due(now) {
        q.started(id, 1000 + id.0 as u32, now);
        started.push(id);
    }
    started
}

fn error(payload: &str) -> Event {
    Event::new(Channel::ScriptError, payload.into())
}

#[test]
fn the_257th_job_evicts_the_oldest_not_running() {
    let mut q = Queue::new(SENTINEL);
    for n in 0..20 {
        assert_eq!(q.push(argv(n)), None);
    }
    assert_eq!(start_due(&mut q, 0).len(), MAX_RUNNING);
    for n in 20..MAX_QUEUE {
        assert_eq!(q.push(argv(n)), None);
    }
    assert_eq!(q.len(), MAX_QUEUE);
    // Jobs 0-15 run: job 16 is the oldest one waiting.
    let evicted = q.push(argv(MAX_QUEUE)).expect("one evicted");
    assert_eq!(evicted.argv, argv(16));
    assert!(!evicted.running());
    assert_eq!(q.len(), MAX_QUEUE);
    assert_eq!(q.running(), MAX_RUNNING);
    let evicted = q.push(argv(MAX_QUEUE + 1)).expect("one evicted");
    assert_eq!(evicted.argv, argv(17));
    // The running ones all stay, and the newest is last.
    let kept: Vec<_> = q.jobs().map(|j| j.argv[0].clone()).collect();
    assert_eq!(
        kept[..16],
        (0..16).map(|n| format!("/s/{n}")).collect::<Vec<_>>()[..]
    );
    assert_eq!(kept[16], "/s/18");
    assert_eq!(kept.last().map(String::as_str), Some("/s/257"));
}

#[test]
fn a_full_queue_of_waiting_jobs_evicts_the_first() {
    let mut q = Queue::new(SENTINEL);
    for n in 0..MAX_QUEUE {
        assert_eq!(q.push(argv(n)), None);
    }
    assert_eq!(q.push(argv(MAX_QUEUE)).map(|j| j.argv), Some(argv(0)));
}

#[test]
fn the_17th_job_waits_for_a_free_slot() {
    let mut q = Queue::new(SENTINEL);
    for n in 0..17 {
        q.push(argv(n));
    }
    let started = start_due(&mut q, 5);
    assert_eq!(started.len(), 16);
    assert_eq!(q.running(), 16);
    assert_eq!(q.next_due(5), None);
    // Only timeouts are due while every slot is taken.
    assert_eq!(q.next_wakeup(), Some(5 + 60_000 + 1));
    assert_eq!(q.exited(started[3], Exit::Code(0), 7), Some(Outcome::Ok));
    let (id, next) = q.next_due(7).expect("a free slot");
    assert_eq!(next, argv(16));
    q.started(id, 42, 7);
    assert_eq!(q.running(), 16);
    assert_eq!(q.len(), 16);
}

#[test]
fn exit_1_retries_with_doubling_delays_and_the_10th_attempt_is_final() {
    let mut q = Queue::new(SENTINEL);
    q.push(argv(0));
    let mut now = 0;
    let mut delays = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let (id, _) = q.next_due(now).expect("due");
        q.started(id, 7, now);
        assert_eq!(q.jobs().next().map(|j| j.attempts), Some(attempt));
        now += 5;
        match q.exited(id, Exit::Code(1), now) {
            Some(Outcome::Retried { delay }) => {
                assert!(attempt < MAX_ATTEMPTS);
                delays.push(delay);
                assert_eq!(q.next_wakeup(), Some(now + delay));
                assert_eq!(q.next_due(now + delay - 1), None);
                now += delay;
            }
            Some(Outcome::Failed(e)) => {
                assert_eq!(attempt, MAX_ATTEMPTS);
                assert_eq!(e, error("/s/0 0 1"));
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    let minutes: Vec<u64> = delays.iter().map(|d| d / 1000).collect();
    assert_eq!(minutes, [30, 60, 120, 240, 480, 960, 1920, 3840, 7680]);
    assert_eq!(delays.last(), Some(&(128 * 60_000)));
    assert!(q.is_empty());
}

#[test]
fn exits_and_signals() {
    let mut q = Queue::new(SENTINEL);
    let run = |q: &mut Queue, exit: Exit| {
        q.push(argv(0));
        let (id, _) = q.next_due(0).expect("due");
        q.started(id, 7, 0);
        (id, q.exited(id, exit, 10))
    };
    assert_eq!(run(&mut q, Exit::Code(0)).1, Some(Outcome::Ok));
    assert!(q.is_empty());
    assert_eq!(
        run(&mut q, Exit::Code(2)).1,
        Some(Outcome::Failed(error("/s/0 0 2")))
    );
    assert!(q.is_empty());
    assert_eq!(
        run(&mut q, Exit::Code(255)).1,
        Some(Outcome::Failed(error("/s/0 0 255")))
    );
    let (id, outcome) = run(&mut q, Exit::Signal(9));
    assert_eq!(outcome, Some(Outcome::Retried { delay: 30_000 }));
    assert_eq!(
        q.jobs().next().map(|j| j.state),
        Some(JobState::Waiting { not_before: 30_010 })
    );
    // A waiting job has no exit.
    assert_eq!(q.exited(id, Exit::Code(0), 20), None);
    // A signal on the last attempt is given up: `<path> <signal> 0`.
    for _ in 1..MAX_ATTEMPTS - 1 {
        let (id, _) = q.next_due(u64::MAX / 2).expect("due");
        q.started(id, 7, 0);
        assert!(matches!(
            q.exited(id, Exit::Signal(15), 0),
            Some(Outcome::Retried { .. })
        ));
    }
    let (id, _) = q.next_due(u64::MAX / 2).expect("due");
    q.started(id, 7, 0);
    assert_eq!(
        q.exited(id, Exit::Signal(15), 0),
        Some(Outcome::Failed(error("/s/0 15 0")))
    );
    assert!(q.is_empty());
    assert_eq!(q.exited(id, Exit::Code(0), 0), None);
}

#[test]
fn spawn_errors() {
    let mut q = Queue::new(SENTINEL);
    q.push(argv(0));
    let (id, _) = q.next_due(50).expect("due");
    assert_eq!(
        q.spawn_failed(id, SpawnError::Resources, 50),
        Some(Outcome::SpawnRetried(error("/s/0 99 0")))
    );
    // No attempt counted; another try 100 ms later.
    let job = q.jobs().next().expect("kept");
    assert_eq!(job.attempts, 0);
    assert_eq!(
        job.state,
        JobState::Waiting {
            not_before: 50 + SPAWN_RETRY
        }
    );
    assert_eq!(q.next_due(149), None);
    let (id, _) = q.next_due(150).expect("due again");
    assert_eq!(
        q.spawn_failed(id, SpawnError::Other, 150),
        Some(Outcome::SpawnFailed(error("/s/0 0 2")))
    );
    assert!(q.is_empty());
    assert_eq!(q.spawn_failed(id, SpawnError::Other, 150), None);
}

#[test]
fn the_largest_retry_delay_saturates() {
    let mut q = Queue::new(ScriptTimers {
        max_runtime: i64::MAX as u64,
        retry_delay: i64::MAX as u64,
    });
    q.push(argv(0));
    let (id, _) = q.next_due(1000).expect("due");
    q.started(id, 7, 1000);
    // `started + max_runtime` does not overflow.
    assert_eq!(q.next_wakeup(), Some(1000 + i64::MAX as u64 + 1));
    assert!(q.overdue(i64::MAX as u64).is_empty());
    let delay = i64::MAX as u64;
    assert_eq!(
        q.exited(id, Exit::Code(1), 2000),
        Some(Outcome::Retried { delay })
    );
    assert_eq!(q.next_wakeup(), Some(2000 + delay));
    let (id, _) = q.next_due(u64::MAX).expect("due at the end of time");
    q.started(id, 7, 3000);
    assert_eq!(
        q.exited(id, Exit::Code(1), 4000),
        Some(Outcome::Retried {
            delay: u64::MAX - 1
        })
    );
    // Due past the end of time: no wake-up at all.
    assert_eq!(q.next_wakeup(), None);
    assert_eq!(q.snapshot(4000)[0].millis, u64::MAX - 4000);
    assert_eq!(crate::scripts::queue::retry_delay(u64::MAX, 10), u64::MAX);
    assert_eq!(crate::scripts::queue::retry_delay(30_000, 1), 30_000);
}

#[test]
fn a_run_past_max_runtime_is_reported_once_then_retried_as_a_signal() {
    let mut q = Queue::new(ScriptTimers {
        max_runtime: 300,
        retry_delay: 10,
    });
    q.push(argv(0));
    let (id, _) = q.next_due(0).expect("due");
    q.started(id, 4242, 0);
    assert_eq!(q.next_wakeup(), Some(301));
    assert!(q.overdue(300).is_empty(), "strictly longer");
    // A longer limit applies to running jobs too.
    q.set_timers(ScriptTimers {
        max_runtime: 500,
        retry_delay: 10,
    });
    assert!(q.overdue(301).is_empty());
    assert_eq!(q.next_wakeup(), Some(501));
    let overdue = q.overdue(501);
    assert_eq!(
        overdue,
        [(id, Event::new(Channel::ScriptTimeout, "/s/0 4242".into()))]
    );
    assert!(q.overdue(900).is_empty(), "reported once");
    assert_eq!(q.next_wakeup(), None);
    assert_eq!(
        q.exited(id, Exit::Signal(9), 510),
        Some(Outcome::Retried { delay: 10 })
    );
}
