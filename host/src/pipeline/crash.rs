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

/// Whether and how a batch is cut short.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Crash {
    /// Never (production).
    #[default]
    Never,
    /// Abort the process at a point of a batch, as a power cut would.
    Abort(CrashPoint, u64),
    /// Return [`super::PipelineError::Crashed`] at a point of a batch, for in-process
    /// tests: the pipeline must then be dropped, as the process would die.
    Fail(CrashPoint, u64),
}

impl Crash {
    /// `SLUICE_CRASH_AT=<point>:<batch id>` aborts the process at that point; read once,
    /// when the pipeline opens.
    pub fn from_env() -> Self {
        let Ok(value) = std::env::var("SLUICE_CRASH_AT") else {
            return Crash::Never;
        };
        let parsed = value.split_once(':').and_then(|(point, batch)| {
            let point = CrashPoint::ALL.into_iter().find(|p| p.name() == point)?;
            Some(Crash::Abort(point, batch.parse().ok()?))
        });
        parsed.unwrap_or_else(|| {
            tracing::warn!(%value, "SLUICE_CRASH_AT is not <point>:<batch id>: ignored");
            Crash::Never
        })
    }

    /// Cuts the batch short if this is the point: aborts, or returns the point.
    pub fn at(self, point: CrashPoint, batch_id: u64) -> Result<(), CrashPoint> {
        match self {
            Crash::Abort(p, b) if (p, b) == (point, batch_id) => {
                eprintln!(
                    "SLUICE_CRASH_AT: aborting at {} of batch {batch_id}",
                    point.name()
                );
                std::process::abort();
            }
            Crash::Fail(p, b) if (p, b) == (point, batch_id) => Err(point),
            _ => Ok(()),
        }
    }
}
