//! Transient faults: a broker that does not answer, an acknowledgement that times out, a
//! busy catalog, a full disk, a lookup table whose source cannot be read. Each is retried in the process, with capped exponential
//! backoff and the cause logged, by abandoning the batch and resuming from the table as a
//! restart would (so nothing is lost or doubled: the batch is replayed, exactly, from its
//! plan if it had one). A fault that persists past `[pipeline] fault-budget` (time since
//! the first fault with no batch committed since) ends the run with its error, for a
//! supervisor to act on. Configuration and data errors are never retried.

use std::time::{Duration, Instant};

use super::PipelineError;
use crate::iceberg::IcebergError;
use crate::retry::Backoff;
use crate::sink::OutputError;
use crate::source::SourceError;

/// The first wait after a fault; each next one doubles.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The waits after faults: [`FIRST_BACKOFF`] doubling up to [`MAX_BACKOFF`].
const BACKOFF: Backoff = Backoff::doubling(FIRST_BACKOFF, MAX_BACKOFF);

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
            PipelineError::Registry(e) => e.is_transient(),
            PipelineError::StateFile(e) => {
                matches!(e, crate::event_time::state::StateError::Store(_))
            }
            _ => false,
        }
    }
}

fn sink_transient(error: &IcebergError) -> bool {
    matches!(
        error,
        IcebergError::Iceberg { .. }
            | IcebergError::NotCommitted { .. }
            | IcebergError::NoAnswer { .. }
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
        let wait = BACKOFF.wait(*attempts);
        if since.elapsed().max(*waited) + wait > self.budget {
            tracing::error!(%error, attempts = *attempts, budget = ?self.budget, "a transient fault persisted past the fault budget: giving up");
            return Err(error);
        }
        *waited += wait;
        tracing::warn!(%error, attempt = *attempts, retry_in = ?wait, "transient fault: the batch is abandoned; resuming from the table after a pause");
        Ok(wait)
    }
}

/// How often a pause looks at the brokers ([`Brokers::back`]).
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The source's brokers, looked at during the pauses after faults: a broker that went away
/// (no server of the bootstrap list accepted a connection) and accepts connections again
/// ends the pause, so that the pipeline resumes within a second of its return instead of
/// after a backoff of up to [`MAX_BACKOFF`]. Each return ends one pause: a fault that
/// persists while the brokers are up is still retried with the full backoff.
#[derive(Debug)]
pub struct Brokers {
    /// The bootstrap servers, `host:port[,host:port...]`.
    bootstrap: String,
    /// Whether they were seen away since the last return.
    away: bool,
    looked: Option<Instant>,
}

impl Brokers {
    /// The brokers of `bootstrap` (`host:port[,host:port...]`).
    pub fn new(bootstrap: &str) -> Self {
        Brokers {
            bootstrap: bootstrap.to_string(),
            away: false,
            looked: None,
        }
    }

    /// Whether the brokers came back since they were seen away (looked at every
    /// [`LOOK_EVERY`] at most).
    pub fn back(&mut self) -> bool {
        if self.looked.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
            return false;
        }
        self.looked = Some(Instant::now());
        if !listening(&self.bootstrap, LOOK_EVERY) {
            self.away = true;
            return false;
        }
        std::mem::take(&mut self.away)
    }
}

/// Whether a server of `bootstrap` accepts a TCP connection within `timeout`.
fn listening(bootstrap: &str, timeout: Duration) -> bool {
    use std::net::{TcpStream, ToSocketAddrs};
    let servers = bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty());
    servers
        .flat_map(|server| server.to_socket_addrs().into_iter().flatten())
        .any(|address| TcpStream::connect_timeout(&address, timeout).is_ok())
}

/// Waits `wait`, unless `stop` is raised meanwhile or `brokers` came back: returns whether
/// to go on (not stopped). `beat` is called as the wait goes on (the loop is alive).
pub fn pause(
    wait: Duration,
    stop: &std::sync::atomic::AtomicBool,
    brokers: &mut Brokers,
    beat: &dyn Fn(),
) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        beat();
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        if brokers.back() {
            tracing::info!("the brokers accept connections again: resuming now");
            return true;
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
    fn a_broker_that_comes_back_ends_one_pause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut brokers = Brokers::new(&address);
        let started = Instant::now();
        assert!(pause(
            Duration::from_millis(300),
            &stop,
            &mut brokers,
            &|| {}
        ));
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "never away: the whole wait"
        );
        drop(listener);
        brokers.looked = None;
        assert!(!brokers.back(), "away");
        let listener = std::net::TcpListener::bind(&address).unwrap();
        brokers.looked = None;
        let started = Instant::now();
        assert!(pause(Duration::from_secs(30), &stop, &mut brokers, &|| {}));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "back: the pause ends"
        );
        let started = Instant::now();
        assert!(pause(
            Duration::from_millis(600),
            &stop,
            &mut brokers,
            &|| {}
        ));
        assert!(
            started.elapsed() >= Duration::from_millis(600),
            "one return, one pause"
        );
        drop(listener);
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
