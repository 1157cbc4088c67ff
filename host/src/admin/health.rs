//! Liveness and readiness, as an orchestrator reads them.
//!
//! - `GET /healthz` (liveness) answers 200 while the pipeline's loop makes progress: a batch,
//!   a wait between triggers, a pause after a fault, a standby's wait all count. It answers
//!   503 once the loop has shown nothing for `[admin] stuck-after` (a call that never
//!   returns): restarting the process is the remedy then.
//! - `GET /readyz` (readiness) answers 200 while the pipeline runs with its brokers
//!   answering, or stands by ready to take over; 503 with the reason while it starts, while
//!   a broker, the catalog or storage fails and the batch is retried, and while it reloads
//!   its positions after a fenced batch. A process that is not ready is still alive: it
//!   waits for the fault to pass (within `[pipeline] fault-budget`).
//!
//! The pipeline reports through [`Health`]; the routes only read it. `/status` shows the
//! last [`CHANGES_KEPT`] changes of readiness too, so that one too brief for a probe to
//! catch (reloading positions after a fence) is still seen.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Serialize, Serializer};

use crate::progress::Role;

/// How many changes of readiness [`Health`] keeps.
pub const CHANGES_KEPT: usize = 20;

/// What the pipeline's loop is doing, for readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "reason")]
pub enum Readiness {
    /// Opened, and not yet through a trigger's first look at the brokers.
    Starting,
    /// Reading and committing: the brokers answered the last look.
    Running,
    /// Retrying after a fault, or reloading after a fenced batch: why.
    Waiting(String),
}

/// A change of readiness, and when it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadinessChange {
    /// Wall-clock time of the change; serialised as RFC 3339 in UTC.
    #[serde(serialize_with = "rfc3339")]
    pub at: DateTime<Utc>,
    /// The readiness it changed to.
    #[serde(flatten)]
    pub readiness: Readiness,
}

fn rfc3339<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The pipeline's liveness and readiness, shared by the loop (which reports) and the admin
/// API (which answers probes).
#[derive(Debug)]
pub struct Health {
    origin: Instant,
    /// Milliseconds from `origin` to the loop's last sign of progress.
    beat: AtomicU64,
    stuck_after: Duration,
    /// The last changes of readiness, oldest first: the last is the readiness now (none
    /// yet: [`Readiness::Starting`]).
    changes: Mutex<VecDeque<ReadinessChange>>,
}

impl Health {
    /// Health that calls the loop stuck after `stuck_after` without progress.
    pub fn new(stuck_after: Duration) -> Self {
        Health {
            origin: Instant::now(),
            beat: AtomicU64::new(0),
            stuck_after,
            changes: Mutex::new(VecDeque::new()),
        }
    }

    /// How long the loop may show nothing before it is called stuck.
    pub fn stuck_after(&self) -> Duration {
        self.stuck_after
    }

    /// The loop made progress.
    pub fn beat(&self) {
        let now = self.origin.elapsed().as_millis() as u64;
        self.beat.store(now, Ordering::Relaxed);
    }

    /// The loop made progress and is now doing what `readiness` says.
    pub fn set(&self, readiness: Readiness) {
        self.beat();
        let mut changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let current = changes
            .back()
            .map_or(&Readiness::Starting, |c| &c.readiness);
        if *current == readiness {
            return;
        }
        tracing::debug!(?readiness, "readiness changed");
        if changes.len() == CHANGES_KEPT {
            changes.pop_front();
        }
        let at = Utc::now();
        changes.push_back(ReadinessChange { at, readiness });
    }

    /// The last changes of readiness, oldest first.
    pub fn changes(&self) -> Vec<ReadinessChange> {
        let changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        changes.iter().cloned().collect()
    }

    /// What the loop is doing.
    pub fn readiness(&self) -> Readiness {
        let changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        changes
            .back()
            .map_or(Readiness::Starting, |c| c.readiness.clone())
    }

    /// `Ok` while the loop showed progress within the bound, else why not.
    pub fn live(&self) -> Result<(), String> {
        let last = Duration::from_millis(self.beat.load(Ordering::Relaxed));
        let quiet = self.origin.elapsed().saturating_sub(last);
        if quiet <= self.stuck_after {
            return Ok(());
        }
        Err(format!(
            "stuck: the pipeline's loop has shown no progress for {}s ([admin] stuck-after = {}s)",
            quiet.as_secs(),
            self.stuck_after.as_secs()
        ))
    }

    /// `Ok` with what it does while ready to serve as `role`, else why not.
    pub fn ready(&self, role: Role) -> Result<&'static str, String> {
        if role == Role::Standby {
            return Ok("standby: ready to take over");
        }
        match self.readiness() {
            Readiness::Running => Ok("ready"),
            Readiness::Starting => Err("starting".to_string()),
            Readiness::Waiting(reason) => Err(reason),
        }
    }
}

/// The later stages of a pipeline that crosses repartition topics (each a pipeline of its
/// own, on a thread of the same process), by name: the admin API of stage one answers for
/// them too.
pub type Stages = Vec<(String, std::sync::Arc<Health>)>;

/// Liveness of a pipeline and of its later `stages`: the first stuck one says why.
pub fn live_all(main: &Health, stages: &Stages) -> Result<(), String> {
    main.live()?;
    for (name, health) in stages {
        health
            .live()
            .map_err(|why| format!("stage `{name}`: {why}"))?;
    }
    Ok(())
}

/// Readiness of a pipeline serving as `role` and of its later `stages` (members of groups
/// of their own): what the pipeline does, or why it or the first stage not ready is not.
pub fn ready_all(main: &Health, role: Role, stages: &Stages) -> Result<&'static str, String> {
    let what = main.ready(role)?;
    if role == Role::Standby {
        return Ok(what);
    }
    for (name, health) in stages {
        health
            .ready(Role::Member)
            .map_err(|why| format!("stage `{name}`: {why}"))?;
    }
    Ok(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_stage_not_ready_or_stuck_makes_the_process_so() {
        let main = Health::new(Duration::from_secs(60));
        main.set(Readiness::Running);
        let later = std::sync::Arc::new(Health::new(Duration::from_millis(150)));
        let stages: Stages = vec![("p-w".into(), later.clone())];
        assert_eq!(
            ready_all(&main, Role::Member, &stages),
            Err("stage `p-w`: starting".to_string())
        );
        later.set(Readiness::Running);
        assert_eq!(ready_all(&main, Role::Member, &stages), Ok("ready"));
        later.set(Readiness::Waiting("broker down".into()));
        assert_eq!(
            ready_all(&main, Role::Member, &stages),
            Err("stage `p-w`: broker down".to_string())
        );
        assert!(live_all(&main, &stages).is_ok());
        std::thread::sleep(Duration::from_millis(250));
        main.beat();
        let stuck = live_all(&main, &stages).unwrap_err();
        assert!(stuck.starts_with("stage `p-w`: stuck"), "{stuck}");
        assert!(live_all(&main, &Stages::new()).is_ok());
    }

    #[test]
    fn liveness_fails_once_the_loop_is_quiet_past_the_bound() {
        let health = Health::new(Duration::from_millis(150));
        assert!(health.live().is_ok(), "a new process is live");
        std::thread::sleep(Duration::from_millis(250));
        let stuck = health.live().unwrap_err();
        assert!(stuck.contains("no progress"), "{stuck}");
        health.beat();
        assert!(health.live().is_ok(), "a beat makes it live again");
    }

    #[test]
    fn readiness_follows_the_loop_and_a_standby_is_ready() {
        let health = Health::new(Duration::from_secs(60));
        assert_eq!(health.ready(Role::Single), Err("starting".to_string()));
        assert_eq!(
            health.ready(Role::Standby),
            Ok("standby: ready to take over")
        );
        health.set(Readiness::Running);
        assert_eq!(health.ready(Role::Member), Ok("ready"));
        health.set(Readiness::Waiting("broker down".into()));
        assert_eq!(health.ready(Role::Single), Err("broker down".to_string()));
        assert_eq!(health.ready(Role::Active), Err("broker down".to_string()));
    }

    #[test]
    fn the_last_changes_of_readiness_are_kept() {
        let health = Health::new(Duration::from_secs(60));
        health.set(Readiness::Running);
        health.set(Readiness::Running);
        health.set(Readiness::Waiting("fenced".into()));
        health.set(Readiness::Running);
        let states: Vec<_> = health.changes().into_iter().map(|c| c.readiness).collect();
        let fenced = Readiness::Waiting("fenced".into());
        let want = [Readiness::Running, fenced, Readiness::Running];
        assert_eq!(states, want, "only changes, in order");
        for i in 0..CHANGES_KEPT {
            health.set(Readiness::Waiting(format!("fault {i}")));
        }
        let changes = health.changes();
        assert_eq!(changes.len(), CHANGES_KEPT);
        let first = Readiness::Waiting("fault 0".into());
        assert_eq!(changes[0].readiness, first, "the oldest dropped");
        let json = serde_json::to_value(&changes[0]).unwrap();
        assert_eq!(json["state"], "waiting");
        assert_eq!(json["reason"], "fault 0");
        assert!(json["at"].as_str().unwrap().ends_with('Z'), "{json}");
    }
}
