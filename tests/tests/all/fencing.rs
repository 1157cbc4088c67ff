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
fn two_processes_started_together(s: &Setup, catalog: CatalogAt<'_>) {
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
}

fn position(dead_letter: &Value) -> String {
    let h = &dead_letter["headers"];
    format!(
        "{}/{}",
        h["sluice.source.partition"].as_str().unwrap(),
        h["sluice.source.offset"].as_str().unwrap()
    )
}
