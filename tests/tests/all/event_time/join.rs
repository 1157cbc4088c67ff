//! The analytics example's state over runs: the state chain `sluice maintain` must keep,
//! and the stream-stream join of events with profiles through crashes.

use super::*;

/// `sluice maintain` deletes old state files, but never one of the chain that the last
/// commit's state builds on (its snapshot and deltas): the next run recovers from it.
#[test]
fn maintain_keeps_the_state_chain_that_the_next_run_recovers_from() {
    let s = analytics("maintain-chain");
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    // One record per batch: twelve batches, a snapshot at batch 1 and deltas after it.
    let out = s.run(&[("SLUICE_MAX_RECORDS", "1")]);
    assert!(out.status.success(), "{}", text(&out));
    let root = s
        .warehouse
        .join("analytics/_sluice-state/clickstream_events/clickstream-analytics");
    let files = || -> BTreeSet<String> {
        std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let snapshot = files()
        .into_iter()
        .find(|f| f.starts_with("00000000000000000001-") && f.ends_with(".snapshot.bin"))
        .expect("batch 1's snapshot");
    assert!(
        files()
            .iter()
            .any(|f| f.starts_with("00000000000000000012-"))
    );
    for file in files() {
        let old = std::process::Command::new("touch")
            .args(["-d", "2 days ago"])
            .arg(root.join(file))
            .status()
            .unwrap();
        assert!(old.success());
    }
    let out = s.maintain("1d");
    assert!(out.status.success(), "{}", text(&out));
    let left = files();
    assert!(
        !left.contains("00000000000000000001.json"),
        "batch 1's pointer, out of the kept ones, is deleted: {left:?}"
    );
    assert!(
        left.contains(&snapshot),
        "the chain's snapshot is kept: {left:?}"
    );
    let out = s.run(&[("SLUICE_AT_END", "flush")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("restored event-time state"),
        "{}",
        text(&out)
    );
}

/// Profile updates for the analytics example's join (times 2026-07-29T..., one
/// partition, read after the events): user_1 gold 09:30 (within the hour before e1, e3,
/// e6), user_2 silver 09:59 (e2, e5), user_1 platinum 10:02 (e3, e6), user_3 bronze 10:05
/// (user_3's only event, e4, is late: not joined), then user_2 at 09:00, behind the
/// profiles' watermark (10:03) by then: a late profile, dead-lettered.
fn profiles_file(s: &Setup) -> PathBuf {
    let profile = |user: &str, tier: &str, time: &str| {
        format!(
            r#"{{"user_id":"{user}","tier":"{tier}","country":"PT","updated_at":"2026-07-29T{time}.000Z"}}"#
        )
    };
    let lines = [
        profile("user_1", "gold", "09:30:00"),
        profile("user_2", "silver", "09:59:00"),
        profile("user_1", "platinum", "10:02:00"),
        profile("user_3", "bronze", "10:05:00"),
        profile("user_2", "gold", "09:00:00"),
    ];
    std::fs::create_dir_all(&s.warehouse).unwrap();
    let path = s.warehouse.join("profiles.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The rows of the analytics example's join table.
pub(crate) fn join_table_rows(s: &Setup) -> Vec<serde_json::Map<String, Value>> {
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let warehouse = s.warehouse.to_str().unwrap();
    let text = example.replace("${SLUICE_WAREHOUSE:-../../warehouse}", warehouse);
    let config =
        sluice::pipeline::config::PipelineConfig::parse(&text, &analytics_config()).unwrap();
    let catalog = sluice::iceberg::IcebergCatalog::open(&config.sink, &s.warehouse).unwrap();
    let table = sluice::sink::join::table_config(&config.joins[0], &config.sink).unwrap();
    let table = sluice::iceberg::IcebergTable::open(&catalog, table).unwrap();
    table.read_rows().unwrap()
}

/// (event, tier) of the example's join table, sorted; each row checked against its event.
fn joined_rows(s: &Setup) -> Vec<(String, Option<String>)> {
    sorted(join_table_rows(s).iter().map(|r| {
        let tier = r["tier"].as_str().map(String::from);
        assert_eq!(r["profile_updated_at"].is_null(), tier.is_none(), "{r:?}");
        assert!(
            r["timestamp"]
                .as_str()
                .unwrap()
                .starts_with("2026-07-29T10:0"),
            "{r:?}"
        );
        (r["event_id"].as_str().unwrap().to_string(), tier)
    }))
}

fn expected_joined() -> Vec<(String, Option<String>)> {
    let row = |e: &str, tier: Option<&str>| (e.to_string(), tier.map(String::from));
    sorted([
        row("e1", Some("gold")),
        row("e3", Some("gold")),
        row("e6", Some("gold")),
        row("e2", Some("silver")),
        row("e5", Some("silver")),
        row("e3", Some("platinum")),
        row("e6", Some("platinum")),
        row("e7", None),
    ])
}

/// The late profile's dead letters (source offset, code), read from the profiles topic.
fn profile_dead_letters(s: &Setup) -> Vec<(String, String)> {
    let shown = s.show();
    let profiles = s.profiles_topic();
    let distinct: BTreeSet<(String, String)> = shown["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["headers"]["sluice.source.topic"].as_str() == Some(profiles.as_str()))
        .map(|d| {
            let h = |k: &str| d["headers"][k].as_str().unwrap().to_string();
            (h("sluice.source.offset"), h("sluice.error.code"))
        })
        .collect();
    distinct.into_iter().collect()
}

/// The analytics example's join end to end: the events are read first (no profile yet:
/// the events wait in the join state, saved with the table), then the profile updates in a
/// later run, matched against the saved events; the flush at the end emits the event that
/// matched nothing (user_4) with null profile columns. The main table holds the events
/// alone. A crash at points of the profiles' batches, then a run, gives the same outputs.
#[test]
fn the_analytics_example_joins_events_with_profiles_through_crashes() {
    let mut s = analytics("join");
    let events = events_file();
    let small = ("SLUICE_MAX_RECORDS", "4");
    let flush = ("SLUICE_AT_END", "flush");
    let both = |s: &Setup, crash: Option<&str>| {
        s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
        let out = s.run(&[small]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(joined_rows(s), [], "no profile yet");
        let profiles = profiles_file(s);
        let file = profiles.to_str().unwrap();
        sluice_tests::produce(
            &s.broker.bootstrap,
            &s.profiles_topic(),
            &["--partitions", "1", "--input", file],
        );
        if let Some(point) = crash {
            let out = s.run(&[small, flush, ("SLUICE_CRASH_AT", point)]);
            assert!(!out.status.success(), "{point}: {}", text(&out));
            assert!(String::from_utf8_lossy(&out.stderr).contains("SLUICE_CRASH_AT: aborting"));
        }
        let out = s.run(&[small, flush]);
        assert!(out.status.success(), "{}", text(&out));
        out
    };
    let out = both(&s, None);
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    // Batches 4 (four profiles) and 5 (the late one), then the flush.
    assert_eq!(
        progress
            .iter()
            .map(|p| p["input_rows"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [4, 1, 0]
    );
    assert_eq!(sum(&progress, "rows_late"), 1);
    assert_eq!(joined_rows(&s), expected_joined());
    assert_eq!(event_ids(&s.show()), ["e1", "e2", "e3", "e5", "e6", "e7"]);
    assert_eq!(
        profile_dead_letters(&s),
        [("4".to_string(), "late_event".to_string())]
    );
    // The state is bounded: the flush let every event go; a profile goes once the events'
    // watermark (10:33:30 after the flush) is an hour past it: 09:30 went, three stay.
    let state = &progress[2]["event_time"]["state"]["join:events-with-profiles"];
    assert_eq!(state["rows"], 3, "{state}");
    for (round, point) in [
        "after-state:4",
        "after-window-commit:4",
        "after-commit:4",
        "after-window-commit:6",
    ]
    .into_iter()
    .enumerate()
    {
        s.renew(&format!("join-crash{round}"));
        both(&s, Some(point));
        assert_eq!(joined_rows(&s), expected_joined(), "{point}");
        assert_eq!(
            profile_dead_letters(&s),
            [("4".to_string(), "late_event".to_string())],
            "{point}"
        );
    }
}
