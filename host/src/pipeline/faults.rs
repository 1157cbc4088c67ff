//! Transient faults: a broker that does not answer, an acknowledgement that times out, a
//! busy catalog, a full disk, a lookup table whose source cannot be read. Each is retried in the process, with capped exponential
//! backoff and the cause logged, by abandoning the batch and resuming from the table as a
//! restart would (so nothing is lost or doubled: the batch is replayed, exactly, from its
//! plan if it had one). A fault that persists past `[pipeline] fault-budget` (time since
//! the first fault with no batch committed since) ends the run with its error, for a
//! supervisor to act on. Configuration and data errors are never retried.

use std::time::{Duration, Instant};

use super::PipelineError;
use crate::sink::OutputError;
use crate::sink::iceberg::SinkError;
use crate::source::SourceError;

/// The first wait after a fault; each next one doubles.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl PipelineError {
    /// Whether retrying later may succeed: the broker, the catalog or storage failed,
    /// not the data or the configuration.
    pub fn is_transient(&self) -> bool {
        match self {
            PipelineError::Source(e) => matches!(
                e,
                SourceError::Request { .. } | SourceError::Stalled { .. } | SourceError::Kafka(_)
            ),
            PipelineError::Sink(e) => sink_transient(e),
            PipelineError::Output(OutputError::Topic { .. }) => true,
            PipelineError::Output(OutputError::Table { error, .. }) => sink_transient(error),
            PipelineError::Lookup(e) => e.is_transient(),
            PipelineError::StateFile(e) => {
                matches!(e, crate::event_time::state::StateError::Store(_))
            }
            _ => false,
        }
    }
}

fn sink_transient(error: &SinkError) -> bool {
    matches!(
        error,
        SinkError::Iceberg { .. } | SinkError::NotCommitted { .. }
    )
}

/// The faults of one run: when the current streak began, and how many attempts it made.
#[derive(Debug)]
pub struct Faults {
    budget: Duration,
    /// When the streak began, its attempts, and the waits planned so far.
    streak: Option<(Instant, u32, Duration)>,
}

impl Faults {
    /// Retries for up to `budget` after the first fault of a streak.
    pub fn new(budget: Duration) -> Self {
        Faults {
            budget,
            streak: None,
        }
    }

    /// A batch committed: the next fault starts a new streak.
    pub fn progressed(&mut self) {
        self.streak = None;
    }

    /// After `error`: how long to wait before the next attempt, or the error back if it is
    /// not transient or the budget is spent.
    pub fn after(&mut self, error: PipelineError) -> Result<Duration, PipelineError> {
        if !error.is_transient() {
            return Err(error);
        }
        let (since, attempts, waited) =
            self.streak
                .get_or_insert((Instant::now(), 0, Duration::ZERO));
        *attempts += 1;
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << (*attempts - 1).min(16))
            .min(MAX_BACKOFF);
        if since.elapsed().max(*waited) + wait > self.budget {
            tracing::error!(%error, attempts = *attempts, budget = ?self.budget, "a transient fault persisted past the fault budget: giving up");
            return Err(error);
        }
        *waited += wait;
        tracing::warn!(%error, attempt = *attempts, retry_in = ?wait, "transient fault: the batch is abandoned; resuming from the table after a pause");
        Ok(wait)
    }
}

/// Waits `wait`, unless `stop` is raised meanwhile: returns whether the wait ran out.
pub fn pause(wait: Duration, stop: &std::sync::atomic::AtomicBool) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(
            Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())),
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stalled() -> PipelineError {
        PipelineError::Source(SourceError::Stalled {
            partitions: "t/0".into(),
            seconds: 60,
        })
    }

    #[test]
    fn waits_double_up_to_the_cap_and_the_budget_ends_them() {
        let mut faults = Faults::new(Duration::from_secs(3600));
        let waits: Vec<u64> = (0..7)
            .map(|_| faults.after(stalled()).unwrap().as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        faults.progressed();
        assert_eq!(faults.after(stalled()).unwrap(), FIRST_BACKOFF);

        let mut none = Faults::new(Duration::ZERO);
        assert!(
            none.after(stalled()).is_err(),
            "a zero budget retries nothing"
        );
        let mut short = Faults::new(Duration::from_secs(5));
        assert!(short.after(stalled()).is_ok()); // 1 s
        assert!(short.after(stalled()).is_ok()); // 2 s more: 3 s
        assert!(short.after(stalled()).is_err(), "4 s more would pass 5 s");
    }

    #[test]
    fn data_and_configuration_errors_are_not_retried() {
        let mut faults = Faults::new(Duration::from_secs(3600));
        let loss = PipelineError::Source(SourceError::DataLoss {
            partition: "t/0".into(),
            next: 1,
            earliest: 5,
            lost: 4,
        });
        assert!(faults.after(loss).is_err());
        assert!(faults.after(PipelineError::State("x".into())).is_err());
        assert!(stalled().is_transient());
    }
}
