//! A window grouped by another field than the source is keyed by, with state by partition
//! (issue 35): counts per event type over events keyed by user cross a repartition topic,
//! end to end on tansu and the SQL catalog. Two members running both stages while events
//! flow, one of them killed (SIGKILL) and replaced, then a last run that drains and flushes,
//! write the window table that one process writes over the same events.

use std::time::Duration;

use serde_json::Value;
use sluice_tests::fixture::{Setup, text};

use crate::hot_swap::http;

use super::partitions::{BY_USER, TO_THE_END, last_run_alone, produce, rows_differ, wait_for_rows};

/// The partitions test's pipeline (analytics events by user) without its windows and
/// join; 5-second counts per event type instead.
fn by_type_config() -> String {
    let head = &BY_USER[..BY_USER.find("[[windows]]").unwrap()];
    let head = head
        .replace("name = \"by-user\"", "name = \"by-type\"")
        .replace(
            "scale-out = \"partitions\"",
            "scale-out = \"${SLUICE_SCALE_OUT:-partitions}\"",
        );
    head + r#"[[windows]]
name = "type-minutes"
group-by = ["event_type"]
size = "5s"
iceberg = { table = "type_minutes" }
aggregates = [{ name = "events", fn = "count" }, { name = "users", fn = "distinct-count", field = "user_id" }]

[admin]
listen = "${SLUICE_ADMIN_LISTEN:-127.0.0.1:0}"
"#
}

/// A setup of the pipeline with 600 analytics events keyed by user in 4 partitions.
fn by_type(name: &str) -> Setup {
    let mut s = Setup::new(name);
    s.write_config("pipeline.toml", &by_type_config());
    s.extra_env
        .push(("SLUICE_GROUP".into(), format!("{name}-members")));
    for k in 0..2 {
        assert_eq!(produce(&s, k), 300);
    }
    s
}

/// The window table's rows without their batch ids, sorted.
fn counts(s: &Setup) -> Vec<String> {
    let shown = s.show_window("type-minutes");
    let mut rows: Vec<String> = shown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let mut row = r.as_object().unwrap().clone();
            row.remove("batch_id");
            Value::Object(row).to_string()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn members_count_by_a_field_the_source_is_not_keyed_by_as_one_process_does() {
    // One process over every event, the window in it.
    let one = by_type("repartition-one");
    let out = one.run(&[
        TO_THE_END[0],
        TO_THE_END[1],
        ("SLUICE_SCALE_OUT", "standby"),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let expected = counts(&one);
    let events = one.show()["rows"].as_array().unwrap().len();
    assert!(
        expected.len() > 20 && events > 500,
        "{events}: {expected:?}"
    );

    // Two members, one killed and replaced while they work; then a last run, alone in a
    // group of its own, drains both stages and flushes the windows still open.
    let s = by_type("repartition-members");
    let admin = format!("127.0.0.1:{}", sluice_tests::free_port());
    let mut members = vec![s.start(&["run"], &[("SLUICE_ADMIN_LISTEN", &admin)])];
    members.push(s.start(&["run"], &[]));
    wait_for_rows(&s, events / 3, &mut members);
    // Stage one's admin API answers for stage two too (a brief wait after a rebalance
    // aside: within 30 s).
    let probe = |path| http(&admin, "GET", path, None, b"", None);
    let stage_two = || {
        let status: Value = serde_json::from_str(&probe("/status").1).unwrap();
        status["stages"]["by-type-type-minutes"].clone()
    };
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while (stage_two()["state"] != "running" || probe("/readyz").0 != 200)
        && std::time::Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(stage_two()["state"], "running", "{}", stage_two());
    assert_eq!(probe("/readyz"), (200, "ready\n".to_string()));
    let _ = members.remove(0).kill();
    members.push(s.start(&["run"], &[]));
    wait_for_rows(&s, events, &mut members);
    std::thread::sleep(Duration::from_secs(3));
    let logs: Vec<String> = members.into_iter().map(|p| p.terminate().2).collect();
    assert!(
        logs.iter()
            .any(|l| l.contains("events on time go on to a repartition topic")),
        "{}",
        logs.join("\n----\n")
    );
    last_run_alone(&s, "repartition-last");
    let differ = rows_differ("window", &counts(&s), &expected);
    assert!(differ.is_empty(), "{differ}\n{}", logs.join("\n----\n"));
}

#[test]
fn a_repartition_topic_of_another_partition_count_is_refused_by_name() {
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::DefaultProducerContext;
    use sluice::kafka::Connection;
    use sluice::sink::topic::{KafkaTopics, TopicError, TopicTarget, Topics};
    let mock = MockCluster::<DefaultProducerContext>::new(1).unwrap();
    mock.create_topic("p-w-repartition", 4, 1).unwrap();
    let target = TopicTarget {
        topic: "p-w-repartition".into(),
        connection: Connection::new(mock.bootstrap_servers(), Default::default()),
        ack_timeout: Duration::from_secs(10),
    };
    let refused = KafkaTopics.open_partitioned(&target, 24).err();
    assert!(
        matches!(
            refused,
            Some(TopicError::Partitions {
                wanted: 24,
                found: 4,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(KafkaTopics.open_partitioned(&target, 4).is_ok());
}
