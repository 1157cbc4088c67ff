//! Schema evolution in the process phase (`[sink] unknown-fields = "add"`).
//!
//! The encoder sets aside the pieces of a batch whose events need a new column or a wider
//! type, and says what they need. After the slices are merged, on one thread, the change
//! is planned ([`crate::iceberg::evolve::plan`], on top of a change held triggers already
//! planned), the pieces set aside are encoded again against the planned schema — final
//! for this batch, so a field still without a column is refused with its code — and every
//! other piece's rows are made to fit it ([`conform`]). The change then travels with the
//! batch's results and commits in the same snapshot as its rows
//! ([`crate::sink::table`]); if the table's schema moved meanwhile, the batch is read
//! again ([`crate::iceberg::IcebergError::SchemaMoved`]).
//!
//! Between batches the encoder follows the schema the next rows are written with
//! ([`Pipeline::follow_schema`]): the table's as last loaded (so a column a user added,
//! renamed or widened is used from the next batch, matched by field id), or the one
//! planned for held triggers.

use super::open::encoder_for;
use super::process::Processed;
use super::step::{Slice, Step};
use super::{Pipeline, PipelineError};
use crate::encode::{Evolving, conform};
use crate::iceberg::evolve::plan;

impl Pipeline {
    /// Reloads the table and rebuilds the encoder if the schema the next rows are written
    /// with changed.
    pub(super) fn follow_schema(&mut self) -> Result<(), PipelineError> {
        self.outputs.refresh()?;
        let table = self.outputs.table().table();
        let target = match &self.planned {
            Some(evolution) => &evolution.schema,
            None => table.schema(),
        };
        if self.encoder.schema().as_struct() == target.as_struct() {
            return Ok(());
        }
        tracing::info!(
            table = %table.name(),
            schema_id = target.schema_id(),
            columns = target.as_struct().fields().len(),
            "the table's schema changed: encoding against the new one"
        );
        self.encoder = encoder_for(target, &self.config.sink)?;
        Ok(())
    }

    /// Plans the schema change `processed`'s pieces set aside need, encodes them again
    /// against it and makes every slice's rows fit it.
    pub(super) fn evolve(
        &mut self,
        processed: &mut Processed,
        ingestion: i64,
    ) -> Result<(), PipelineError> {
        let sink = &self.config.sink;
        let wanted = std::mem::take(&mut processed.wanted);
        let metadata = self.outputs.table().table().table().metadata();
        let planned = plan(metadata, self.planned.as_ref(), &wanted, sink.max_columns);
        if !planned.refused.is_empty() {
            tracing::debug!(refused = ?planned.refused.keys().collect::<Vec<_>>(), "new fields refused a column");
        }
        if let Some(evolution) = planned.evolution {
            self.encoder = encoder_for(&evolution.schema, sink)?;
            self.planned = Some(evolution);
        }
        let evolving = Evolving {
            max_depth: sink.max_nesting_depth,
            frozen: true,
            refused: planned.refused,
            timestamps: sink.infer_timestamps,
        };
        let final_encoder = encoder_for(self.encoder.schema(), sink)?.with_evolving(evolving);
        let step = Step {
            stages: &[],
            shadows: &[],
            encoder: &final_encoder,
            event_time: self.event_time.as_ref(),
            chunk_size: 1,
            to_json: None,
            avro: self.avro(),
        };
        let mut again = Slice::new(0, 0);
        for (index, records) in std::mem::take(&mut processed.pending) {
            processed.slices[index] = step.encode(records, ingestion, &mut again)?;
        }
        super::step::own_bytes(&mut again.dead);
        super::step::add_counts(&mut processed.stats.dropped_fields, again.dropped_fields);
        processed.dead.append(&mut again.dead);
        processed.dead.sort_by(|a, b| {
            (&a.0.topic, a.0.partition, a.0.offset).cmp(&(&b.0.topic, b.0.partition, b.0.offset))
        });
        let arrow = final_encoder.arrow_schema();
        for slice in &mut processed.slices {
            if let Some(batch) = slice.batch.take() {
                slice.batch = Some(conform(batch, arrow)?);
            }
        }
        Ok(())
    }
}
