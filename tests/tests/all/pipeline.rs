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

#[test]
fn without_plugins_the_table_schema_dead_letters_misfits() {
    let mut s = Setup::new("schema");
    s.edit_example_config(|text| {
        let start = text.find("[[stages]]").unwrap();
        // (the stages and the lookup tables they read)
        let end = text.find("[sink]\n").unwrap();
        // And an unpartitioned table, for the writer without fanout.
        format!("{}{}", &text[..start], &text[end..])
            .replace("partition-by = [\"day(event_time)\"]", "partition-by = []")
    });
    s.produce_file("1");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    // Line 6 lacks user_id, which the table allows: only a plugin can require it.
    assert_eq!(rows(&shown).len(), 6);
    let files = data_files(&s.warehouse);
    assert!(
        !files.is_empty() && files.iter().all(|f| !f.contains("event_time_day=")),
        "{files:?}"
    );
    assert_eq!(
        reasons(dead_letters(&shown)),
        expected_reasons(&[
            ("6", "encode", "type_mismatch", "quantity"),
            ("7", "encode", "invalid_timestamp", "event_time"),
            ("8", "encode", "invalid_decimal", "price"),
            ("9", "encode", "malformed_json", ""),
        ])
    );
}

#[test]
fn interval_trigger_commits_only_new_data_and_stops_cleanly_on_sigterm() {
    let s = Setup::new("interval");
    s.produce_file("2");
    let running = s.start(
        &["run"],
        &[("SLUICE_TRIGGER", "interval"), ("SLUICE_INTERVAL", "1s")],
    );
    let first = running
        .progress(Duration::from_secs(60))
        .expect("a first batch");
    assert_eq!(first["input_rows"], 10);
    // Three intervals with no new data: no batch, no commit.
    assert!(
        running.progress(Duration::from_millis(3500)).is_none(),
        "a batch without new data"
    );
    s.produce_file("2");
    let second = running
        .progress(Duration::from_secs(60))
        .expect("a second batch");
    assert_eq!(
        (second["batch_id"].as_u64(), second["input_rows"].as_u64()),
        (Some(2), Some(10))
    );
    let (exit, stdout, log) = running.terminate();
    assert!(exit.success(), "SIGTERM exits 0: {exit:?}\n{log}");
    assert!(
        stdout.contains("2 batches: 20 records read, 10 rows written, 10 dead-lettered (stopped)"),
        "{stdout}"
    );
    let shown = s.show();
    assert_eq!(shown["snapshot_summary"]["sluice.batch-id"], "2");
    assert_eq!(rows(&shown).len(), 10);
}

#[test]
fn latest_start_then_a_topic_added_later_is_read_from_its_earliest_offset() {
    let mut s = Setup::new("latest");
    let other = format!("{}-more", s.topic);
    let one = format!("topics = [\"{}\"]\nstarting-offsets = \"latest\"", s.topic);
    let two = format!(
        "topics = [\"{}\", \"{other}\"]\nstarting-offsets = \"latest\"",
        s.topic
    );
    let set_topics = |topics: String| {
        move |text: String| {
            text.replace(
                "topics = [\"${KAFKA_TOPIC:-retail-clickstream-events}\"]",
                &topics,
            )
            .replace("starting-offsets = \"earliest\"\n", "")
        }
    };
    s.edit_example_config(set_topics(one));
    s.produce_file("1");
    // A brand-new pipeline starting at `latest` skips what is there: nothing to commit.
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches"),
        "{}",
        text(&out)
    );
    assert!(rows(&s.show()).is_empty());
    // The first start anchored `latest` (offset 10) in the table: the second resumes there.
    let out = s.run(&[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches"),
        "{}",
        text(&out)
    );
    // A pipeline running before records arrive reads them: starting at `latest` means
    // "from when the pipeline first starts".
    let running = s.start(
        &["run"],
        &[("SLUICE_TRIGGER", "interval"), ("SLUICE_INTERVAL", "500ms")],
    );
    running
        .wait_for(
            "resuming from the table's last commit",
            Duration::from_secs(60),
        )
        .expect("the run started at the anchor");
    s.produce_file("1");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Batch 0 is the anchor; batch 1 the first with records.
    while s.show()["snapshot_summary"]["sluice.batch-id"] != "1" {
        assert!(Instant::now() < deadline, "no commit");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (exit, _, log) = running.terminate();
    assert!(exit.success(), "{exit:?}\n{log}");
    let shown = s.show();
    assert_eq!(
        rows(&shown).len(),
        5,
        "only the records produced after the start"
    );
    let offsets = shown["snapshot_summary"]["sluice.offsets"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(offsets, format!("{{\"{}\":{{\"0\":20}}}}", s.topic));

    // A topic added to the pipeline later is read from its earliest offset, although the
    // pipeline once started at `latest`.
    s.topic = other.clone();
    s.produce_file("1");
    s.edit_example_config(set_topics(two));
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(rows(&shown).len(), 10, "{}", text(&out));
    let offsets: Value = serde_json::from_str(
        shown["snapshot_summary"]["sluice.offsets"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(offsets[&other]["0"], 10);
}

#[test]
fn the_same_pipeline_works_with_a_postgresql_catalog() {
    let pg = sluice_tests::postgres::Postgres::start();
    let mut s = Setup::new("postgres");
    let url = pg.url.clone();
    s.edit_example_config(|text| {
        text.replace(
            "type = \"sql\"\nname = \"sluice\"",
            &format!("type = \"sql\"\nname = \"sluice\"\nuri = \"{url}\""),
        )
    });
    s.produce_file("1");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(rows(&shown).len(), 5);
    assert_eq!(dead_letters(&shown).len(), 5);
    assert_eq!(shown["snapshot_summary"]["sluice.batch-id"], "1");
    // The catalog is in PostgreSQL, not in a SQLite file in the warehouse.
    assert!(!s.warehouse.join("catalog.db").exists());
    // A second run resumes from the offsets in the PostgreSQL-cataloged table.
    let out = s.run(&[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches"),
        "{}",
        text(&out)
    );
}

#[test]
fn run_help_documents_every_section() {
    let err = cli::parse(["sluice", "run", "--help"]).unwrap_err();
    let help = err.render().to_string();
    for item in [
        "--config",
        "--available-now",
        "--check",
        "[pipeline]",
        "[source]",
        "[trigger]",
        "[runtime]",
        "[[stages]]",
        "[sink]",
        "[sink.catalog]",
        "[sink.expire-snapshots]",
        "every-commits",
        "[dead-letter]",
        "${VAR:-default}",
        "starting-offsets",
        "max-records",
        "max-bytes",
        "on-invalid",
        "partition-by",
        "ingestion-time-column",
        "[event-time]",
        "max-delay",
        "idle-timeout",
        "late-topic",
        "at-end",
        "[dedup]",
        "[[windows]]",
        "slide",
        "distinct-count",
        "on-window-close",
        "watch-interval",
        "samples",
        "allowed-digests",
        "max-failure-rate",
        "[admin]",
        "max-upload",
    ] {
        assert!(
            help.contains(item),
            "`sluice run --help` does not mention {item}:\n{help}"
        );
    }
}

/// The container files name commands and paths that exist: the compose producer's
/// arguments parse, and the image's default pipeline is in the repository.
#[test]
fn container_files_agree_with_the_code() {
    let compose = std::fs::read_to_string(repo_root().join("docker-compose.yml")).unwrap();
    let producer = &compose[compose.find("\n  producer:").expect("a producer service")..];
    let command = &producer[producer.find("command:").unwrap()..];
    let args: Vec<String> = command
        .lines()
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim_start()[2..].trim().trim_matches('"').to_string())
        .collect();
    assert_eq!(args[0], "produce");
    let invocation = cli::parse(std::iter::once("sluice".to_string()).chain(args)).unwrap();
    assert!(matches!(invocation.cli.command, Sub::Produce(_)));
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("/opt/sluice/examples/retail-clickstream/pipeline.toml"));
    assert!(dockerfile.contains("COPY examples/ /opt/sluice/examples/"));
    assert!(example_config().exists());
    for var in ["KAFKA_BOOTSTRAP", "SLUICE_WAREHOUSE"] {
        assert!(
            compose.contains(var)
                && std::fs::read_to_string(example_config())
                    .unwrap()
                    .contains(var)
        );
    }
}

#[test]
fn the_byte_cap_cuts_batches() {
    let s = Setup::new("bytes");
    s.produce_file("1");
    let sizes: Vec<usize> = std::fs::read_to_string(retail_events_file())
        .unwrap()
        .lines()
        .map(str::len)
        .collect();
    let out = s.run(&[("SLUICE_MAX_BYTES", "1KiB")]);
    assert!(out.status.success(), "{}", text(&out));
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    // Expected cuts, computed from the line sizes: a batch closes once it holds ≥ 1024 bytes.
    let mut expected = Vec::new();
    let (mut n, mut bytes) = (0, 0);
    for size in sizes {
        n += 1;
        bytes += size;
        if bytes >= 1024 {
            expected.push(n);
            (n, bytes) = (0, 0);
        }
    }
    if n > 0 {
        expected.push(n);
    }
    let got: Vec<usize> = progress
        .iter()
        .map(|p| p["input_rows"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got, expected);
    assert!(got.len() > 1);
    assert_eq!(rows(&s.show()).len(), 5);
}

#[test]
fn the_same_pipeline_works_with_a_rest_catalog() {
    let mut s = Setup::new("rest");
    let warehouse = s.warehouse.clone();
    // A REST catalog server, sharing the warehouse folder.
    let server = pyiceberg::RestCatalog::start(&warehouse);
    let url = server.url.clone();
    s.edit_example_config(|text| {
        text.replace(
            "type = \"sql\"\nname = \"sluice\"",
            &format!("type = \"rest\"\nname = \"rest\"\nuri = \"{url}\""),
        )
    });
    s.produce_file("1");
    let out = s.run(&[]);
    let again = s.run(&[]);
    let shown = s.show();
    drop(server);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(rows(&shown).len(), 5);
    assert_eq!(dead_letters(&shown).len(), 5);
    assert_eq!(shown["snapshot_summary"]["sluice.batch-id"], "1");
    assert!(
        String::from_utf8_lossy(&again.stdout).starts_with("0 batches"),
        "{}",
        text(&again)
    );
    assert!(
        !warehouse.join("catalog.db").exists(),
        "no SQLite catalog of sluice's own"
    );
}

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

/// The retail example's enrich stage: a customer's tier and country from the `profiles`
/// lookup table, a product's list price from `products` (both fed from their topics), the
/// tables' versions in the commit; an event whose customer the table lacks keeps those
/// columns empty, and nothing is dead-lettered for it.
#[test]
fn the_retail_example_enriches_events_from_its_lookup_tables() {
    let s = Setup::new("enrich");
    feed_lookups(&s);
    s.produce(&["--count", "1000", "--invalid-share", "0"]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let shown = s.show();
    let rows = shown["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1000, "{}", text(&out));
    let (mut with, mut without) = (0, 0);
    for row in rows {
        let user: u32 = row["user_id"].as_str().unwrap()[5..].parse().unwrap();
        if user < 25_000 {
            assert!(
                row["tier"].is_string() && row["country"].is_string(),
                "{row}"
            );
            with += 1;
        } else {
            assert!(row["tier"].is_null() && row["country"].is_null(), "{row}");
            without += 1;
        }
        assert_eq!(
            row["product_id"].is_null(),
            row["list_price"].is_null(),
            "{row}"
        );
    }
    assert!(with > 0 && without > 0, "{with} enriched, {without} not");
    assert!(dead_letters(&shown).is_empty(), "{shown}");
    let versions: Value = serde_json::from_str(
        shown["snapshot_summary"]["sluice.lookups"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(versions["profiles"]["offsets"]["0"], 25_000, "{versions}");
    assert_eq!(versions["products"]["offsets"]["0"], 4, "{versions}");
}

/// Feeds the retail example's lookup tables: profiles of half the generated events' 50 000
/// users (user_0 to user_24999), and the four products.
pub(crate) fn feed_lookups(s: &Setup) {
    s.ensure_side_topics();
    let produce_to = |topic: &str, shape: &str, count: &str| {
        let args = ["--shape", shape, "--count", count, "--invalid-share", "0"];
        sluice_tests::produce(&s.broker.bootstrap, topic, &args);
    };
    produce_to(&s.side_topic("customers"), "customers", "25000");
    produce_to(&s.side_topic("products"), "products", "4");
}

/// The lookup tables are refreshed while the pipeline runs: events read after new customer
/// profiles arrived in the topic are enriched from them, events read before keep what the
/// table held then, and the last commit records the topic read to its end.
#[test]
fn a_running_pipeline_refreshes_its_lookup_tables_between_batches() {
    use crate::hot_swap::wait_until_committed;

    let s = Setup::new("refresh");
    s.ensure_side_topics();
    let customers = s.side_topic("customers");
    let produce_to = |topic: &str, shape: &str, count: &str| {
        let args = ["--shape", shape, "--count", count, "--invalid-share", "0"];
        sluice_tests::produce(&s.broker.bootstrap, topic, &args);
    };
    produce_to(&customers, "customers", "25000");
    produce_to(&s.side_topic("products"), "products", "4");
    s.produce(&["--count", "500", "--invalid-share", "0", "--seed", "1"]);
    let running = s.start(&["run"], &[("SLUICE_INTERVAL", "300ms")]);
    let mut progress = Vec::new();
    wait_until_committed(&running, &mut progress, 500);

    // Profiles of the other 25 000 users (the first 25 000 again, unchanged), then events.
    let between = chrono_now_micros();
    produce_to(&customers, "customers", "50000");
    s.produce(&["--count", "500", "--invalid-share", "0", "--seed", "2"]);
    wait_until_committed(&running, &mut progress, 1000);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");

    let shown = s.show();
    let (mut before, mut after) = (0, 0);
    for row in rows(&shown) {
        let user: u32 = row["user_id"].as_str().unwrap()[5..].parse().unwrap();
        let read_after = parse_rfc3339_micros(row["ingestion_time"].as_str().unwrap()) > between;
        if user < 25_000 {
            assert!(row["tier"].is_string(), "{row}");
        } else if read_after {
            assert!(row["tier"].is_string(), "refreshed: {row}");
            after += 1;
        } else {
            assert!(row["tier"].is_null(), "before the refresh: {row}");
            before += 1;
        }
    }
    assert!(before > 0 && after > 0, "{before} before, {after} after");
    let versions: Value = serde_json::from_str(
        shown["snapshot_summary"]["sluice.lookups"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(versions["profiles"]["offsets"]["0"], 75_000, "{versions}");
}
