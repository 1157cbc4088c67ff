//! Compaction (`[sink.compact]`): runs, files and bytes rewritten and written, conflicts,
//! abandoned runs and failures.

use prometheus_client::metrics::counter::Counter;

use super::Families;
use crate::iceberg::compact::Compaction;

/// What the pipeline's compaction did.
pub(super) struct CompactionMetrics {
    runs: Counter,
    files_rewritten: Counter,
    bytes_rewritten: Counter,
    files_written: Counter,
    bytes_written: Counter,
    conflicts: Counter,
    abandoned: Counter,
    failures: Counter,
}

impl CompactionMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        let mut counter = |name: &str, help: &str| f.add(name, help, Counter::default());
        CompactionMetrics {
            runs: counter(
                "compactions",
                "Compaction runs that committed a replace snapshot ([sink.compact])",
            ),
            files_rewritten: counter(
                "compaction_files_rewritten",
                "Small data files compaction rewrote (removed from the tables)",
            ),
            bytes_rewritten: counter(
                "compaction_bytes_rewritten",
                "Bytes of the small data files compaction rewrote",
            ),
            files_written: counter(
                "compaction_files_written",
                "Data files compaction wrote in their place",
            ),
            bytes_written: counter(
                "compaction_bytes_written",
                "Bytes of the data files compaction wrote",
            ),
            conflicts: counter(
                "compaction_conflicts",
                "Compaction commits refused because an append landed first, then built again",
            ),
            abandoned: counter(
                "compaction_abandoned",
                "Compaction runs abandoned because another compaction took some of their files",
            ),
            failures: counter(
                "compaction_failures",
                "Compaction runs that failed (logged; the pipeline went on)",
            ),
        }
    }

    pub(super) fn record(&self, c: &Compaction) {
        self.runs.inc_by(c.runs);
        self.files_rewritten.inc_by(c.files_rewritten);
        self.bytes_rewritten.inc_by(c.bytes_rewritten);
        self.files_written.inc_by(c.files_written);
        self.bytes_written.inc_by(c.bytes_written);
        self.conflicts.inc_by(c.conflicts);
        self.abandoned.inc_by(c.abandoned);
        self.failures.inc_by(c.failures);
    }
}
