//! Outputs: where a batch's results go, and in which order.
//!
//! Every output implements [`Output`], whose hooks have defaults so that each implements
//! only what it needs (Arroyo's operator style; Flink's two-phase commit sink):
//!
//! | hook | what | who |
//! |---|---|---|
//! | [`Output::stage`] | write what stays invisible until the commit | the table (data files) |
//! | [`Output::send`] | deliver at least once, wait for the acknowledgement | dead letters, late topic, window topics |
//! | [`Output::commit`] | make the batch visible exactly once, with its commit mark | window tables, then the table |
//! | [`Output::after_commit`] | housekeeping once the table committed | |
//!
//! # The order of a batch's side effects
//!
//! This is the one place that decides it ([`Outputs`] runs it; the pipeline adds the state
//! file and the crash points, see `pipeline::commit`):
//!
//! 1. **stage**: the event-time state file (with the batch's plan) and the table's data
//!    files, side by side. Nothing is visible yet; from here on a crash replays exactly this
//!    batch;
//! 2. **send**: the dead letters, then the late topic, then each window's topic, then each
//!    join's topic, in configured order, each acknowledged before the next. At least once:
//!    a replay sends the same records again;
//! 3. **commit the other outputs**: each window's table, then each join's table, in
//!    configured order, each one skipping a batch it already holds;
//! 4. **commit the table**: data, offsets and the state's name in one snapshot. This is the
//!    checkpoint, so it is always last: a crash before it replays the batch, a crash after
//!    it does not;
//! 5. **after the commit**: group offsets (monitoring) and old state files; every
//!    `every-commits` commits, snapshot expiry of every table ([`Outputs::expire_snapshots`],
//!    `[sink.expire-snapshots]`), whose failure is only logged and counted.
//!
//! Modules: [`table`] (the main table as an output, on the Iceberg adapter
//! [`crate::iceberg`]), [`topic`] (Kafka topics) and its in-memory twin [`memory`],
//! [`deadletter`] (dead letters and late data), [`window`] (window results), [`join`]
//! (joined rows), [`repartition`] (repartition topics, sent after the others).

pub mod deadletter;
pub mod derived;
pub mod join;
pub mod memory;
pub mod repartition;
pub mod table;
pub mod topic;
pub mod window;

use std::collections::HashMap;

use arrow_array::RecordBatch;

use self::table::TableOutput;
use self::topic::TopicError;
use crate::checkpoint::CommitMark;
use crate::event_time::join::JoinRow;
use crate::event_time::repartition::Repartitioned;
use crate::event_time::window::WindowRow;
use crate::iceberg::compact::KeyedCommit;
use crate::iceberg::{Evolution, Fence, IcebergError};
use crate::record::{Reason, Record};

/// What a batch hands its outputs.
#[derive(Debug, Default)]
pub struct Results {
    /// The pipeline.
    pub pipeline: String,
    /// The batch id.
    pub batch_id: u64,
    /// Rows for the main table.
    pub rows: Vec<RecordBatch>,
    /// Records refused (by a plugin, the encoder or event time), with the reason.
    pub dead: Vec<(Record, Reason)>,
    /// Late events bound for the late topic (`event-time.late = "topic"`).
    pub late: Vec<(Record, Reason)>,
    /// Window results, one list per window, in configured order.
    pub windows: Vec<Vec<WindowRow>>,
    /// Joined rows, one list per join, in configured order.
    pub joins: Vec<Vec<JoinRow>>,
    /// The schema change the main table commits with these rows, if they need one.
    pub evolution: Option<Evolution>,
    /// Records for repartition topics (stage one), one list per topic, in the order the
    /// pipeline opened them.
    pub repartition: Vec<Vec<Repartitioned>>,
}

/// What a hook delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Records or rows.
    pub records: u64,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Commits retried after a conflict with another commit.
    pub retries: u64,
}

/// What a commit carries.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The batch's commit mark.
    pub mark: &'a CommitMark,
    /// What the main table must still record for the batch to commit (see
    /// [`crate::iceberg::fence`]).
    pub fence: &'a Fence,
    /// More snapshot summary properties (the main table's: stages, state, watermark).
    pub properties: &'a HashMap<String, String>,
}

/// An output failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A topic failed.
    #[error("{output}: {error}")]
    Topic {
        /// The output.
        output: String,
        /// Why.
        error: Box<TopicError>,
    },
    /// A table failed.
    #[error("{output}: {error}")]
    Table {
        /// The output.
        output: String,
        /// Why.
        error: Box<IcebergError>,
    },
    /// A result does not fit its table (its schema was changed by someone else).
    #[error("{output}: {message}")]
    Schema {
        /// The output.
        output: String,
        /// Why.
        message: String,
    },
}

/// Somewhere a batch's results go. Every hook has a default that does nothing; the order
/// in which they run is the module's list.
pub trait Output: Send {
    /// The output, for messages: `dead-letter topic "x"`, `window "w"`…
    fn name(&self) -> String;

    /// Writes what stays invisible until [`Output::commit`].
    fn stage(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let _ = results;
        Ok(Delivered::default())
    }

    /// Delivers at least once and waits until the delivery is acknowledged.
    fn send(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let _ = results;
        Ok(Delivered::default())
    }

    /// Makes the batch visible exactly once, carrying its commit mark.
    fn commit(&mut self, results: &Results, commit: Commit<'_>) -> Result<Delivered, OutputError> {
        let _ = (results, commit);
        Ok(Delivered::default())
    }

    /// Runs once the table committed the batch. Failures are the output's to log.
    fn after_commit(&mut self, mark: &CommitMark) {
        let _ = mark;
    }

    /// Takes back what [`Output::commit`] made visible of the batch keyed `key` (a group
    /// member's, see [`crate::iceberg::IcebergTable::undo_keyed`]), if the last batch it
    /// committed is that one: the batch was then fenced off the main table and will never
    /// count. Returns whether there was something to take back.
    fn undo(&mut self, key: &str) -> Result<bool, OutputError> {
        let _ = key;
        Ok(false)
    }

    /// For a batch fenced off this output's table by `fence`: the commit of `pipeline`
    /// whose entry did it, if its table keeps batch keys (see
    /// [`crate::iceberg::IcebergTable::fencing_commit`]).
    fn fencing_commit(
        &self,
        pipeline: &str,
        fence: &Fence,
    ) -> Result<Option<KeyedCommit>, OutputError> {
        let _ = (pipeline, fence);
        Ok(None)
    }

    /// Takes back `commit` of `pipeline`, whose batch will never count (see
    /// [`crate::iceberg::IcebergTable::take_back`]). Returns whether it did.
    fn take_back(&mut self, pipeline: &str, commit: &KeyedCommit) -> Result<bool, OutputError> {
        let _ = (pipeline, commit);
        Ok(false)
    }

    /// The latest batch of `pipeline` that this output holds exactly once, if it keeps
    /// commit marks (tables); checked at start against the main table.
    fn held_batch(&self, pipeline: &str) -> Result<Option<u64>, OutputError> {
        let _ = pipeline;
        Ok(None)
    }

    /// Expires the snapshots of this output's table, if it has one (see
    /// [`crate::iceberg::IcebergTable::expire_snapshots`]); returns how many were removed.
    fn expire_snapshots(&mut self, cutoff_ms: i64, retain_last: usize) -> Result<u64, OutputError> {
        let _ = (cutoff_ms, retain_last);
        Ok(0)
    }
}

/// What a round of snapshot expiry did over a pipeline's tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    /// Snapshots removed.
    pub snapshots: u64,
    /// Tables whose expiry failed (logged).
    pub failures: u64,
}

/// Sends `records` to `topic` for `output`, waiting for the acknowledgement.
fn send_to(
    topic: &dyn topic::Topic,
    output: String,
    records: Vec<topic::Outgoing<'_>>,
) -> Result<Delivered, OutputError> {
    let sent = topic
        .send_all(records)
        .map_err(|error| OutputError::Topic {
            output,
            error: Box::new(error),
        })?;
    Ok(Delivered {
        records: sent,
        ..Delivered::default()
    })
}

/// A pipeline's outputs, kept in the order of the module's list.
pub struct Outputs {
    /// Every output but the table, in order: dead letters, late topic, windows.
    others: Vec<Box<dyn Output>>,
    /// The main table: its commit is the checkpoint, always last.
    table: TableOutput,
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.others.iter().map(|o| o.name()).collect();
        f.debug_struct("Outputs")
            .field("others", &names)
            .field("table", &self.table.name())
            .finish()
    }
}

impl Outputs {
    /// The outputs: `others` in the order they are sent to and committed (dead letters,
    /// late topic, windows), then the table.
    pub fn new(others: Vec<Box<dyn Output>>, table: TableOutput) -> Self {
        Outputs { others, table }
    }

    /// Reloads the main table from the catalog.
    pub fn refresh(&mut self) -> Result<(), OutputError> {
        self.table.refresh()
    }

    /// Reloads the main table from the catalog, giving up after `limit`.
    pub fn refresh_within(&mut self, limit: std::time::Duration) -> Result<(), OutputError> {
        self.table.refresh_within(limit)
    }

    /// The main table.
    pub fn table(&self) -> &TableOutput {
        &self.table
    }

    /// The main table, to check a fence on it ([`TableOutput::check_fence`]).
    pub fn table_mut(&mut self) -> &mut TableOutput {
        &mut self.table
    }

    /// Commits an empty snapshot to the main table that records `mark` unless the table
    /// holds a mark of the pipeline already (see [`TableOutput::anchor`]).
    pub fn anchor(&mut self, mark: &CommitMark, run: &str) -> Result<(), OutputError> {
        self.table.anchor(mark, run)
    }

    /// Adds `output` after the others (its sends come after theirs).
    pub fn push(&mut self, output: Box<dyn Output>) {
        self.others.push(output);
    }

    /// The outputs other than the table, in order.
    pub fn others(&self) -> &[Box<dyn Output>] {
        &self.others
    }

    /// Step 1: every output's invisible writes. Returns what the table staged.
    pub fn stage(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let table = self.table.stage(results)?;
        for output in &mut self.others {
            output.stage(results)?;
        }
        Ok(table)
    }

    /// Step 2: every at-least-once delivery, in order.
    pub fn send(&mut self, results: &Results) -> Result<(), OutputError> {
        self.table.send(results)?;
        for output in &mut self.others {
            output.send(results)?;
        }
        Ok(())
    }

    /// Step 3: the other outputs' commits, in order.
    pub fn commit_others(
        &mut self,
        results: &Results,
        commit: Commit<'_>,
    ) -> Result<(), OutputError> {
        for output in &mut self.others {
            output.commit(results, commit)?;
        }
        Ok(())
    }

    /// After a fence: takes back what the other outputs committed of the batch keyed `key` (each
    /// failure is logged: the table then fences the partitions' later batches, see the
    /// scale-out chapter). Returns how many took something back.
    pub fn undo_others(&mut self, key: &str) -> usize {
        let mut undone = 0;
        for output in &mut self.others {
            match output.undo(key) {
                Ok(true) => undone += 1,
                Ok(false) => {}
                Err(error) => {
                    tracing::error!(output = %output.name(), %error, "cannot take back a window commit of a fenced batch");
                }
            }
        }
        undone
    }

    /// After a window table fenced the batch off (`fence`): the commits of `pipeline`
    /// whose entries did it, by output (a failure to read one is logged).
    pub fn fencing_commits(&self, pipeline: &str, fence: &Fence) -> Vec<(usize, KeyedCommit)> {
        let mut found = Vec::new();
        for (index, output) in self.others.iter().enumerate() {
            match output.fencing_commit(pipeline, fence) {
                Ok(Some(commit)) => found.push((index, commit)),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(output = %output.name(), %error, "cannot read which commit fenced the batch off");
                }
            }
        }
        found
    }

    /// Takes back `commit` of `pipeline` from the `index`th output (see
    /// [`Outputs::fencing_commits`]).
    pub fn take_back(
        &mut self,
        index: usize,
        pipeline: &str,
        commit: &KeyedCommit,
    ) -> Result<bool, OutputError> {
        match self.others.get_mut(index) {
            Some(output) => output.take_back(pipeline, commit),
            None => Ok(false),
        }
    }

    /// Step 4: the table's commit, the checkpoint.
    pub fn checkpoint(
        &mut self,
        results: &Results,
        commit: Commit<'_>,
    ) -> Result<Delivered, OutputError> {
        self.table.commit(results, commit)
    }

    /// After a fault: every output forgets the batch it was given, deleting what it wrote
    /// for it that nothing will commit.
    pub fn abandon(&mut self) {
        self.table.abandon();
    }

    /// Expires old snapshots of every table: the main table, then each window table. A
    /// failure is logged and counted, and the other tables are still expired.
    pub fn expire_snapshots(&mut self, cutoff_ms: i64, retain_last: usize) -> Expired {
        let mut expired = Expired::default();
        let table: &mut dyn Output = &mut self.table;
        let outputs = std::iter::once(table).chain(self.others.iter_mut().map(|o| &mut **o));
        for output in outputs {
            match output.expire_snapshots(cutoff_ms, retain_last) {
                Ok(n) => expired.snapshots += n,
                Err(error) => {
                    expired.failures += 1;
                    tracing::warn!(output = %output.name(), %error, "cannot expire snapshots; the next round tries again");
                }
            }
        }
        expired
    }

    /// Step 5: every output's housekeeping.
    pub fn after_commit(&mut self, mark: &CommitMark) {
        for output in &mut self.others {
            output.after_commit(mark);
        }
        self.table.after_commit(mark);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::iceberg::IcebergTable;
    use crate::record::Offsets;

    /// An output whose table cannot be expired.
    struct Unexpirable;

    impl Output for Unexpirable {
        fn name(&self) -> String {
            "window `w`".into()
        }

        fn expire_snapshots(&mut self, _: i64, _: usize) -> Result<u64, OutputError> {
            Err(OutputError::Schema {
                output: self.name(),
                message: "the table is gone".into(),
            })
        }
    }

    #[test]
    fn a_failed_expiry_is_counted_and_the_table_still_expires_keeping_the_mark() {
        let (dir, catalog, config) = crate::iceberg::test_table("outputs-expire");
        let mut table = IcebergTable::open(&catalog, config).unwrap();
        for batch_id in 1..=4 {
            let mark = CommitMark {
                pipeline: "p".into(),
                batch_id,
                offsets: Offsets::default(),
            };
            let extra = HashMap::new();
            table.commit(vec![], &mark, extra, &Fence::NotHeld).unwrap();
        }
        let mut outputs = Outputs::new(vec![Box::new(Unexpirable)], TableOutput::new(table));
        let expired = outputs.expire_snapshots(i64::MAX, 1);
        assert_eq!(
            expired,
            Expired {
                snapshots: 3,
                failures: 1
            }
        );
        let table = outputs.table().table();
        assert_eq!(table.table().metadata().snapshots().count(), 1);
        let last = table.last_mark("p").unwrap().map(|m| m.batch_id);
        assert_eq!(last, Some(4));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
