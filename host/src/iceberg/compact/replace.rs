//! The `replace` snapshot that swaps a compaction's small files for the files it wrote.
//!
//! Built against the table as it is at commit time (not as it was planned): every
//! manifest that lists a rewritten file is merged into one new manifest per partition
//! spec, the rewritten files marked deleted and the others kept as existing; the written
//! files go into a manifest of their own; every other manifest is carried over as it is.
//! If a rewritten file is no longer live (another compaction took it) the replace is
//! [`Prepared::Gone`]: nothing is committed. Appends that landed since the plan do not
//! matter: their files are carried over.
//!
//! The commit goes through a [`Transaction`] pinned to that table (see
//! [`super::super::fence`]): if the table moved meanwhile the catalog refuses, and the
//! caller builds the snapshot again on the new table.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::{
    DataFile, FormatVersion, MAIN_BRANCH, ManifestContentType, ManifestFile, ManifestListWriter,
    ManifestWriter, ManifestWriterBuilder, Operation, Snapshot, SnapshotReference,
    SnapshotRetention, SnapshotSummaryCollector, Summary, TableMetadata,
};
use iceberg::table::Table;
use iceberg::transaction::{ActionCommit, ApplyTransactionAction, Transaction, TransactionAction};
use iceberg::{Catalog, Error, ErrorKind, TableRequirement, TableUpdate};

use super::plan::{Manifests, ManifestsRead};
use crate::iceberg::fence::PinnedCatalog;

/// The files a compaction swaps.
#[derive(Debug, Clone)]
pub(super) struct Replace {
    /// The files rewritten, to be removed, with the partition spec they were written for.
    pub removed: Vec<(i32, DataFile)>,
    /// The files written, with the partition spec they were written for.
    pub added: Vec<(i32, DataFile)>,
    /// Summary properties beside Iceberg's own.
    pub properties: HashMap<String, String>,
    /// Table properties the snapshot sets too (in the same metadata change).
    pub table_properties: HashMap<String, String>,
    /// The manifests of the change, once written: kept across attempts while the
    /// manifests they replace are still the table's.
    pub built: Option<Built>,
    /// Manifests written for an earlier state of the table, no longer used.
    pub stale: Vec<String>,
    /// The manifests the run has read (the plan's, then the replace's).
    pub read: ManifestsRead,
}

/// The manifests of a replace, written once for every attempt: appends since only add
/// manifests, so while the ones merged are still listed, the change still holds.
#[derive(Debug, Clone)]
pub(super) struct Built {
    /// The id of the snapshot (the manifests' entries carry it).
    snapshot_id: i64,
    /// The manifests merged into `own` (they leave the list).
    touched: HashSet<String>,
    /// The merged manifests and the manifests of the files written.
    own: Vec<ManifestFile>,
    /// Where `own` was written.
    written: Vec<String>,
}

/// A replace built against one state of the table.
pub(super) enum Prepared {
    /// The snapshot's updates and requirements (its manifests written).
    Ready(ReplaceAction),
    /// Rewritten files the table no longer lists as live, or delete files that appeared:
    /// nothing to commit.
    Gone(String),
}

/// The metadata change of one replace snapshot.
pub(super) struct ReplaceAction {
    updates: Vec<TableUpdate>,
    requirements: Vec<TableRequirement>,
    /// The snapshot's id.
    pub snapshot_id: i64,
    /// The manifest list and manifests written for it (removed if it does not commit).
    pub written: Vec<String>,
}

impl ReplaceAction {
    /// Adds `snapshot` to the table described by `metadata` and makes it the main
    /// branch's head, if the head is still its parent.
    fn new(
        metadata: &TableMetadata,
        snapshot: Snapshot,
        written: Vec<String>,
        properties: &HashMap<String, String>,
    ) -> Self {
        let snapshot_id = snapshot.snapshot_id();
        let parent = snapshot.parent_snapshot_id();
        let mut updates = vec![
            TableUpdate::AddSnapshot { snapshot },
            TableUpdate::SetSnapshotRef {
                ref_name: MAIN_BRANCH.to_string(),
                reference: SnapshotReference::new(
                    snapshot_id,
                    SnapshotRetention::branch(None, None, None),
                ),
            },
        ];
        if !properties.is_empty() {
            updates.push(TableUpdate::SetProperties {
                updates: properties.clone(),
            });
        }
        ReplaceAction {
            updates,
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: metadata.uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: MAIN_BRANCH.to_string(),
                    snapshot_id: parent,
                },
            ],
            snapshot_id,
            written,
        }
    }
}

#[async_trait]
impl TransactionAction for ReplaceAction {
    async fn commit(self: Arc<Self>, _table: &Table) -> iceberg::Result<ActionCommit> {
        Ok(ActionCommit::new(
            self.updates.clone(),
            self.requirements.clone(),
        ))
    }
}

impl Replace {
    /// Builds the replace snapshot on `table` as it is (see the module documentation),
    /// writing its manifest list (named after `prefix`, unique to the attempt).
    pub async fn prepare(&mut self, table: &Table, prefix: &str) -> iceberg::Result<Prepared> {
        let metadata = table.metadata();
        if metadata.format_version() != FormatVersion::V2 {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!(
                    "sluice compacts format-version 2 tables; this one is {}",
                    metadata.format_version()
                ),
            ));
        }
        let Some(parent) = metadata.current_snapshot() else {
            return Ok(Prepared::Gone("the table has no snapshot".into()));
        };
        let list = table.manifest_list_reader(parent).load().await?;
        if list.entries().iter().any(|m| {
            m.content == ManifestContentType::Deletes
                && (m.has_added_files() || m.has_existing_files())
        }) {
            return Ok(Prepared::Gone("delete files appeared".into()));
        }
        let current: HashSet<&str> = list
            .entries()
            .iter()
            .map(|m| m.manifest_path.as_str())
            .collect();
        let still = self
            .built
            .as_ref()
            .is_some_and(|b| b.touched.iter().all(|t| current.contains(t.as_str())));
        if !still && let Some(why) = self.build(table, prefix).await? {
            return Ok(Prepared::Gone(why));
        }
        let built = self.built.as_ref().expect("built above");
        let manifests: Vec<ManifestFile> = list
            .entries()
            .iter()
            .filter(|m| !built.touched.contains(&m.manifest_path))
            .cloned()
            .chain(built.own.iter().cloned())
            .collect();
        let mut building = Building {
            table,
            snapshot_id: built.snapshot_id,
            prefix,
            written: Vec::new(),
        };
        let summary = self.summary(metadata, parent.summary())?;
        let snapshot = building
            .snapshot(parent.snapshot_id(), manifests, summary)
            .await?;
        Ok(Prepared::Ready(ReplaceAction::new(
            metadata,
            snapshot,
            building.written,
            &self.table_properties,
        )))
    }

    /// Reads every manifest of `table`'s current snapshot, checks that the rewritten files
    /// are live, and writes the manifests of the change: the manifests that list them,
    /// merged, and the files written. Returns why not, if a rewritten file is gone.
    async fn build(&mut self, table: &Table, prefix: &str) -> iceberg::Result<Option<String>> {
        if let Some(stale) = self.built.take() {
            self.stale.extend(stale.written);
        }
        let manifests = Manifests::current(table, &mut self.read).await?;
        let removed: HashSet<&str> = self.removed.iter().map(|(_, f)| f.file_path()).collect();
        let live: HashSet<&str> = manifests
            .data
            .iter()
            .flat_map(|(_, entries)| entries.iter())
            .filter(|e| e.is_alive() && removed.contains(e.file_path()))
            .map(|e| e.file_path())
            .collect();
        if live.len() != removed.len() {
            let gone = removed.difference(&live).count();
            return Ok(Some(format!(
                "{gone} of the {} files rewritten are no longer in the table",
                removed.len()
            )));
        }
        let mut building = Building {
            table,
            snapshot_id: new_snapshot_id(table.metadata()),
            prefix,
            written: Vec::new(),
        };
        let (touched, mut own) = building.merge(&manifests, &removed).await?;
        own.extend(building.added(&self.added).await?);
        self.built = Some(Built {
            snapshot_id: building.snapshot_id,
            touched,
            own,
            written: building.written,
        });
        Ok(None)
    }

    /// The manifests this replace wrote that no attempt's manifest list has yet (the
    /// caller deletes them if it gives up).
    pub fn own_manifests(&self) -> Vec<String> {
        let built = self.built.iter().flat_map(|b| b.written.iter());
        self.stale.iter().chain(built).cloned().collect()
    }

    /// The snapshot's summary: Iceberg's counts of what was added and removed, the
    /// table's totals carried from `previous`, and [`Replace::properties`].
    fn summary(&self, metadata: &TableMetadata, previous: &Summary) -> iceberg::Result<Summary> {
        let schema = metadata.current_schema().clone();
        let spec_of = |id: i32| {
            metadata.partition_spec_by_id(id).cloned().ok_or_else(|| {
                Error::new(ErrorKind::DataInvalid, format!("no partition spec {id}"))
            })
        };
        let mut collector = SnapshotSummaryCollector::default();
        for (spec_id, file) in &self.added {
            collector.add_file(file, schema.clone(), spec_of(*spec_id)?);
        }
        for (spec_id, file) in &self.removed {
            collector.remove_file(file, schema.clone(), spec_of(*spec_id)?);
        }
        let mut properties = collector.build();
        carry_totals(&mut properties, &previous.additional_properties);
        properties.extend(self.properties.clone());
        Ok(Summary {
            operation: Operation::Replace,
            additional_properties: properties,
        })
    }
}

/// The table's totals after the change: the previous snapshot's, plus what was added,
/// minus what was removed (left out if the previous snapshot had none, as Java does).
fn carry_totals(properties: &mut HashMap<String, String>, previous: &HashMap<String, String>) {
    const TOTALS: [(&str, &str, &str); 3] = [
        ("total-data-files", "added-data-files", "deleted-data-files"),
        ("total-records", "added-records", "deleted-records"),
        ("total-files-size", "added-files-size", "removed-files-size"),
    ];
    let number =
        |map: &HashMap<String, String>, key: &str| map.get(key).and_then(|v| v.parse::<i64>().ok());
    for (total, added, removed) in TOTALS {
        if let Some(before) = number(previous, total) {
            let after = before + number(properties, added).unwrap_or(0)
                - number(properties, removed).unwrap_or(0);
            properties.insert(total.into(), after.max(0).to_string());
        }
    }
    for unchanged in [
        "total-delete-files",
        "total-position-deletes",
        "total-equality-deletes",
    ] {
        if let Some(value) = previous.get(unchanged) {
            properties.insert(unchanged.into(), value.clone());
        }
    }
}

/// A snapshot id the table has not used.
fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    loop {
        let id = (rand::random::<u64>() >> 1) as i64;
        if id != 0 && metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// The files of one replace snapshot, as they are written.
struct Building<'a> {
    table: &'a Table,
    snapshot_id: i64,
    prefix: &'a str,
    written: Vec<String>,
}

impl Building<'_> {
    fn path(&mut self, name: String) -> String {
        let location = self.table.metadata().location().trim_end_matches('/');
        let path = format!("{location}/metadata/{name}");
        self.written.push(path.clone());
        path
    }

    fn manifest_writer(&mut self, spec_id: i32) -> iceberg::Result<ManifestWriter> {
        let metadata = self.table.metadata();
        let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("no partition spec {spec_id}"),
            )
        })?;
        let path = self.path(format!("{}-m{}.avro", self.prefix, self.written.len()));
        Ok(ManifestWriterBuilder::new(
            self.table.file_io().new_output(path)?,
            Some(self.snapshot_id),
            metadata.current_schema().clone(),
            (**spec).clone(),
        )
        .build_v2_data())
    }

    /// The manifests that list a rewritten file (their paths), merged into one per
    /// partition spec: the rewritten files marked deleted, the others kept as existing.
    async fn merge(
        &mut self,
        manifests: &Manifests,
        removed: &HashSet<&str>,
    ) -> iceberg::Result<(HashSet<String>, Vec<ManifestFile>)> {
        let mut touched = HashSet::new();
        let mut merged: BTreeMap<i32, ManifestWriter> = BTreeMap::new();
        for (file, entries) in &manifests.data {
            if !entries.iter().any(|e| removed.contains(e.file_path())) {
                continue;
            }
            touched.insert(file.manifest_path.clone());
            let writer = match merged.entry(file.partition_spec_id) {
                std::collections::btree_map::Entry::Occupied(w) => w.into_mut(),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(self.manifest_writer(file.partition_spec_id)?)
                }
            };
            for entry in entries.iter().filter(|e| e.is_alive()) {
                let sequence = entry.sequence_number().unwrap_or(0);
                let data_file = entry.data_file().clone();
                if removed.contains(entry.file_path()) {
                    writer.add_delete_file(data_file, sequence, entry.file_sequence_number)?;
                } else {
                    let added_by = entry.snapshot_id().unwrap_or(file.added_snapshot_id);
                    writer.add_existing_file(
                        data_file,
                        added_by,
                        sequence,
                        entry.file_sequence_number,
                    )?;
                }
            }
        }
        let mut written = Vec::new();
        for (_, writer) in merged {
            written.push(writer.write_manifest_file().await?);
        }
        Ok((touched, written))
    }

    /// The manifests of the files written, one per partition spec.
    async fn added(&mut self, added: &[(i32, DataFile)]) -> iceberg::Result<Vec<ManifestFile>> {
        let mut by_spec: BTreeMap<i32, Vec<DataFile>> = BTreeMap::new();
        for (spec_id, file) in added {
            by_spec.entry(*spec_id).or_default().push(file.clone());
        }
        let mut manifests = Vec::new();
        for (spec_id, files) in by_spec {
            let mut writer = self.manifest_writer(spec_id)?;
            for file in files {
                // No data sequence number: the new files take the snapshot's.
                writer.add_file(file, -1)?;
            }
            manifests.push(writer.write_manifest_file().await?);
        }
        Ok(manifests)
    }

    /// Writes the manifest list and returns the snapshot.
    async fn snapshot(
        &mut self,
        parent: i64,
        manifests: Vec<ManifestFile>,
        summary: Summary,
    ) -> iceberg::Result<Snapshot> {
        let metadata = self.table.metadata();
        let sequence = metadata.next_sequence_number();
        let path = self.path(format!("snap-{}-{}.avro", self.snapshot_id, self.prefix));
        let mut list = ManifestListWriter::v2(
            self.table.file_io().new_output(&path)?.writer().await?,
            self.snapshot_id,
            Some(parent),
            sequence,
        );
        list.add_manifests(manifests.into_iter())?;
        list.close().await?;
        Ok(Snapshot::builder()
            .with_snapshot_id(self.snapshot_id)
            .with_parent_snapshot_id(Some(parent))
            .with_sequence_number(sequence)
            .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
            .with_manifest_list(path)
            .with_summary(summary)
            .with_schema_id(metadata.current_schema_id())
            .build())
    }
}

/// Commits `action` against `table` (the table it was prepared on) through `catalog`,
/// pinned: a table that moved meanwhile is a `CatalogCommitConflicts` error, not a
/// rebase.
pub(super) async fn commit(
    catalog: &dyn Catalog,
    table: &Table,
    action: ReplaceAction,
) -> iceberg::Result<()> {
    let pinned = PinnedCatalog {
        inner: catalog,
        table,
    };
    let tx = action.apply(Transaction::new(table))?;
    tx.commit(&pinned).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn totals_are_carried_with_what_was_added_and_removed() {
        let previous = map(&[
            ("total-data-files", "100"),
            ("total-records", "5000"),
            ("total-files-size", "100000"),
            ("total-delete-files", "0"),
        ]);
        let mut now = map(&[
            ("added-data-files", "1"),
            ("deleted-data-files", "40"),
            ("added-records", "2000"),
            ("deleted-records", "2000"),
            ("added-files-size", "30000"),
            ("removed-files-size", "40000"),
        ]);
        carry_totals(&mut now, &previous);
        assert_eq!(now["total-data-files"], "61");
        assert_eq!(now["total-records"], "5000");
        assert_eq!(now["total-files-size"], "90000");
        assert_eq!(now["total-delete-files"], "0");
    }
}
