//! Several processes on one pipeline, end to end (tansu, and each catalog the processes can
//! share: SQLite, PostgreSQL, REST): the table fences every commit, so a batch another
//! process committed first is abandoned, not written twice. What landed is read back with
//! pyiceberg.

use std::collections::BTreeSet;

use serde_json::Value;
use sluice_tests::fixture::{Setup, progress_lines};
use sluice_tests::postgres::Postgres;
use sluice_tests::pyiceberg::{CatalogAt, RestCatalog, read_table_in};

const TABLE: &str = "tutorial.retail_clickstream_events";

#[test]
fn two_processes_started_together_write_every_event_once_sqlite() {
    let s = Setup::new("two-sqlite");
    two_processes_started_together(&s, CatalogAt::Warehouse(&s.warehouse));
}

#[test]
fn two_processes_started_together_write_every_event_once_postgresql() {
    let pg = Postgres::start();
    let mut s = Setup::new("two-postgres");
    s.use_postgres_catalog(&pg.url);
    let catalog = CatalogAt::Sql {
        uri: &pg.url,
        name: "sluice",
    };
    two_processes_started_together(&s, catalog);
}

#[test]
fn two_processes_started_together_write_every_event_once_rest() {
    let mut s = Setup::new("two-rest");
    let server = RestCatalog::start(&s.warehouse);
    s.use_rest_catalog(&server.url);
    let catalog = CatalogAt::Rest {
        url: &server.url,
        name: "rest",
    };
    two_processes_started_together(&s, catalog);
}

/// Today's duplication, fixed: two `--available-now` runs of one pipeline started at the
/// same moment. The first holds its first batch after sending its dead letters (as a slow
/// or paused process would), so the second commits first; the first's batch is then
/// fenced, and it goes on from what the table holds.
/// Both processes expire the table's snapshots after every commit, keeping only the
/// newest, over many small batches: the first process's batch, read against a snapshot the
/// other has expired since, is still fenced, and every event lands once.
#[test]
fn two_processes_expiring_snapshots_write_every_event_once() {
    let mut s = Setup::new("two-expire");
    s.edit_example_config(|text| {
        format!(
            "{text}\n[sink.expire-snapshots]\nolder-than = \"0s\"\nretain-last = 1\nevery-commits = 1\n"
        )
    });
    s.extra_env.push(("SLUICE_MAX_RECORDS".into(), "20".into()));
    let other_log = two_processes_started_together(&s, CatalogAt::Warehouse(&s.warehouse));
    let progress = progress_lines(&other_log);
    assert!(progress.len() >= 15, "{other_log}");
    let expired: u64 = progress
        .iter()
        .map(|p| p["snapshots_expired"].as_u64().unwrap())
        .sum();
    assert!(expired >= 10, "{other_log}");
    assert!(
        !other_log.contains("cannot expire snapshots"),
        "{other_log}"
    );
}

/// Returns the log of the process that was not held.
fn two_processes_started_together(s: &Setup, catalog: CatalogAt<'_>) -> String {
    let produced = s.produce(&[
        "--partitions",
        "3",
        "--count",
        "300",
        "--invalid-share",
        "0.1",
        "--seed",
        "7",
    ]);
    let held = s.start(
        &["run", "--available-now"],
        &[("SLUICE_PAUSE_AT", "after-dead-letter:1:5000")],
    );
    let other = s.start(&["run", "--available-now"], &[]);
    let (status, _, other_log) = other.wait();
    assert!(status.success(), "{other_log}");
    let (status, _, held_log) = held.wait();
    assert!(status.success(), "{held_log}");
    assert!(held_log.contains("batch fenced"), "{held_log}");
    assert!(progress_lines(&held_log).is_empty(), "{held_log}");
    assert!(!progress_lines(&other_log).is_empty(), "{other_log}");

    let rows = read_table_in(catalog, TABLE);
    let ids: BTreeSet<&str> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(rows.len() as u64, produced.valid, "every valid event once");
    assert_eq!(ids.len(), rows.len(), "no event twice");
    let shown = s.show();
    // Dead letters are at least once: the held process had sent its batch's already.
    let dead: BTreeSet<String> = shown["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(position)
        .collect();
    assert_eq!(dead.len() as u64, produced.invalid);
    other_log
}

fn position(dead_letter: &Value) -> String {
    let h = &dead_letter["headers"];
    format!(
        "{}/{}",
        h["sluice.source.partition"].as_str().unwrap(),
        h["sluice.source.offset"].as_str().unwrap()
    )
}
