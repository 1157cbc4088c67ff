//! What the loop tells the admin API's probes (`GET /healthz`, `GET /readyz`; see
//! [`crate::admin::health`]): a beat wherever it makes progress, and its readiness where
//! it changes: running once the brokers answer a trigger's look at the end offsets,
//! waiting while a fault is retried or positions are reloaded after a fenced batch.

use super::Pipeline;
use crate::admin::health::Readiness;

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
}
