//! `sluice run` end to end: a real broker (tansu), the real SQL catalog on SQLite, plugins
//! built from source, the example pipeline file. The pipeline runs as a process (so it can
//! be killed); what landed is read back with `sluice show --json` and with pyiceberg.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice::cli::{self, Command as Sub};
use sluice::generate::{EventKind, Generator, GeneratorConfig};
use sluice_tests::fixture::{Setup, progress_lines, sluice_binary, text};
use sluice_tests::{example_config, plugins, pyiceberg, repo_root, retail_events_file};

pub(crate) fn rows(shown: &Value) -> &Vec<Value> {
    shown["rows"].as_array().unwrap()
}

pub(crate) fn dead_letters(shown: &Value) -> &Vec<Value> {
    shown["dead_letters"].as_array().unwrap()
}

/// (source offset, stage, code, field) of each dead letter.
type Reasons = BTreeSet<(String, String, String, String)>;

fn reasons(dead: &[Value]) -> Reasons {
    dead.iter()
        .map(|d| {
            let field = d["headers"]["sluice.error.field"].as_str().unwrap_or("");
            (
                header(d, "sluice.source.offset").to_string(),
                header(d, "sluice.error.stage").to_string(),
                header(d, "sluice.error.code").to_string(),
                field.to_string(),
            )
        })
        .collect()
}

fn expected_reasons(list: &[(&str, &str, &str, &str)]) -> Reasons {
    list.iter()
        .map(|(o, s, c, f)| (o.to_string(), s.to_string(), c.to_string(), f.to_string()))
        .collect()
}

fn header<'a>(d: &'a Value, name: &str) -> &'a str {
    d["headers"][name]
        .as_str()
        .unwrap_or_else(|| panic!("no header {name} in {d}"))
}

#[test]
fn seed_events_land_and_invalid_ones_are_dead_lettered() {
    let s = Setup::new("seed");
    let events = retail_events_file();
    let produced = s.produce_file("1");
    assert_eq!(produced.delivered, 10);

    let before = chrono_now_micros();
    let out = s.run(&[]);
    let after = chrono_now_micros();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("10 records read, 5 rows written, 5 dead-lettered"),
        "{}",
        text(&out)
    );
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(progress.len(), 1, "{}", text(&out));
    assert_eq!(progress[0]["input_rows"], 10);
    assert_eq!(progress[0]["dead_lettered_by_code"]["invalid_quantity"], 1);
    let by_stage = &progress[0]["dead_lettered_by_stage"];
    assert_eq!(by_stage["validate"]["invalid_quantity"], 1, "{by_stage}");
    let stages = by_stage.as_object().unwrap().values();
    let counts = stages.flat_map(|codes| codes.as_object().unwrap().values());
    let counted: u64 = counts.map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(counted, 5, "every dead letter by its stage: {by_stage}");
    // Each lookup table with the version the batch read, as its commit records it.
    let lookups = progress[0]["lookups"].as_object().unwrap();
    assert!(!lookups.is_empty(), "{}", progress[0]);
    for (name, lookup) in lookups {
        assert_eq!(lookup["version"]["kind"], "topic", "{name}: {lookup}");
    }
    // The stage's own account: what reached it and its verdicts by code.
    let stage = &progress[0]["stages"]["validate"];
    assert_eq!(
        (
            stage["events"].as_u64(),
            stage["kept"].as_u64(),
            stage["rejected"].as_u64()
        ),
        (Some(10), Some(5), Some(5)),
        "{stage}"
    );
    let by_code: u64 = stage["verdicts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(code, n)| {
            assert!(code.starts_with("rejected:"), "{code}");
            n.as_u64().unwrap()
        })
        .sum();
    assert_eq!(by_code, 5);
    assert_eq!(stage["verdicts"]["rejected:invalid_quantity"], 1);
    assert!(stage["calls"].as_u64().unwrap() >= 1);
    for phase in [
        "poll",
        "plugins",
        "encode",
        "dead_letter",
        "write",
        "commit",
        "total",
    ] {
        assert!(progress[0]["durations_ms"][phase].is_u64(), "{phase}");
    }
    // CPU per phase: the parts add up to the total, and the plugins and the commit cost
    // something.
    let cpu = &progress[0]["cpu_us"];
    let part = |phase: &str| {
        cpu[phase]
            .as_u64()
            .unwrap_or_else(|| panic!("{phase}: {cpu}"))
    };
    let parts: u64 = [
        "read", "plugins", "encode", "route", "send", "write", "commit",
    ]
    .iter()
    .map(|p| part(p))
    .sum();
    assert!(
        part("reader") <= part("read"),
        "the reading thread's CPU is part of read: {cpu}"
    );
    assert_eq!(parts, part("total"), "{cpu}");
    assert!(part("plugins") > 0 && part("commit") > 0, "{cpu}");

    let shown = s.show();
    assert_eq!(shown["table"], "tutorial.retail_clickstream_events");
    let rows = rows(&shown);
    let ids: Vec<&str> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "evt_stream_000001",
            "evt_stream_000002",
            "evt_stream_000003",
            "evt_stream_000004",
            "evt_stream_000005"
        ]
    );
    let by_id: BTreeMap<&str, &Value> = ids.iter().copied().zip(rows).collect();
    // The seed's values, typed: timestamps in UTC, DECIMAL(10,2), int.
    let four = by_id["evt_stream_000004"];
    assert_eq!(four["event_time"], "2026-01-09T10:07:00Z");
    assert_eq!(four["price"], "18.00");
    assert_eq!(four["product_name"], "Trail Mug");
    assert_eq!(four["browser"], "Firefox");
    assert_eq!(four["quantity"], Value::Null);
    let five = by_id["evt_stream_000005"];
    assert_eq!(five["quantity"], 1);
    assert_eq!(five["cart_id"], "cart_stream_005");
    assert_eq!(by_id["evt_stream_000003"]["search_query"], "trail mug");
    // Columns in the table's (the tutorial's) order, ingestion_time set by the host, then
    // the enrich stage's.
    let columns: Vec<&str> = shown["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "event_id",
            "event_time",
            "ingestion_time",
            "user_id",
            "session_id",
            "event_type",
            "page_url",
            "referrer_url",
            "search_query",
            "product_id",
            "product_name",
            "category",
            "cart_id",
            "order_id",
            "quantity",
            "price",
            "device_type",
            "browser",
            "traffic_source",
            "tier",
            "country",
            "list_price"
        ]
    );
    assert!(rows.iter().all(|r| r.as_object().unwrap().len() == 22));
    for row in rows {
        let t = parse_rfc3339_micros(row["ingestion_time"].as_str().unwrap());
        assert!(
            before <= t && t <= after,
            "ingestion_time {t} not within the run [{before}, {after}]"
        );
    }

    // Each invalid kind is in the dead-letter topic with its reason and origin.
    let dead = dead_letters(&shown);
    assert_eq!(
        reasons(dead),
        expected_reasons(&[
            ("5", "validate", "missing_required_field", "user_id"),
            ("6", "validate", "invalid_quantity", "quantity"),
            ("7", "validate", "invalid_event_time", "event_time"),
            ("8", "validate", "invalid_price", "price"),
            ("9", "validate", "malformed_json", ""),
        ])
    );
    let lines: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    for d in dead {
        let offset: usize = header(d, "sluice.source.offset").parse().unwrap();
        assert_eq!(
            d["value"].as_str().unwrap(),
            lines[offset],
            "the original value is kept"
        );
        assert_eq!(header(d, "sluice.source.topic"), s.topic);
        assert_eq!(header(d, "sluice.source.partition"), "0");
        assert_eq!(header(d, "sluice.error.stage"), "validate");
        assert_eq!(header(d, "sluice.stage.digest").len(), 64);
        assert!(!header(d, "sluice.error.message").is_empty());
    }
    assert_eq!(
        rows.len() + dead.len(),
        10,
        "every record is in the table or the dead-letter topic"
    );
    let summary = &shown["snapshot_summary"];
    assert_eq!(
        summary["sluice.offsets"],
        format!("{{\"{}\":{{\"0\":10}}}}", s.topic)
    );
    assert_eq!(summary["sluice.batch-id"], "1");
    // Partitioned by day(event_time): the seed's events are all on 2026-01-09.
    let files = data_files(&s.warehouse);
    assert!(!files.is_empty(), "no data files");
    assert!(
        files
            .iter()
            .all(|f| f.contains("event_time_day=2026-01-09/")),
        "{files:?}"
    );

    // A second run finds nothing new and commits nothing.
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches: 0 records read"),
        "{}",
        text(&out)
    );
    let again = s.show();
    assert_eq!(rows.len(), self::rows(&again).len());
    assert_eq!(dead.len(), dead_letters(&again).len());
    assert_eq!(again["snapshot_summary"]["sluice.batch-id"], "1");

    // pyiceberg, an independent reader, sees the same rows.
    let py = pyiceberg::read_table(&s.warehouse, "tutorial.retail_clickstream_events");
    assert_eq!(py.len(), 5, "{py:?}");
    for row in &py {
        let id = row["event_id"].as_str().unwrap();
        let ours = by_id[id];
        for column in ["user_id", "event_type", "page_url", "browser", "quantity"] {
            assert_eq!(row[column], ours[column], "{id}.{column}");
        }
        let price = row["price"].as_str().map(String::from);
        assert_eq!(price.as_deref(), ours["price"].as_str(), "{id}.price");
        assert_eq!(
            parse_rfc3339_micros(row["event_time"].as_str().unwrap()),
            parse_rfc3339_micros(ours["event_time"].as_str().unwrap()),
            "{id}.event_time"
        );
    }
}

#[test]
fn fail_fast_stops_without_committing() {
    let s = Setup::new("failfast");
    s.produce_file("1");
    let out = s.run(&[("SLUICE_ON_INVALID", "fail")]);
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "event {}/0@5 refused by validate (missing_required_field)",
            s.topic
        )),
        "{}",
        text(&out)
    );
    let shown = s.show();
    assert!(rows(&shown).is_empty());
    assert_eq!(shown["snapshot_summary"], serde_json::json!({}));
}

#[test]
fn a_trapping_plugin_is_contained() {
    let mut s = Setup::new("trap");
    s.edit_example_config(|text| {
        text.replace(
            "[[stages]]\nname = \"validate\"",
            &format!(
                "[[stages]]\nname = \"flaky\"\nplugin = \"{}\"\nparams = {{ mode = \"trap\", trap-offset = \"3\" }}\n\n[[stages]]\nname = \"validate\"",
                plugins::MISBEHAVE
            ),
        )
    });
    s.produce_file("1");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    let ids: BTreeSet<&str> = rows(&shown)
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 4);
    assert!(
        !ids.contains("evt_stream_000004"),
        "the trapping event is not in the table"
    );
    let trapped: Vec<&Value> = dead_letters(&shown)
        .iter()
        .filter(|d| header(d, "sluice.error.stage") == "flaky")
        .collect();
    assert_eq!(trapped.len(), 1);
    assert_eq!(header(trapped[0], "sluice.source.offset"), "3");
    assert_eq!(header(trapped[0], "sluice.error.code"), "plugin_trapped");
    assert!(header(trapped[0], "sluice.error.message").contains("deliberate trap at offset 3"));
    assert_eq!(dead_letters(&shown).len(), 6);
}

#[test]
fn crashes_at_any_point_neither_lose_nor_duplicate() {
    let s = Setup::new("crash");
    let expected = Expected::produce(&s, 11, 3000);

    let small = [("SLUICE_MAX_RECORDS", "250")];
    // Power cuts at each point of a batch: after the dead letters, after the files, after
    // the commit.
    for point in ["after-dead-letter:2", "after-write:3", "after-commit:4"] {
        let out = s.run(&[small[0], ("SLUICE_CRASH_AT", point)]);
        assert!(!out.status.success(), "{point}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("SLUICE_CRASH_AT: aborting"),
            "{}",
            text(&out)
        );
    }
    // A SIGKILL at an arbitrary moment, once batches are flowing.
    let running = s.start(
        &["run", "--available-now"],
        &[("SLUICE_MAX_RECORDS", "100")],
    );
    for _ in 0..3 {
        assert!(
            running.progress(Duration::from_secs(120)).is_some(),
            "the pipeline never committed three batches"
        );
    }
    let (status, _, _) = running.kill();
    assert!(!status.success(), "killed mid-run: {status:?}");

    // The last run finishes the job.
    let out = s.run(&[small[0]]);
    assert!(out.status.success(), "{}", text(&out));
    expected.landed_exactly_once(&s, 3);
}

/// What a run over generated events should leave, computed from the generator, not from
/// sluice.
struct Expected {
    /// The event ids of the valid events.
    valid: BTreeSet<String>,
    /// How many are invalid.
    invalid: usize,
}

impl Expected {
    /// Produces the first `count` events of the generator with `seed` (5% invalid) to the
    /// setup's topic, over three partitions, and says what should land.
    fn produce(s: &Setup, seed: u64, count: usize) -> Expected {
        Expected::produce_numbered(s, seed, count, 0)
    }

    /// As [`Expected::produce`], the events numbered from `first` (`--first-id`).
    fn produce_numbered(s: &Setup, seed: u64, count: usize, first: u64) -> Expected {
        let produced = s.produce(&[
            "--partitions",
            "3",
            "--count",
            &count.to_string(),
            "--seed",
            &seed.to_string(),
            "--invalid-share",
            "0.05",
            "--first-id",
            &first.to_string(),
        ]);
        assert_eq!(produced.delivered, count as u64);
        Expected::numbered(seed, count, first)
    }

    /// `count` events of the generator with `seed`, 5% invalid, numbered from `first`.
    fn numbered(seed: u64, count: usize, first: u64) -> Expected {
        let events: Vec<_> = Generator::new(GeneratorConfig {
            seed,
            invalid_share: 0.05,
            ..GeneratorConfig::default()
        })
        .numbered_from(first)
        .take(count)
        .collect();
        let valid: BTreeSet<String> = events
            .iter()
            .filter(|e| e.kind != EventKind::Invalid)
            .map(|e| {
                serde_json::from_str::<Value>(&e.value).unwrap()["event_id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let invalid = events
            .iter()
            .filter(|e| e.kind == EventKind::Invalid)
            .count();
        assert_eq!(valid.len() + invalid, count);
        Expected { valid, invalid }
    }

    /// Asserts that the table holds exactly the valid events, once each, that every
    /// invalid one was dead-lettered (at least once), and that the last commit's offsets
    /// cover all of them, over `partitions` partitions.
    fn landed_exactly_once(&self, s: &Setup, partitions: usize) {
        let (valid, invalid) = (&self.valid, self.invalid);
        let shown = s.show();
        let ids: Vec<String> = rows(&shown)
            .iter()
            .map(|r| r["event_id"].as_str().unwrap().to_string())
            .collect();
        let unique: BTreeSet<String> = ids.iter().cloned().collect();
        assert_eq!(ids.len(), unique.len(), "no row is duplicated");
        let missing: Vec<&String> = valid.difference(&unique).take(10).collect();
        let extra: Vec<&String> = unique.difference(valid).take(10).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "exactly the valid events are in the table; missing (first 10): {missing:?}, unexpected: {extra:?}"
        );
        // Dead letters are at least once: count distinct origins.
        let origins: BTreeSet<(String, String)> = dead_letters(&shown)
            .iter()
            .map(|d| {
                (
                    header(d, "sluice.source.partition").to_string(),
                    header(d, "sluice.source.offset").to_string(),
                )
            })
            .collect();
        assert_eq!(origins.len(), invalid);
        let total_events = (valid.len() + invalid) as i64;
        assert_eq!(ids.len() + origins.len(), total_events as usize);
        let offsets: Value = serde_json::from_str(
            shown["snapshot_summary"]["sluice.offsets"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        let total: i64 = offsets[&s.topic]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_i64().unwrap())
            .sum();
        assert_eq!(total, total_events);
        assert_eq!(offsets[&s.topic].as_object().unwrap().len(), partitions);
    }
}

#[test]
fn held_triggers_commit_together_and_a_crash_replays_them() {
    let mut s = Setup::new("cadence");
    s.edit_example_config(|text| {
        text.replace(
            "target-file-size =",
            "commit-interval = \"1h\"\nmin-commit-rows = 1000\ntarget-file-size =",
        )
    });
    let expected = Expected::produce(&s, 12, 2900);
    let small = ("SLUICE_MAX_RECORDS", "250");
    // Four triggers are held for the first commit: crashes after its dead letters and
    // after its files leave nothing committed.
    for point in ["after-dead-letter:1", "after-write:1"] {
        let out = s.run(&[small, ("SLUICE_CRASH_AT", point)]);
        assert!(!out.status.success(), "{point}: {}", text(&out));
        let landed = s.try_show().map_or(0, |shown| rows(&shown).len());
        assert_eq!(landed, 0, "{point}: nothing committed");
    }
    let out = s.run(&[small]);
    assert!(out.status.success(), "{}", text(&out));
    let commits: Vec<u64> = progress_lines(&String::from_utf8_lossy(&out.stderr))
        .iter()
        .map(|p| p["input_rows"].as_u64().unwrap())
        .collect();
    // 1000 records per commit; the last 900 when the input ends.
    assert_eq!(commits, [1000, 1000, 900], "{}", text(&out));
    expected.landed_exactly_once(&s, 3);
}

/// The Parquet data files below a warehouse.
fn data_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(data_files(&path));
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(path.display().to_string());
        }
    }
    out
}

fn chrono_now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Parses `2026-01-09T10:07:00Z` or `2026-01-09T10:07:00.123456+00:00` (UTC only).
fn parse_rfc3339_micros(text: &str) -> i64 {
    let t = text.trim_end_matches('Z').trim_end_matches("+00:00");
    let (date, time) = t.split_once(['T', ' ']).unwrap_or_else(|| panic!("{text}"));
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let h: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let micros: i64 = format!("{frac:0<6}")[..6].parse().unwrap();
    // Days from civil (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 86_400 + h[0] * 3600 + h[1] * 60 + h[2]) * 1_000_000) + micros
}

/// The fixtures locate the binary at run time; it must be the one Cargo built for this test.
#[test]
fn the_fixtures_run_the_binary_cargo_built() {
    let canonical = |path: &Path| std::fs::canonicalize(path).unwrap();
    assert_eq!(
        canonical(sluice_binary()),
        canonical(Path::new(env!("CARGO_BIN_EXE_sluice-under-test")))
    );
}

#[test]
fn the_example_pipeline_parses() {
    let config = sluice::pipeline::config::PipelineConfig::load(&example_config()).unwrap();
    // The tutorial's 19 columns and the enrich stage's 3.
    assert_eq!(config.sink.columns.len(), 22);
    assert_eq!(config.sink.partition_by, ["day(event_time)"]);
    assert_eq!(config.stages.len(), 2);
    let lookups: Vec<&str> = config.lookups.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(lookups, ["profiles", "products"]);
}

mod lookups;
mod run;
mod snapshots;

pub(crate) use lookups::feed_lookups;
pub(crate) use snapshots::snapshot_count;
