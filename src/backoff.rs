//! Reconnect delays: one exponential backoff with jitter, used by the
//! links to Valkey (`link/`) and by `valkyrie watch`.
//!
//! A delay starts at `min`, doubles after every failed attempt up to
//! `max`, and is jittered by ±`jitter_percent` so clients that failed
//! together do not retry in step. [`Backoff::reset`] starts again from
//! `min` after a connection that worked. The jitter comes from a small
//! xorshift generator seeded from the operating system's random source
//! (or a fixed seed in tests): jitter needs no cryptographic quality.

use std::time::Duration;

/// An exponential backoff with jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    jitter_percent: u32,
    /// The base of the next delay (before jitter).
    next: Duration,
    rng: u64,
}

impl Backoff {
    /// Delays from `min` doubling to `max`, each jittered by
    /// ±`jitter_percent` % (at most 100), with a random seed.
    pub fn new(min: Duration, max: Duration, jitter_percent: u32) -> Backoff {
        Backoff::with_seed(min, max, jitter_percent, random_seed())
    }

    /// The same, with a fixed seed (tests; reproducible jitter).
    pub fn with_seed(min: Duration, max: Duration, jitter_percent: u32, seed: u64) -> Backoff {
        let max = max.max(min);
        Backoff {
            min,
            max,
            jitter_percent: jitter_percent.min(100),
            next: min,
            rng: seed | 1,
        }
    }

    /// A connection worked: the next delay is `min` again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }

    /// Sets the base of the next delay (clamped to `min..=max`), for
    /// callers whose pace depends on more than the count of failures.
    pub fn set_next(&mut self, base: Duration) {
        self.next = base.clamp(self.min, self.max);
    }

    /// The base of the next delay, before jitter.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// The delay before the next attempt, after one failed: at most
    /// `cap` (before jitter) this time, then doubling up to `max`.
    pub fn next_capped(&mut self, cap: Duration) -> Duration {
        let base = self.next.min(cap);
        self.next = (base * 2).clamp(self.min, self.max);
        self.jitter(base)
    }

    /// The delay before the next attempt, after one failed.
    pub fn next_delay(&mut self) -> Duration {
        self.next_capped(self.max)
    }

    /// `base` ± `jitter_percent` %, uniformly.
    fn jitter(&mut self, base: Duration) -> Duration {
        let spread = base * self.jitter_percent / 100;
        let span = u64::try_from((spread * 2).as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        base - spread + Duration::from_micros(self.rand() % span)
    }

    /// xorshift64.
    fn rand(&mut self) -> u64 {
        let mut s = self.rng;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.rng = s;
        s
    }
}

/// A small random source for delays (xorshift64, seeded from the
/// operating system): the runtime's candidacy jitter.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded from the operating system.
    pub fn new() -> Rng {
        Rng(random_seed() | 1)
    }

    /// A number in `0..bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        let mut s = self.0;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.0 = s;
        s.checked_rem(bound).unwrap_or(0)
    }
}

impl Default for Rng {
    fn default() -> Rng {
        Rng::new()
    }
}

/// A seed from the operating system; should it fail, the process id,
/// which still differs between processes.
fn random_seed() -> u64 {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => u64::from(std::process::id()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_to_the_maximum_within_the_jitter() {
        let mut b = Backoff::with_seed(10 * MS, 1000 * MS, 20, 7);
        let mut bases = Vec::new();
        for _ in 0..10 {
            bases.push(b.peek());
            let d = b.next_delay();
            let base = *bases.last().unwrap_or(&MS);
            assert!(
                d >= base * 8 / 10 && d <= base * 12 / 10,
                "{d:?} vs {base:?}"
            );
        }
        assert_eq!(bases[0], 10 * MS);
        assert_eq!(bases[1], 20 * MS);
        assert_eq!(bases[6], 640 * MS);
        assert_eq!(bases[7], 1000 * MS);
        assert_eq!(bases[9], 1000 * MS);
    }

    #[test]
    fn reset_starts_again_from_the_minimum() {
        let mut b = Backoff::with_seed(250 * MS, 5000 * MS, 0, 1);
        assert_eq!(b.next_delay(), 250 * MS);
        assert_eq!(b.next_delay(), 500 * MS);
        assert_eq!(b.next_delay(), 1000 * MS);
        b.reset();
        assert_eq!(b.next_delay(), 250 * MS);
    }

    #[test]
    fn a_cap_holds_this_delay_only() {
        let mut b = Backoff::with_seed(10 * MS, 1000 * MS, 0, 1);
        b.set_next(800 * MS);
        assert_eq!(b.next_capped(100 * MS), 100 * MS);
        assert_eq!(b.peek(), 200 * MS);
        assert_eq!(b.next_delay(), 200 * MS);
    }

    #[test]
    fn jitter_varies_and_seeds_differ() {
        let mut b = Backoff::with_seed(MS * 1000, MS * 1000, 20, 3);
        let v: Vec<Duration> = (0..10).map(|_| b.next_delay()).collect();
        assert!(v.windows(2).any(|w| w[0] != w[1]), "{v:?}");
        assert_ne!(random_seed(), 0);
    }
}
