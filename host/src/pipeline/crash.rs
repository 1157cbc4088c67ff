//! Crash points: where a batch can be cut short on purpose, to prove that every place a
//! real crash can happen is safe. They are the boundaries between the steps of a batch's
//! commit (see [`super::commit::SEQUENCE`]).

/// A point in a batch's commit where a crash is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CrashPoint {
    /// With event time: the state file and the data files written, nothing sent.
    AfterState,
    /// The data files written (invisible), nothing sent.
    AfterWrite,
    /// The dead letters and every other topic acknowledged; nothing committed.
    AfterDeadLetter,
    /// With window tables: they committed the batch, the main table did not.
    AfterWindowCommit,
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
            CrashPoint::AfterState => "after-state",
            CrashPoint::AfterWrite => "after-write",
            CrashPoint::AfterDeadLetter => "after-dead-letter",
            CrashPoint::AfterWindowCommit => "after-window-commit",
            CrashPoint::AfterCommit => "after-commit",
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
    Sleep(CrashPoint, u64, std::time::Duration),
    /// Call a hook at every point, for in-process tests that interleave two pipelines.
    Hook(Hook),
}

impl std::fmt::Debug for Crash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Crash::Never => f.write_str("Never"),
            Crash::Abort(p, b) => write!(f, "Abort({}, {b})", p.name()),
            Crash::Fail(p, b) => write!(f, "Fail({}, {b})", p.name()),
            Crash::Sleep(p, b, d) => write!(f, "Sleep({}, {b}, {d:?})", p.name()),
            Crash::Hook(_) => f.write_str("Hook"),
        }
    }
}

impl Crash {
    /// `SLUICE_CRASH_AT=<point>:<batch id>` aborts the process at that point, and
    /// `SLUICE_PAUSE_AT=<point>:<batch id>:<milliseconds>` holds it there; read once, when
    /// the pipeline opens.
    pub fn from_env() -> Self {
        let read = |name: &str| {
            let value = std::env::var(name).ok()?;
            let parsed = parse(&value);
            if parsed.is_none() {
                tracing::warn!(%value, "{name} is not <point>:<batch id>[:<milliseconds>]: ignored");
            }
            parsed
        };
        if let Some((point, batch, _)) = read("SLUICE_CRASH_AT") {
            return Crash::Abort(point, batch);
        }
        match read("SLUICE_PAUSE_AT") {
            Some((point, batch, ms)) => Crash::Sleep(
                point,
                batch,
                std::time::Duration::from_millis(ms.unwrap_or(0)),
            ),
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
            Crash::Sleep(p, b, pause) if (*p, *b) == (point, batch_id) => {
                tracing::warn!(
                    point = point.name(),
                    batch_id,
                    ?pause,
                    "SLUICE_PAUSE_AT: holding the batch"
                );
                std::thread::sleep(*pause);
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

/// `<point>:<batch id>[:<milliseconds>]`.
fn parse(value: &str) -> Option<(CrashPoint, u64, Option<u64>)> {
    let mut parts = value.split(':');
    let point = parts.next()?;
    let point = CrashPoint::ALL.into_iter().find(|p| p.name() == point)?;
    let batch = parts.next()?.parse().ok()?;
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
            Some((CrashPoint::AfterWrite, 3, None))
        );
        assert_eq!(
            parse("after-commit:2:1500"),
            Some((CrashPoint::AfterCommit, 2, Some(1500)))
        );
        assert_eq!(parse("after-lunch:2"), None);
        assert_eq!(parse("after-write"), None);
        assert_eq!(parse("after-write:x"), None);
        assert_eq!(parse("after-write:1:2:3"), None);
    }
}
