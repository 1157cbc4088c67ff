//! What the loop tells the admin API's probes (`GET /healthz`, `GET /readyz`; see
//! [`crate::admin::health`]): a beat wherever it makes progress, and its readiness where
//! it changes: running once the brokers answer a trigger's look at the end offsets,
//! waiting while a fault is retried or positions are reloaded after a fenced batch, or
//! while the catalog does not answer an idle pipeline's look at it (every
//! [`CATALOG_LOOK`]; batches look at it anyway).

use std::time::{Duration, Instant};

use super::Pipeline;
use crate::admin::health::Readiness;

/// How often an idle pipeline with an admin API looks at its catalog.
const CATALOG_LOOK: Duration = Duration::from_secs(10);

/// How readiness names a catalog that does not answer.
const CATALOG_AWAY: &str = "the catalog does not answer";

impl Pipeline {
    /// The loop made progress.
    pub(super) fn beat(&self) {
        if let Some(admin) = &self.admin {
            admin.health().beat();
        }
    }

    /// The loop made progress and is now doing what `readiness` says.
    pub(super) fn set_readiness(&self, readiness: Readiness) {
        if let Some(admin) = &self.admin {
            admin.health().set(readiness);
        }
    }

    /// Between triggers, every [`CATALOG_LOOK`]: reads the table's metadata again, so that
    /// a catalog outage shows on `/readyz` before a batch meets it, and its end too.
    pub(super) fn look_at_catalog(&mut self) {
        let Some(admin) = &self.admin else {
            return;
        };
        if self.catalog_looked.elapsed() < CATALOG_LOOK {
            return;
        }
        self.catalog_looked = Instant::now();
        let health = admin.health().clone();
        match self.outputs.refresh() {
            Ok(()) => {
                let away = matches!(health.readiness(), Readiness::Waiting(r) if r.starts_with(CATALOG_AWAY));
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
