//! Which files a compaction rewrites: the small live data files of the current snapshot,
//! grouped by partition.

use std::collections::HashMap;

use iceberg::spec::{DataFile, ManifestContentType, ManifestEntry, ManifestFile, Struct};
use iceberg::table::Table;

/// The entries of the manifests read so far in a run, by path: a manifest is never changed
/// once written, so the plan and each attempt at the replace read it once between them.
pub(super) type ManifestsRead = HashMap<String, Vec<ManifestEntry>>;

/// The manifests of a snapshot, each with its entries (sequence numbers inherited).
pub(super) struct Manifests {
    /// The data manifests.
    pub data: Vec<(ManifestFile, Vec<ManifestEntry>)>,
    /// Whether a delete manifest has live delete files (rows deleted by another engine).
    pub has_deletes: bool,
}

impl Manifests {
    /// Reads the manifests of `table`'s current snapshot (none if it has no snapshot),
    /// those not in `read` from storage (and adds them to it).
    pub async fn current(table: &Table, read: &mut ManifestsRead) -> iceberg::Result<Self> {
        let mut manifests = Manifests {
            data: Vec::new(),
            has_deletes: false,
        };
        let Some(snapshot) = table.metadata().current_snapshot() else {
            return Ok(manifests);
        };
        let list = table.manifest_list_reader(snapshot).load().await?;
        for file in list.entries() {
            let entries = match read.get(&file.manifest_path) {
                Some(entries) => entries.clone(),
                None => {
                    let manifest = file.load_manifest(table.file_io()).await?;
                    let entries: Vec<ManifestEntry> =
                        manifest.entries().iter().map(|e| (**e).clone()).collect();
                    read.insert(file.manifest_path.clone(), entries.clone());
                    entries
                }
            };
            if file.content == ManifestContentType::Deletes {
                manifests.has_deletes |= entries.iter().any(ManifestEntry::is_alive);
            } else {
                manifests.data.push((file.clone(), entries));
            }
        }
        Ok(manifests)
    }

    /// The live data files that snapshot `snapshot_id` added.
    pub fn added_by(&self, snapshot_id: i64) -> Vec<DataFile> {
        self.live()
            .into_iter()
            .filter(|(_, e)| e.snapshot_id() == Some(snapshot_id))
            .map(|(_, e)| e.data_file().clone())
            .collect()
    }

    /// The live data files, with their partition spec ids, in the order they were
    /// committed.
    fn live(&self) -> Vec<(i32, &ManifestEntry)> {
        let mut live: Vec<(i32, &ManifestEntry)> = self
            .data
            .iter()
            .flat_map(|(file, entries)| {
                entries
                    .iter()
                    .filter(|e| e.is_alive())
                    .map(|e| (file.partition_spec_id, e))
            })
            .collect();
        live.sort_by_key(|(_, e)| (e.sequence_number(), e.file_path().to_string()));
        live
    }
}

/// The small files of one partition, rewritten together.
#[derive(Debug, Clone)]
pub struct Group {
    /// The partition spec the files were written with.
    pub spec_id: i32,
    /// Their partition.
    pub partition: Struct,
    /// The files, oldest first.
    pub files: Vec<DataFile>,
}

impl Group {
    /// Bytes in the group's files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(DataFile::file_size_in_bytes).sum()
    }
}

/// What to rewrite.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The snapshot the plan was read from.
    pub snapshot_id: Option<i64>,
    /// The groups, the partition with the most small files first.
    pub groups: Vec<Group>,
    /// Why nothing is rewritten although there may be small files.
    pub skipped: Option<String>,
}

/// The limits a plan keeps to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Files under this size are small.
    pub small: u64,
    /// A partition with fewer small files is left alone.
    pub min_files: usize,
    /// Bytes of small files at most in one plan.
    pub max_bytes: u64,
}

/// Plans a compaction of `manifests` (of snapshot `snapshot_id`) within `limits`.
pub(super) fn plan(manifests: &Manifests, snapshot_id: Option<i64>, limits: Limits) -> Plan {
    if manifests.has_deletes {
        return Plan {
            snapshot_id,
            groups: Vec::new(),
            skipped: Some(
                "the table has delete files (rows deleted by another engine): sluice compacts tables without row deletes".into(),
            ),
        };
    }
    let mut by_partition: HashMap<(i32, Struct), Vec<DataFile>> = HashMap::new();
    for (spec_id, entry) in manifests.live() {
        let file = entry.data_file();
        if file.file_size_in_bytes() < limits.small {
            by_partition
                .entry((spec_id, file.partition().clone()))
                .or_default()
                .push(file.clone());
        }
    }
    let mut groups: Vec<Group> = by_partition
        .into_iter()
        .filter(|(_, files)| files.len() >= limits.min_files)
        .map(|((spec_id, partition), files)| Group {
            spec_id,
            partition,
            files,
        })
        .collect();
    groups.sort_by(|a, b| {
        b.files
            .len()
            .cmp(&a.files.len())
            .then_with(|| a.files[0].file_path().cmp(b.files[0].file_path()))
    });
    Plan {
        snapshot_id,
        groups: within(groups, limits),
        skipped: None,
    }
}

/// The groups, in order, up to `limits.max_bytes` in all: the group that crosses the cap
/// keeps its oldest files up to it (if at least `min_files` of them), the rest wait.
fn within(groups: Vec<Group>, limits: Limits) -> Vec<Group> {
    let mut left = limits.max_bytes;
    let mut kept = Vec::new();
    for mut group in groups {
        let mut bytes = 0;
        let fit = group
            .files
            .iter()
            .take_while(|f| {
                bytes += f.file_size_in_bytes();
                bytes <= left
            })
            .count();
        group.files.truncate(fit);
        if group.files.len() < limits.min_files {
            continue;
        }
        left -= group.bytes();
        kept.push(group);
    }
    kept
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, Literal, ManifestStatus,
    };

    use super::*;

    fn file(path: &str, size: u64, day: i32) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.into())
            .file_format(DataFileFormat::Parquet)
            .file_size_in_bytes(size)
            .record_count(1)
            .partition(Struct::from_iter([Some(Literal::int(day))]))
            .partition_spec_id(0)
            .build()
            .unwrap()
    }

    fn entry(file: DataFile, sequence: i64, status: ManifestStatus) -> ManifestEntry {
        ManifestEntry {
            status,
            snapshot_id: Some(sequence),
            sequence_number: Some(sequence),
            file_sequence_number: Some(sequence),
            data_file: file,
        }
    }

    fn manifests(files: Vec<ManifestEntry>) -> Manifests {
        let manifest = ManifestFile {
            manifest_path: "m.avro".into(),
            manifest_length: 0,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: None,
            existing_files_count: None,
            deleted_files_count: None,
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id: None,
        };
        Manifests {
            data: vec![(manifest, files)],
            has_deletes: false,
        }
    }

    const LIMITS: Limits = Limits {
        small: 100,
        min_files: 2,
        max_bytes: 1000,
    };

    #[test]
    fn small_live_files_are_grouped_by_partition_oldest_first() {
        let m = manifests(vec![
            entry(file("d1-b", 10, 1), 2, ManifestStatus::Added),
            entry(file("d1-a", 10, 1), 1, ManifestStatus::Existing),
            entry(file("d1-big", 500, 1), 3, ManifestStatus::Added),
            entry(file("d1-gone", 10, 1), 1, ManifestStatus::Deleted),
            entry(file("d2-a", 10, 2), 1, ManifestStatus::Added),
            entry(file("d3-a", 10, 3), 1, ManifestStatus::Added),
            entry(file("d3-b", 10, 3), 2, ManifestStatus::Added),
            entry(file("d3-c", 10, 3), 3, ManifestStatus::Added),
        ]);
        let plan = plan(&m, Some(7), LIMITS);
        let paths: Vec<Vec<&str>> = plan
            .groups
            .iter()
            .map(|g| g.files.iter().map(DataFile::file_path).collect())
            .collect();
        // Day 3 has the most small files; day 2 has one (too few); the big and the
        // deleted file are not candidates.
        assert_eq!(
            paths,
            vec![vec!["d3-a", "d3-b", "d3-c"], vec!["d1-a", "d1-b"]]
        );
        assert_eq!(plan.snapshot_id, Some(7));
    }

    #[test]
    fn the_byte_cap_cuts_a_group_and_leaves_the_rest() {
        let files = (0..10)
            .map(|i| entry(file(&format!("f{i}"), 60, 1), i, ManifestStatus::Added))
            .chain((0..3).map(|i| entry(file(&format!("g{i}"), 60, 2), i, ManifestStatus::Added)))
            .collect();
        let limits = Limits {
            max_bytes: 250,
            ..LIMITS
        };
        let plan = plan(&manifests(files), None, limits);
        assert_eq!(plan.groups.len(), 1);
        assert_eq!(plan.groups[0].files.len(), 4, "4 x 60 fits under 250");
    }

    #[test]
    fn a_table_with_row_deletes_is_skipped_with_the_reason() {
        let mut m = manifests(vec![
            entry(file("a", 10, 1), 1, ManifestStatus::Added),
            entry(file("b", 10, 1), 2, ManifestStatus::Added),
        ]);
        m.has_deletes = true;
        let plan = plan(&m, None, LIMITS);
        assert!(plan.groups.is_empty());
        assert!(plan.skipped.unwrap().contains("delete files"));
    }
}
