//! What the loop tells the admin API's probes (`GET /healthz`, `GET /readyz`; see
//! [`crate::admin::health`]): a beat wherever it makes progress, and its readiness where
//! it changes: running once the brokers answer a trigger's look at the end offsets,
//! waiting while a fault is retried or positions are reloaded after a fenced batch, or
//! while the catalog does not answer an idle pipeline's look at it (every
//! [`CATALOG_LOOK`]; batches look at it anyway). A catalog outage ends only when the
//! catalog answers that look again or a batch commits: the brokers' answer does not end
//! it, so `/readyz` does not flap between triggers.

use std::time::{Duration, Instant};

use super::Pipeline;
use crate::admin::health::Readiness;

/// How often an idle pipeline with an admin API looks at its catalog.
const CATALOG_LOOK: Duration = Duration::from_secs(10);

/// How often it looks again while the catalog does not answer, to say soon when it is back.
const CATALOG_RELOOK: Duration = Duration::from_secs(1);

/// How long a look waits for the catalog's answer: a catalog that hangs, rather than
/// refuses, is not ready either, and the loop must not hang with it between triggers.
const CATALOG_ANSWER: Duration = Duration::from_secs(5);

/// How readiness names a catalog that does not answer.
const CATALOG_AWAY: &str = "the catalog does not answer";

impl Pipeline {
    /// The loop made progress.
    pub(super) fn beat(&self) {
        if let Some(health) = &self.health {
            health.beat();
        }
    }

    /// The loop made progress and is now doing what `readiness` says.
    pub(super) fn set_readiness(&self, readiness: Readiness) {
        if let Some(health) = &self.health {
            health.set(readiness);
        }
    }

    /// The brokers answered a trigger's look: ready, unless the catalog is away (its own
    /// look, or a committed batch, says when it is back).
    pub(super) fn brokers_answered(&self) {
        let Some(health) = &self.health else {
            return;
        };
        if catalog_away(&health.readiness()) {
            health.beat();
        } else {
            health.set(Readiness::Running);
        }
    }

    /// Between triggers, every [`CATALOG_LOOK`] ([`CATALOG_RELOOK`] while it is away):
    /// reads the table's metadata again, so that a catalog outage shows on `/readyz` before
    /// a batch meets it, and its end too.
    pub(super) fn look_at_catalog(&mut self) {
        let Some(health) = self.health.clone() else {
            return;
        };
        let away = catalog_away(&health.readiness());
        let every = if away { CATALOG_RELOOK } else { CATALOG_LOOK };
        if self.catalog_looked.elapsed() < every {
            return;
        }
        self.catalog_looked = Instant::now();
        match self.outputs.refresh_within(CATALOG_ANSWER) {
            Ok(()) => {
                if away {
                    tracing::info!("the catalog answers again");
                    health.set(Readiness::Running);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "{CATALOG_AWAY}");
                health.set(Readiness::Waiting(format!("{CATALOG_AWAY}: {error}")));
            }
        }
    }
}

/// Whether `readiness` says the catalog is away.
fn catalog_away(readiness: &Readiness) -> bool {
    matches!(readiness, Readiness::Waiting(r) if r.starts_with(CATALOG_AWAY))
}
