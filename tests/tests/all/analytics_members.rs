//! The analytics example itself with event-time state by partition (issue 35), end to end
//! on tansu and the SQL catalog: events keyed by user, deduplicated by event id (a
//! repartition topic keyed by it, whose stage writes the table), then 1-minute counts per
//! event type, sessions per user and the join with profile updates by user, each past a
//! repartition topic of its own. Members running every stage while events flow, one
//! killed (SIGKILL) and one frozen past its session (SIGSTOP), then a last run that drains
//! and flushes, write the table, window tables and join table that one process writes
//! over the same events.

use serde_json::Value;
use sluice_tests::fixture::Setup;

use super::event_time::analytics_config;
use super::partitions::{
    alone_to_the_end, dead_letters, last_run_alone, members_while_events_flow, produce_with,
    rows_differ,
};

/// The example, shared by partition: a group keyed by user (librdkafka's partitioner, as
/// `sluice produce` places keys), and state by partition.
fn shared_example() -> String {
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let shared = example
        .replace(
            "group-id = \"sluice-clickstream-analytics\"",
            "group-id = \"${SLUICE_GROUP}\"\nmode = \"group\"\nkeyed-by = \"user_id\"\npartitioner = \"crc32\"\nproperties = { \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"500\" }",
        )
        .replace(
            "at-end = \"${SLUICE_AT_END:-keep}\"",
            "at-end = \"${SLUICE_AT_END:-keep}\"\nscale-out = \"partitions\"",
        );
    assert!(shared.contains("\nscale-out = \"partitions\"") && shared.contains("SLUICE_GROUP"));
    shared
}

/// A setup of the shared example: its profiles topic holding 100 updates of the 50 users,
/// keyed by user in 4 partitions as the events are; 1-second batches of at most 150
/// events, a 10-second delay, no partition idle while the test runs.
fn analytics(name: &str) -> Setup {
    let mut s = Setup::new(name);
    s.write_config("pipeline.toml", &shared_example());
    for (k, v) in [
        ("SLUICE_GROUP", format!("{name}-members")),
        ("SLUICE_ANALYTICS_TOPIC", format!("{name}-analytics")),
        ("SLUICE_INTERVAL", "1s".into()),
        ("SLUICE_MAX_RECORDS", "150".into()),
        ("SLUICE_MAX_DELAY", "10s".into()),
        ("SLUICE_IDLE_TIMEOUT", "1h".into()),
    ] {
        s.extra_env.push((k.into(), v));
    }
    let profiles = ["--shape", "profiles", "--partitions", "4", "--count", "100"];
    let sent = sluice_tests::produce(&s.broker.bootstrap, &s.profiles_topic(), &profiles);
    assert_eq!(sent.delivered, 100);
    s
}

/// The rows of the table, the dead letters (where each was read, its code) and the rows of
/// each output table (the two windows', the join's), without the columns that differ from
/// run to run, sorted.
fn outputs(s: &Setup) -> Vec<Vec<String>> {
    let strip = |rows: &Value, drop: &[&str]| {
        let mut rows: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut row = r.as_object().unwrap().clone();
                for column in drop {
                    row.remove(*column);
                }
                Value::Object(row).to_string()
            })
            .collect();
        rows.sort();
        rows
    };
    let shown = s.show();
    let mut all = vec![
        strip(&shown["rows"], &["ingestion_time"]),
        dead_letters(&shown).into_iter().collect(),
    ];
    for output in ["event-type-counts", "user-sessions", "events-with-profiles"] {
        all.push(strip(&s.show_window(output)["rows"], &["batch_id"]));
    }
    all
}

/// Run `k` of the producer ([`produce_with`]), 5% of its events repeating a recent one
/// exactly.
fn produce(s: &Setup, k: u64) {
    assert_eq!(produce_with(s, k, &["--duplicate-share", "0.05"]), 300);
}

#[test]
fn the_analytics_example_shared_by_members_writes_what_one_process_writes() {
    let one = analytics("analytics-one");
    alone_to_the_end(&one, &|k| produce(&one, k));
    let expected = outputs(&one);
    let events = expected[0].len();
    let matched = expected[4].iter().filter(|r| !r.contains("\"tier\":null"));
    assert!(
        events > 750 && expected[1].len() > 20 && expected[2].len() >= 6 && expected[3].len() > 40,
        "{events} events: {expected:?}"
    );
    assert!(matched.count() > events / 2, "{:?}", expected[4]);

    // Members while events flow: two, one killed and replaced by two, one of those frozen
    // past its session; then a last run alone drains every stage and flushes.
    let s = analytics("analytics-members");
    let logs = members_while_events_flow(&s, &|k| produce(&s, k), events);
    last_run_alone(&s, "analytics-last");
    let got = outputs(&s);
    let names = [
        "table",
        "dead letters",
        "event-type-counts",
        "user-sessions",
        "events-with-profiles",
    ];
    let mut differ = String::new();
    for ((name, got), expected) in names.iter().zip(&got).zip(&expected) {
        differ += &rows_differ(name, got, expected);
    }
    assert!(differ.is_empty(), "{differ}\n{}", logs.join("\n----\n"));
}
