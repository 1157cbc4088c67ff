//! Snapshot expiry while the pipeline runs: old snapshots go, its checkpoint stays.

use super::*;

/// `[sink.expire-snapshots]` as the expiry tests use it: every snapshot may go
/// (`older-than = "0s"`), the newest two stay, a round every three commits.
const EXPIRY: &str = "
[sink.expire-snapshots]
older-than = \"0s\"
retain-last = 2
every-commits = 3
";

/// The most snapshots the table may hold between rounds: `retain-last`, plus the commits
/// since the last round.
const MOST_SNAPSHOTS: usize = 2 + 3 - 1;

/// The snapshots of the table `namespace.table` in the setup's warehouse (its SQLite
/// catalog), as the catalog holds them now.
pub(crate) fn snapshot_count(s: &Setup, namespace: &str, table: &str) -> usize {
    use sluice::iceberg::{IcebergCatalog, IcebergSinkConfig, IcebergTable};
    let config: IcebergSinkConfig = toml::from_str(&format!(
        "warehouse = {:?}\nnamespace = {namespace:?}\ntable = {table:?}",
        s.warehouse.display().to_string()
    ))
    .unwrap();
    let catalog = IcebergCatalog::open_read_only(&config, &s.warehouse).unwrap();
    let table = IcebergTable::open_existing(&catalog, config).unwrap();
    table.table().metadata().snapshots().count()
}

/// The snapshots of the retail example's table.
fn retail_snapshots(s: &Setup) -> usize {
    snapshot_count(s, "tutorial", "retail_clickstream_events")
}

/// Runs the pipeline to the end of its input, `max-records` at a time; returns its
/// progress lines and the whole output, for messages.
fn run_expiring(s: &Setup, max_records: &str) -> (Vec<Value>, String) {
    let out = s.run(&[("SLUICE_MAX_RECORDS", max_records)]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("cannot expire snapshots"), "{said}");
    (progress_lines(&String::from_utf8_lossy(&out.stderr)), said)
}

fn sum_of(progress: &[Value], key: &str) -> u64 {
    progress.iter().map(|p| p[key].as_u64().unwrap()).sum()
}

/// A running pipeline expires its table's old snapshots between commits: the table keeps
/// a bounded number of snapshots over many small commits, every event lands once, and a
/// restart resumes from the mark, with single commits and with held triggers.
#[test]
fn a_running_pipeline_expires_old_snapshots_and_keeps_its_checkpoint() {
    let mut s = Setup::new("expire");
    s.edit_example_config(|text| format!("{text}{EXPIRY}"));
    let expected = Expected::produce(&s, 31, 1500);
    let (progress, said) = run_expiring(&s, "50");
    assert_eq!(progress.len(), 30, "{said}");
    let expired = sum_of(&progress, "snapshots_expired");
    assert_eq!(sum_of(&progress, "snapshot_expiry_failures"), 0, "{said}");
    let left = retail_snapshots(&s);
    assert!(left <= MOST_SNAPSHOTS, "{left} snapshots left\n{said}");
    // Every commit made a snapshot; each is either expired or left.
    assert_eq!(expired as usize + left, progress.len(), "{said}");
    assert!(
        said.contains(&format!("snapshots_expired={expired}")),
        "{said}"
    );
    expected.landed_exactly_once(&s, 3);

    // A restart finds its mark: nothing is read again.
    let (progress, said) = run_expiring(&s, "50");
    assert!(progress.is_empty(), "{said}");
    assert!(said.contains("0 batches"), "{said}");

    // More events, committed three triggers at a time (held triggers), still expiring.
    s.edit_config(|text| {
        text.replace(
            "target-file-size =",
            "commit-interval = \"1h\"\nmin-commit-rows = 150\ntarget-file-size =",
        )
    });
    let more = Expected::produce_numbered(&s, 32, 1500, 1500);
    let (progress, said) = run_expiring(&s, "50");
    assert_eq!(progress.len(), 10, "{said}");
    assert!(sum_of(&progress, "snapshots_expired") > 0, "{said}");
    let left = retail_snapshots(&s);
    assert!(left <= MOST_SNAPSHOTS, "{left} snapshots left\n{said}");
    let all = Expected {
        valid: expected.valid.union(&more.valid).cloned().collect(),
        invalid: expected.invalid + more.invalid,
    };
    all.landed_exactly_once(&s, 3);
}
