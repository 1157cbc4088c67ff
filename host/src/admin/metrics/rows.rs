//! What every batch read and wrote: batches, rows in and out, dead letters by code,
//! fields dropped by name, files and bytes.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Unit;

use super::{BoundedCodes, Families};
use crate::progress::Progress;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: String,
}

/// A dropped field's name, bounded by the pipeline (see [`crate::encode::DroppedFields`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FieldLabel {
    field: String,
}

/// What every batch read and wrote.
pub(super) struct RowMetrics {
    batches: Counter,
    input_rows: Counter,
    rows_written: Counter,
    rows_dead_lettered: Counter,
    dead_lettered: Family<CodeLabel, Counter>,
    codes: BoundedCodes,
    dropped_fields: Family<FieldLabel, Counter>,
    files_written: Counter,
    written_bytes: Counter,
}

impl RowMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        RowMetrics {
            batches: f.add("batches", "Batches committed", Counter::default()),
            input_rows: f.add("input_rows", "Records read", Counter::default()),
            rows_written: f.add(
                "rows_written",
                "Rows appended to the table",
                Counter::default(),
            ),
            rows_dead_lettered: f.add(
                "rows_dead_lettered",
                "Records sent to the dead-letter topic",
                Counter::default(),
            ),
            dead_lettered: f.add(
                "dead_lettered",
                "Records sent to the dead-letter topic, by code",
                Family::default(),
            ),
            codes: BoundedCodes::default(),
            dropped_fields: f.add(
                "dropped_fields",
                "Fields of written rows dropped because the table has no column for them, by name",
                Family::default(),
            ),
            files_written: f.add("files_written", "Data files added", Counter::default()),
            written_bytes: f.with_unit(
                "written",
                Unit::Bytes,
                "Bytes of data files added",
                Counter::default(),
            ),
        }
    }

    pub(super) fn record(&self, p: &Progress) {
        self.batches.inc();
        self.input_rows.inc_by(p.input_rows);
        self.rows_written.inc_by(p.rows_written);
        self.rows_dead_lettered.inc_by(p.rows_dead_lettered);
        for (code, n) in &p.dead_lettered_by_code {
            let code = self.codes.label(code);
            self.dead_lettered
                .get_or_create(&CodeLabel { code })
                .inc_by(*n);
        }
        for (field, n) in &p.dropped_fields {
            let field = field.clone();
            self.dropped_fields
                .get_or_create(&FieldLabel { field })
                .inc_by(*n);
        }
        self.files_written.inc_by(p.files_written);
        self.written_bytes.inc_by(p.bytes_written);
    }
}
