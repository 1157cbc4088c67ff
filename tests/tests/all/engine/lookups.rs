//! Lookup tables (`[[lookups]]`) in the engine: each batch records the versions it saw in
//! its plan and its commit, and a batch replayed after a crash sees exactly those, even
//! when the tables changed before the restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sluice::lookup::load::{Loader, LookupError, MemoryLoader, MemoryLookup};
use sluice::lookup::refresh::LookupTables;
use sluice::lookup::{Table, Version};

use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::{Crash, CrashPoint};

use super::{Engine, PLAIN, plain};

/// [`PLAIN`] (no event time) with a lookup table from a compacted topic.
fn with_lookups() -> String {
    format!("{PLAIN}\n[[lookups]]\nname = \"profiles\"\ntopic = \"profiles\"\n")
}

/// The batch cut short by the crashes.
const BATCH: u64 = 2;

/// Eight events: two batches of four.
fn events() -> Vec<String> {
    (0..8).map(plain).collect()
}

/// The lookup versions each commit of the main table records, by batch.
fn versions(engine: &Engine) -> BTreeMap<u64, String> {
    let sink = &engine.config.sink;
    let catalog = sluice::iceberg::IcebergCatalog::open(sink, &engine.dir).unwrap();
    let table = sluice::iceberg::IcebergTable::open(&catalog, sink.clone()).unwrap();
    let mut by_batch = BTreeMap::new();
    for snapshot in table.table().metadata().snapshots() {
        let properties = &snapshot.summary().additional_properties;
        if let (Some(batch), Some(lookups)) = (
            properties.get(sluice::checkpoint::BATCH_ID),
            properties.get(sluice::checkpoint::lookups::LOOKUPS),
        ) {
            by_batch.insert(batch.parse().unwrap(), lookups.clone());
        }
    }
    by_batch
}

/// A topic version of partition 0 at `offset`, as a commit records it.
fn at(offset: i64) -> String {
    format!(r#"{{"profiles":{{"kind":"topic","offsets":{{"0":{offset}}}}}}}"#)
}

#[test]
fn every_crash_point_replays_with_the_recorded_lookup_versions() {
    let reference = Engine::new("lookups-reference", &with_lookups());
    reference.lookups["profiles"].append("u1", Some(r#"{"tier":"gold"}"#));
    reference.append(&events());
    reference.run().unwrap();
    let want = reference.outputs();
    assert_eq!(want.rows.len(), 8);
    assert_eq!(
        versions(&reference),
        BTreeMap::from([(1, at(1)), (2, at(1))])
    );
    // Every point but the window tables' (there are none); the plan alone passes the
    // state point.
    let points = CrashPoint::ALL.into_iter();
    for point in points.filter(|p| *p != CrashPoint::AfterWindowCommit) {
        let name = format!("lookups-crash-{}", point.name());
        let engine = Engine::new(&name, &with_lookups());
        engine.lookups["profiles"].append("u1", Some(r#"{"tier":"gold"}"#));
        engine.append(&events());
        let error = engine
            .open(Crash::Fail(point, BATCH))
            .unwrap()
            .run(&Default::default());
        assert!(
            matches!(error, Err(PipelineError::Crashed { point: p, batch_id: BATCH }) if p == point),
            "{point:?}: {error:?}"
        );
        // The table changes before the restart: the replay must not see it.
        engine.lookups["profiles"].append("u1", Some(r#"{"tier":"silver"}"#));
        engine.run().unwrap();
        assert_eq!(engine.outputs(), want, "after a crash at {}", point.name());
        assert_eq!(
            versions(&engine),
            versions(&reference),
            "after a crash at {}",
            point.name()
        );
        // The next batch sees the newest version.
        engine.append(&[plain(8)]);
        engine.run().unwrap();
        assert_eq!(
            versions(&engine)[&3],
            at(2),
            "after a crash at {}",
            point.name()
        );
    }
}

/// A table whose source changes at every batch boundary: each refresh first appends
/// `u<n>` → `{"n":<n>}` to the compacted topic, as a producer writing between batches.
struct Changing {
    log: MemoryLookup,
    loader: MemoryLoader,
    refreshes: usize,
}

impl Loader for Changing {
    fn empty(&self) -> Table {
        self.loader.empty()
    }

    fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
        self.refreshes += 1;
        let n = self.refreshes;
        self.log
            .append(&format!("u{n}"), Some(&format!(r#"{{"n":{n}}}"#)));
        self.loader.refresh(table)
    }

    fn at(&mut self, version: &Version) -> Result<Table, LookupError> {
        self.loader.at(version)
    }
}

#[test]
fn each_batch_of_a_run_sees_the_newest_lookup_version() {
    let engine = Engine::new("lookups-refresh", &with_lookups());
    let log = engine.lookups["profiles"].clone();
    let changing: Box<dyn Loader> = Box::new(Changing {
        loader: log.loader("profiles", 1 << 20),
        log,
        refreshes: 0,
    });
    let tables = LookupTables::new(vec![("profiles".into(), Duration::ZERO, changing)]);
    engine.append(&events());
    let mut pipeline = engine
        .open_with(&engine.config, Crash::Never, None, Some(tables))
        .unwrap();
    let summary = pipeline.run(&Default::default()).unwrap();
    assert_eq!((summary.batches, summary.lookup_refresh_failures), (2, 0));
    assert_eq!(versions(&engine), BTreeMap::from([(1, at(1)), (2, at(2))]));
    assert_eq!(
        engine.mark_properties()[sluice::checkpoint::lookups::LOOKUPS],
        at(2)
    );
}

/// A refresh that fails is a transient fault: the batch is retried, and commits once the
/// source answers; the failure is counted.
#[test]
fn a_failed_refresh_is_retried_like_a_broker_outage() {
    struct FailsOnce(MemoryLoader, bool);
    impl Loader for FailsOnce {
        fn empty(&self) -> Table {
            self.0.empty()
        }
        fn refresh(&mut self, table: &mut Arc<Table>) -> Result<bool, LookupError> {
            if !std::mem::replace(&mut self.1, true) {
                let down = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "down");
                return Err(LookupError::source("profiles", "reading `profiles`", down));
            }
            self.0.refresh(table)
        }
        fn at(&mut self, version: &Version) -> Result<Table, LookupError> {
            self.0.at(version)
        }
    }
    let engine = Engine::new("lookups-fault", &with_lookups());
    engine.lookups["profiles"].append("u1", Some("{}"));
    let loader = FailsOnce(
        engine.lookups["profiles"].loader("profiles", 1 << 20),
        false,
    );
    let boxed: Box<dyn Loader> = Box::new(loader);
    let tables = LookupTables::new(vec![("profiles".into(), Duration::ZERO, boxed)]);
    engine.append(&events());
    let mut pipeline = engine
        .open_with(&engine.config, Crash::Never, None, Some(tables))
        .unwrap();
    let summary = pipeline.run(&Default::default()).unwrap();
    assert_eq!(
        (
            summary.batches,
            summary.faults_retried,
            summary.lookup_refresh_failures
        ),
        (2, 1, 1)
    );
    assert_eq!(engine.outputs().rows.len(), 8);
    assert_eq!(versions(&engine), BTreeMap::from([(1, at(1)), (2, at(1))]));
}

/// A pipeline whose stage (the `lookup-probe` test guest, a real Wasm plugin) rewrites each
/// event into the `profiles` values of the keys it names; the table keeps their JSON text.
fn probed() -> String {
    let head = super::pipeline_file!("lookups-probe", "");
    format!(
        r#"{head}
[[stages]]
name = "probe"
plugin = "{}"
[stages.grants]
lookups = ["profiles"]

[sink]
warehouse = "warehouse"
namespace = "engine"
table = "probed"
columns = [{{ name = "values", type = "string" }}]

[dead-letter]
topic = "dead"

[[lookups]]
name = "profiles"
topic = "profiles"
"#,
        sluice_tests::plugins::LOOKUP_PROBE
    )
}

/// Events asking for `u1` and `u<i>`.
fn asks() -> Vec<String> {
    (0..8)
        .map(|i| format!(r#"{{"table":"profiles","keys":["u1","u{i}"]}}"#))
        .collect()
}

/// A plugin's lookups in a replayed batch see the tables at the version the batch
/// recorded: the rows equal those of a run without the crash although `u1` changed before
/// the restart.
#[test]
fn a_plugin_sees_the_recorded_lookup_version_when_its_batch_is_replayed() {
    let gold = r#"{"tier":"gold"}"#;
    let reference = Engine::new("lookups-probe-reference", &probed());
    reference.lookups["profiles"].append("u1", Some(gold));
    reference.append(&asks());
    reference.run().unwrap();
    let want = reference.outputs();
    assert_eq!(want.rows.len(), 8);
    assert!(
        want.rows
            .iter()
            .all(|r| r.contains(r#"{\"tier\":\"gold\"}"#)),
        "{:?}",
        want.rows
    );
    for point in [CrashPoint::AfterState, CrashPoint::AfterDeadLetter] {
        let engine = Engine::new(&format!("lookups-probe-{}", point.name()), &probed());
        engine.lookups["profiles"].append("u1", Some(gold));
        engine.append(&asks());
        let mut crashed = engine.open(Crash::Fail(point, BATCH)).unwrap();
        assert!(crashed.run(&Default::default()).is_err());
        engine.lookups["profiles"].append("u1", Some(r#"{"tier":"silver"}"#));
        engine.run().unwrap();
        assert_eq!(engine.outputs(), want, "after a crash at {}", point.name());
        // A batch after the replay sees the new value.
        engine.append(&asks()[..1]);
        engine.run().unwrap();
        let silver = engine.outputs().rows;
        assert_eq!(silver.len(), 9);
        assert_eq!(silver.iter().filter(|r| r.contains("silver")).count(), 1);
    }
}

/// An event-time pipeline whose enrich stage patches each event with its user's tier, and
/// counts events per tier in one-minute windows.
fn tiers() -> String {
    format!(
        r#"[pipeline]
name = "tiers"
threads = 2

[source]
bootstrap-servers = "memory"
topics = ["clicks"]

[trigger]
mode = "available-now"
max-records = 4

[[stages]]
name = "enrich"
plugin = "{}"
grants = {{ lookups = ["profiles"] }}

[sink]
warehouse = "warehouse"
namespace = "engine"
table = "tiered"
columns = [
  {{ name = "event_id", type = "string", required = true }},
  {{ name = "user_id", type = "string" }},
  {{ name = "timestamp", type = "timestamptz", required = true }},
  {{ name = "tier", type = "string" }},
]

[dead-letter]
topic = "dead"

[event-time]
field = "timestamp"
max-delay = "2m"
at-end = "flush"

[[windows]]
name = "by-tier"
size = "1m"
group-by = ["tier"]
aggregates = [{{ name = "count", fn = "count" }}]
iceberg = {{ table = "by_tier" }}

[[lookups]]
name = "profiles"
topic = "profiles"
"#,
        sluice_tests::plugins::RETAIL_ENRICHER
    )
}

/// A patch reaches event time applied: the windows group by the tier the enrich stage
/// patched in (read from the value with the patch applied), and the table has it too.
#[test]
fn windows_group_by_a_field_a_stage_patched_in() {
    let engine = Engine::new("tiers", &tiers());
    engine.lookups["profiles"].append("u1", Some(r#"{"tier":"gold"}"#));
    engine.lookups["profiles"].append("u2", Some(r#"{"tier":"silver"}"#));
    let events: Vec<String> = ["u1", "u2", "u1", "u3", "u1", "u2"]
        .iter()
        .enumerate()
        .map(|(i, user)| {
            format!(
                r#"{{"event_id":"e{i}","user_id":"{user}","timestamp":"2026-01-09T10:00:0{i}Z"}}"#
            )
        })
        .collect();
    engine.append(&events);
    engine.run().unwrap();
    let mut counts: Vec<(Option<String>, i64)> = engine
        .rows(Some("by-tier"))
        .iter()
        .map(|r| {
            (
                r["tier"].as_str().map(str::to_string),
                r["count"].as_i64().unwrap(),
            )
        })
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        vec![
            (None, 1),
            (Some("gold".into()), 3),
            (Some("silver".into()), 2)
        ]
    );
    let rows = engine.rows(None);
    assert_eq!(rows.len(), 6);
    let gold = rows.iter().filter(|r| r["tier"] == "gold").count();
    assert_eq!(gold, 3, "the table has the patched field too");
}
