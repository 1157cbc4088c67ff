//! Plugins: events, verdicts and time per stage and version digest, swaps, rollbacks and
//! refusals per stage.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Unit;

use super::{BoundedCodes, Families, Seconds, raise_to};
use crate::progress::StageProgress;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabel {
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    stage: String,
    digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    stage: String,
    digest: String,
    verdict: String,
}

/// What each plugin stage reports, by stage and by the digest of the version that ran.
pub(super) struct PluginMetrics {
    events: Family<VersionLabels, Counter>,
    kept: Family<VersionLabels, Counter>,
    rejected: Family<VersionLabels, Counter>,
    failed: Family<VersionLabels, Counter>,
    rewritten: Family<VersionLabels, Counter>,
    calls: Family<VersionLabels, Counter>,
    seconds: Family<VersionLabels, Seconds>,
    verdicts: Family<VerdictLabels, Counter>,
    codes: BoundedCodes,
    swaps: Family<StageLabel, Counter>,
    rollbacks: Family<StageLabel, Counter>,
    refused: Family<StageLabel, Counter>,
}

impl PluginMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        let verdicts = "Rejections by code (rejected:<code>), failures by kind (failed:<kind>)";
        PluginMetrics {
            events: f.add(
                "plugin_events",
                "Events that reached a stage",
                Family::default(),
            ),
            kept: f.add(
                "plugin_kept",
                "Events kept (or rewritten)",
                Family::default(),
            ),
            rejected: f.add("plugin_rejected", "Events rejected", Family::default()),
            failed: f.add(
                "plugin_failed",
                "Events failed on (trap, limit)",
                Family::default(),
            ),
            rewritten: f.add("plugin_rewritten", "Events rewritten", Family::default()),
            calls: f.add("plugin_calls", "Plugin calls made", Family::default()),
            seconds: f.with_unit(
                "plugin_stage",
                Unit::Seconds,
                "Time spent in a stage's calls (the slowest thread's share)",
                Family::default(),
            ),
            verdicts: f.add("plugin_verdicts", verdicts, Family::default()),
            codes: BoundedCodes::default(),
            swaps: f.add("plugin_swaps", "Versions swapped in", Family::default()),
            rollbacks: f.add(
                "plugin_rollbacks",
                "Versions rolled back",
                Family::default(),
            ),
            refused: f.add("plugin_refused", "New versions refused", Family::default()),
        }
    }

    /// Creates a stage's counts since the start, at zero.
    pub(super) fn touch(&self, stage: &str) {
        let label = StageLabel {
            stage: stage.to_string(),
        };
        for family in [&self.swaps, &self.rollbacks, &self.refused] {
            let _ = family.get_or_create(&label);
        }
    }

    pub(super) fn record(&self, stage: &str, s: &StageProgress) {
        let version = VersionLabels {
            stage: stage.to_string(),
            digest: s.digest.clone(),
        };
        let c = &s.counts;
        for (family, n) in [
            (&self.events, c.events),
            (&self.kept, c.kept),
            (&self.rejected, c.rejected),
            (&self.failed, c.failed),
            (&self.rewritten, c.rewritten),
            (&self.calls, c.calls),
        ] {
            family.get_or_create(&version).inc_by(n);
        }
        let seconds = c.micros as f64 / 1e6;
        self.seconds.get_or_create(&version).inc_by(seconds);
        for (verdict, n) in &s.verdicts {
            let labels = VerdictLabels {
                stage: version.stage.clone(),
                digest: version.digest.clone(),
                verdict: self.codes.verdict(verdict),
            };
            self.verdicts.get_or_create(&labels).inc_by(*n);
        }
        let label = StageLabel {
            stage: stage.to_string(),
        };
        raise_to(&self.swaps.get_or_create(&label), s.swaps);
        raise_to(&self.rollbacks.get_or_create(&label), s.rollbacks);
        raise_to(&self.refused.get_or_create(&label), s.refused);
    }
}
