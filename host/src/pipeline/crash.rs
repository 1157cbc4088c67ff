//! Crash points: where a batch can be cut short on purpose, to prove that every place a
//! real crash can happen is safe. They are the boundaries between the steps of a batch's
//! commit (see [`super::commit::SEQUENCE`]).

/// A point in a batch's commit where a crash is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CrashPoint {
    /// With state by partition: the batch processed, nothing of it saved, written or
    /// sent. Not in [`CrashPoint::ALL`]: only such batches pass it.
    BeforeState,
    /// With event time: the state file and the data files written, nothing sent.
    AfterState,
    /// The data files written (invisible), nothing sent.
    AfterWrite,
    /// The dead letters and every other topic acknowledged; nothing committed.
    AfterDeadLetter,
    /// With state by partition and window tables: the table still records the batch's
    /// partitions where it started (checked); the window tables not yet committed. Not in
    /// [`CrashPoint::ALL`]: only such batches pass it.
    AfterFenceCheck,
    /// With window tables: they committed the batch, the main table did not.
    AfterWindowCommit,
    /// With state by partition: the batch was fenced off after some of its window
    /// commits landed, and will never count; they are not taken back yet. Not in
    /// [`CrashPoint::ALL`]: only such batches pass it.
    BeforeUndo,
    /// The table committed; the group offsets and old state files not yet done.
    AfterCommit,
}

impl CrashPoint {
    /// Every point, in the order a batch passes them.
    pub const ALL: [CrashPoint; 5] = [
        CrashPoint::AfterState,
        CrashPoint::AfterWrite,
        CrashPoint::AfterDeadLetter,
        CrashPoint::AfterWindowCommit,
        CrashPoint::AfterCommit,
    ];

    /// The name used in `SLUICE_CRASH_AT`.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::BeforeState => "before-state",
            CrashPoint::AfterState => "after-state",
            CrashPoint::AfterWrite => "after-write",
            CrashPoint::AfterDeadLetter => "after-dead-letter",
            CrashPoint::AfterFenceCheck => "after-fence-check",
            CrashPoint::AfterWindowCommit => "after-window-commit",
            CrashPoint::BeforeUndo => "before-undo",
            CrashPoint::AfterCommit => "after-commit",
        }
    }
}

/// Where and how long [`Crash::Sleep`] holds a batch.
#[derive(Debug, Clone)]
pub struct Pause {
    /// The point.
    pub point: CrashPoint,
    /// The batch id, or `None` for the first batch that reaches the point.
    pub batch: Option<u64>,
    /// How long.
    pub pause: std::time::Duration,
    /// Whether it held a batch already (a pause for "the first batch" holds one).
    pub held: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Pause {
    /// Whether it holds `batch_id` at `point` (at most once for "the first batch").
    fn holds(&self, point: CrashPoint, batch_id: u64) -> bool {
        use std::sync::atomic::Ordering;
        point == self.point
            && match self.batch {
                Some(b) => b == batch_id,
                None => !self.held.swap(true, Ordering::SeqCst),
            }
    }
}

/// A test's hook, called at every crash point a batch passes.
pub type Hook = std::sync::Arc<dyn Fn(CrashPoint, u64) + Send + Sync>;

/// Whether and how a batch is cut short or held up.
#[derive(Clone, Default)]
pub enum Crash {
    /// Never (production).
    #[default]
    Never,
    /// Abort the process at a point of a batch, as a power cut would.
    Abort(CrashPoint, u64),
    /// Return [`super::PipelineError::Crashed`] at a point of a batch, for in-process
    /// tests: the pipeline must then be dropped, as the process would die.
    Fail(CrashPoint, u64),
    /// Sleep at a point of a batch, as a process that hangs (a stopped container, a long
    /// pause) would.
    Sleep(Pause),
    /// Call a hook at every point, for in-process tests that interleave two pipelines.
    Hook(Hook),
}

impl std::fmt::Debug for Crash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Crash::Never => f.write_str("Never"),
            Crash::Abort(p, b) => write!(f, "Abort({}, {b})", p.name()),
            Crash::Fail(p, b) => write!(f, "Fail({}, {b})", p.name()),
            Crash::Sleep(p) => write!(f, "Sleep({}, {:?}, {:?})", p.point.name(), p.batch, p.pause),
            Crash::Hook(_) => f.write_str("Hook"),
        }
    }
}

impl Crash {
    /// `SLUICE_CRASH_AT=<point>:<batch id>` aborts the process at that point, and
    /// `SLUICE_PAUSE_AT=<point>:<batch id>:<milliseconds>` holds it there (batch id `*`:
    /// the first batch this process takes to that point); read once, when the pipeline
    /// opens.
    pub fn from_env() -> Self {
        let read = |name: &str| {
            let value = std::env::var(name).ok()?;
            let parsed = parse(&value);
            if parsed.is_none() {
                tracing::warn!(%value, "{name} is not <point>:<batch id>[:<milliseconds>]: ignored");
            }
            parsed
        };
        if let Some((point, Some(batch), _)) = read("SLUICE_CRASH_AT") {
            return Crash::Abort(point, batch);
        }
        match read("SLUICE_PAUSE_AT") {
            Some((point, batch, ms)) => Crash::Sleep(Pause {
                point,
                batch,
                pause: std::time::Duration::from_millis(ms.unwrap_or(0)),
                held: Default::default(),
            }),
            None => Crash::Never,
        }
    }

    /// Cuts the batch short if this is the point: aborts, sleeps, or returns the point.
    pub fn at(&self, point: CrashPoint, batch_id: u64) -> Result<(), CrashPoint> {
        match self {
            Crash::Abort(p, b) if (*p, *b) == (point, batch_id) => {
                eprintln!(
                    "SLUICE_CRASH_AT: aborting at {} of batch {batch_id}",
                    point.name()
                );
                std::process::abort();
            }
            Crash::Fail(p, b) if (*p, *b) == (point, batch_id) => Err(point),
            Crash::Sleep(p) if p.holds(point, batch_id) => {
                tracing::warn!(
                    point = point.name(),
                    batch_id,
                    pause = ?p.pause,
                    "SLUICE_PAUSE_AT: holding the batch"
                );
                std::thread::sleep(p.pause);
                Ok(())
            }
            Crash::Hook(hook) => {
                hook(point, batch_id);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// `<point>:<batch id or *>[:<milliseconds>]`.
fn parse(value: &str) -> Option<(CrashPoint, Option<u64>, Option<u64>)> {
    let mut parts = value.split(':');
    let point = parts.next()?;
    let mut points = CrashPoint::ALL.into_iter().chain([
        CrashPoint::BeforeState,
        CrashPoint::AfterFenceCheck,
        CrashPoint::BeforeUndo,
    ]);
    let point = points.find(|p| p.name() == point)?;
    let batch = match parts.next()? {
        "*" => None,
        id => Some(id.parse().ok()?),
    };
    let ms = parts.next().map(str::parse).transpose().ok()?;
    parts.next().is_none().then_some((point, batch, ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_from_the_environment_form() {
        assert_eq!(
            parse("after-write:3"),
            Some((CrashPoint::AfterWrite, Some(3), None))
        );
        assert_eq!(
            parse("after-fence-check:*:500"),
            Some((CrashPoint::AfterFenceCheck, None, Some(500)))
        );
        assert_eq!(
            parse("after-commit:2:1500"),
            Some((CrashPoint::AfterCommit, Some(2), Some(1500)))
        );
        assert_eq!(
            parse("after-commit:*:10"),
            Some((CrashPoint::AfterCommit, None, Some(10)))
        );
        assert_eq!(parse("after-lunch:2"), None);
        assert_eq!(parse("after-write"), None);
        assert_eq!(parse("after-write:x"), None);
        assert_eq!(parse("after-write:1:2:3"), None);
    }

    #[test]
    fn a_pause_for_the_first_batch_holds_one() {
        let pause = Pause {
            point: CrashPoint::AfterWrite,
            batch: None,
            pause: std::time::Duration::ZERO,
            held: Default::default(),
        };
        assert!(!pause.holds(CrashPoint::AfterCommit, 4));
        assert!(pause.holds(CrashPoint::AfterWrite, 4));
        assert!(!pause.holds(CrashPoint::AfterWrite, 5));
        let pause = Pause {
            batch: Some(5),
            ..pause
        };
        assert!(!pause.holds(CrashPoint::AfterWrite, 4));
        assert!(pause.holds(CrashPoint::AfterWrite, 5));
        assert!(pause.holds(CrashPoint::AfterWrite, 5));
    }
}
