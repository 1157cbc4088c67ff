//! The one retry schedule: capped exponential backoff, with optional jitter, computed by
//! `backon`'s [`ExponentialBuilder`]. Each caller keeps its own bounds (first wait, cap,
//! factor) and asks for the wait before attempt `n`; it sleeps the way it must (a thread,
//! a task, a pause that watches for a stop).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// The steps of the schedule walked at most: a later attempt waits as this one.
pub const MAX_STEPS: u32 = 1_000;

/// A capped exponential schedule: `first`, then `first × factor^(n−1)` up to `cap`; with
/// jitter, each wait gets a random share (0 to 100%) of itself added, so that writers that
/// collided do not collide again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub first: Duration,
    /// The longest wait (before jitter).
    pub cap: Duration,
    /// What each wait is multiplied by.
    pub factor: f32,
    /// Whether to add random jitter (up to the wait again).
    pub jitter: bool,
}

impl Backoff {
    /// `first` doubling up to `cap`, without jitter.
    pub const fn doubling(first: Duration, cap: Duration) -> Self {
        Backoff {
            first,
            cap,
            factor: 2.0,
            jitter: false,
        }
    }

    /// The same schedule with jitter.
    pub const fn with_jitter(self) -> Self {
        Backoff {
            jitter: true,
            ..self
        }
    }

    /// The wait before retry `attempt` (from 1; 0 counts as 1), rounded to the
    /// microsecond (`backon` multiplies in `f32`, which leaves a few nanoseconds of noise).
    /// Attempts past [`MAX_STEPS`] wait as attempt [`MAX_STEPS`] does (the cap, for any
    /// factor worth using).
    pub fn wait(&self, attempt: u32) -> Duration {
        let mut builder = ExponentialBuilder::new()
            .with_min_delay(self.first)
            .with_max_delay(self.cap)
            .with_factor(self.factor)
            .without_max_times();
        if self.jitter {
            builder = builder.with_jitter();
        }
        let wait = builder
            .build()
            .nth(attempt.clamp(1, MAX_STEPS) as usize - 1)
            .unwrap_or(self.cap);
        let micros = wait.as_nanos().saturating_add(500) / 1000;
        Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_from_the_first_wait_up_to_the_cap() {
        let b = Backoff::doubling(Duration::from_secs(1), Duration::from_secs(30));
        let waits: Vec<u64> = (1..=8).map(|n| b.wait(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(b.wait(0), Duration::from_secs(1));
        assert_eq!(b.wait(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn waits_are_whole_microseconds_whatever_the_factor() {
        let b = Backoff::doubling(50 * MS, 1600 * MS);
        let waits: Vec<Duration> = (1..=7).map(|n| b.wait(n)).collect();
        let expected = [50, 100, 200, 400, 800, 1600, 1600].map(|ms| ms * MS);
        assert_eq!(waits, expected);
        let b = Backoff {
            factor: 1.5,
            ..Backoff::doubling(200 * MS, 800 * MS)
        };
        assert_eq!(b.wait(2), 300 * MS);
        assert_eq!(b.wait(3), 450 * MS);
        assert_eq!(b.wait(9), 800 * MS);
    }

    #[test]
    fn jitter_stays_between_the_wait_and_twice_it() {
        let b = Backoff::doubling(50 * MS, 1600 * MS).with_jitter();
        for n in 1..=10 {
            let plain = Backoff { jitter: false, ..b }.wait(n);
            for _ in 0..50 {
                let w = b.wait(n);
                assert!(
                    w >= plain && w <= plain * 2,
                    "attempt {n}: {w:?} vs {plain:?}"
                );
            }
        }
        let spread: std::collections::HashSet<Duration> = (0..50).map(|_| b.wait(3)).collect();
        assert!(spread.len() > 1, "jitter must vary: {spread:?}");
    }
}
