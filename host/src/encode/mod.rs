//! Encoding: JSON (or Avro) event values to Arrow record batches against a table's schema.
//!
//! Columns follow the table's order. Each column is filled from the JSON field of the same
//! name, or by the host (`ingestion_time`). A field the table lacks is dropped and counted,
//! or makes the event an `unknown_field` error ([`UnknownFields`], see [`dropped`]). A value
//! that does not fit its column (a string for an int, an unparseable timestamp, a price
//! with three decimals) makes the whole event an [`EncodeError`] with a code, a message and
//! the field, so the pipeline can dead-letter it; the other events of the batch go on.
//!
//! With `[sink] unknown-fields = "add"` a field the table lacks (and a value that outgrows
//! its column) does not fail the event: the encoder infers the type it needs (see
//! `infer.rs`), sets the event aside ([`SCHEMA_CHANGE`]) and says what the batch needs
//! ([`Wanted`]); the pipeline changes the schema and encodes those events again.
//!
//! A column may be nested (`struct`, `list`, `map`, to any depth; see `nested.rs`): a
//! misfit inside it names the path to the value (`items[3].qty`, `context.os`,
//! `utm["k"]`). Events with nested values skip the flat fast path (`flat.rs`) for serde_json's
//! (`slow.rs`).
//!
//! Avro datums (`avro.rs`) are read straight into the same cells, field by field, against
//! their writer schema.
//!
//! Import cycle: columns, nested: a column's builder holds nested builders, whose children
//! are column builders again.

mod avro;
#[cfg(test)]
mod avro_tests;
mod cells;
mod columns;
mod conform;
pub mod dropped;
mod encoder;
mod flat;
mod grow;
#[cfg(test)]
mod index_tests;
mod infer;
#[cfg(test)]
mod infer_encoder_tests;
mod nested;
#[cfg(test)]
mod nested_tests;
#[cfg(test)]
mod patch_tests;
mod patched;
#[cfg(test)]
mod props;
mod protobuf;
#[cfg(test)]
mod protobuf_tests;
mod slow;
#[cfg(test)]
mod tests;

use std::fmt;

use arrow_array::{BooleanArray, RecordBatch};

pub use self::conform::conform;
pub use self::dropped::{DroppedFields, UnknownFields};
pub use self::encoder::{Encoded, Encoder, SCHEMA_CHANGE};
pub(crate) use self::flat::each_field as flat_fields;
pub use self::flat::index_fields;
pub(crate) use self::flat::spans as flat_spans;
pub use self::infer::{Evolving, Wanted, grow as grow_type, with_type};

/// Why one event could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// Machine-readable code: `malformed_json`, `not_an_object`, `null_value`,
    /// `type_mismatch`, `invalid_timestamp`, `invalid_date`, `invalid_decimal`,
    /// `out_of_range`, `missing_required` or `unknown_field` (a nested object's field
    /// that its struct type lacks).
    pub code: &'static str,
    /// What is wrong, for people.
    pub message: String,
    /// The offending field, when one is to blame.
    pub field: Option<String>,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} ({field}): {}", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

/// Setting up an encoder failed.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A column has a type sluice cannot fill from JSON.
    #[error("column `{column}` has type {ty}, which sluice cannot encode yet")]
    Unsupported {
        /// The column.
        column: String,
        /// Its type.
        ty: String,
    },
    /// A host-filled column is not a timestamp.
    #[error(
        "column `{0}` is filled with the ingestion time, so it must be a timestamp or timestamptz"
    )]
    GeneratedType(String),
    /// The table's schema has no Arrow equivalent.
    #[error("table schema: {0}")]
    Arrow(Box<iceberg::Error>),
    /// Arrow refused a batch (a bug: the builders follow the schema).
    #[error("building an Arrow batch: {0}")]
    Batch(#[from] arrow_schema::ArrowError),
}

/// The rows of `batch` where `keep` is true; `None` if there are none.
pub fn keep_rows(batch: RecordBatch, keep: Vec<bool>) -> Result<Option<RecordBatch>, SchemaError> {
    if keep.iter().all(|k| *k) {
        return Ok((batch.num_rows() > 0).then_some(batch));
    }
    let filtered = arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))?;
    Ok((filtered.num_rows() > 0).then_some(filtered))
}
