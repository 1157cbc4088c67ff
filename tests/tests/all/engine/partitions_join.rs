//! A stream-stream join with event-time state by partition (`scale-out = "partitions"`,
//! issue 35): clicks and profile updates, both keyed by user in three partitions; partition
//! `p` of both is one task, owned by one member. Two members, and members crashed mid-batch
//! whose batches others replay, give one member's join rows; a right topic partitioned
//! otherwise (another count, another key, or given apart from its left partition) is
//! refused by name.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice::kafka::partitioner::Partitioner;
use sluice::pipeline::crash::{Crash, CrashPoint};
use sluice::pipeline::{PipelineError, RunSummary};
use sluice::source::memory::Assignment;

use super::join::{JOIN, join_table};
use super::{Engine, TOPIC, sorted_json};

const PARTITIONS: i32 = 3;
const PROFILES: &str = "profiles";

/// The join of the engine's join test (clicks joined left-outer with the profile updates
/// of the hour before, by user), with state by partition: the source and the profiles
/// keyed by `user_id`.
fn joined() -> String {
    let partitions = JOIN.replace(
        "at-end = \"flush\"",
        "at-end = \"flush\"\nscale-out = \"partitions\"",
    );
    assert_ne!(partitions, JOIN);
    partitions.replace(
        "topics = [\"clicks\"]",
        "topics = [\"clicks\"]\nmode = \"group\"\nkeyed-by = \"user_id\"",
    )
}

/// Where murmur2 puts `user` (moved by `shift` partitions, for a topic keyed otherwise).
fn partition_of(user: &str, count: i32, shift: i32) -> i32 {
    let p = Partitioner::Murmur2
        .partition(user.as_bytes(), count)
        .unwrap();
    (p + shift) % count
}

/// A new engine: 10 users' 60 clicks from 10:00, 27 seconds apart; two profile updates of
/// each of 8 users (two have none: left-outer rows), one 09:30 – 09:37, one 10:10 – 10:17;
/// each partition in time order (nothing late however batches fall). The profiles topic
/// has `profile_partitions` partitions, its records moved by `shift`.
fn engine(name: &str, profile_partitions: i32, shift: i32) -> Engine {
    let engine = Engine::new(name, &joined());
    engine.log.recreate(TOPIC, PARTITIONS);
    engine.log.recreate(PROFILES, profile_partitions);
    for i in 0..60u32 {
        let user = format!("user_{}", i % 10);
        let secs = i * 27;
        let time = format!("2026-07-29T10:{:02}:{:02}Z", secs / 60, secs % 60);
        let click = format!(r#"{{"event_id":"e{i}","user_id":"{user}","timestamp":"{time}"}}"#);
        let p = partition_of(&user, PARTITIONS, 0);
        engine.log.append(TOPIC, p, None, click.as_bytes());
    }
    append_profiles(&engine, profile_partitions, shift);
    engine
}

/// Two profile updates of each of 8 users, one 09:30 – 09:37, one 10:10 – 10:17, to the
/// profiles topic of `partitions` partitions, keyed by user (moved by `shift`).
pub(super) fn append_profiles(engine: &Engine, partitions: i32, shift: i32) {
    for (hour, minute, tier) in [("09", 30, "silver"), ("10", 10, "gold")] {
        for u in 0..8 {
            let user = format!("user_{u}");
            let time = format!("2026-07-29T{hour}:{:02}:00Z", minute + u);
            let profile =
                format!(r#"{{"user_id":"{user}","tier":"{tier}","updated_at":"{time}"}}"#);
            let p = partition_of(&user, partitions, shift);
            engine.log.append(PROFILES, p, None, profile.as_bytes());
        }
    }
}

/// Runs a member owning `assignment` to the end (or to `crash`).
fn member(engine: &Engine, owns: &[i32], crash: Crash) -> Result<RunSummary, PipelineError> {
    engine
        .open_member(&Assignment::new(owns), crash)?
        .run(&Default::default())
}

/// The table's rows, the join table's rows and the join topic's last value by key, without
/// batch ids (each member numbers its batches its own way).
type Joined = (Vec<String>, Vec<String>, BTreeMap<String, String>);

fn outputs(engine: &Engine) -> Joined {
    let strip = |text: &str| {
        let mut value: Value = serde_json::from_str(text).unwrap();
        if let Some(o) = value.as_object_mut() {
            o.remove("batch_id");
        }
        value.to_string()
    };
    let mut joined: Vec<String> = sorted_json(join_table(engine).read_rows().unwrap())
        .iter()
        .map(|r| strip(r))
        .collect();
    joined.sort();
    let mut topic = BTreeMap::new();
    for r in engine.topic("enriched") {
        let value = strip(r.value.as_ref().unwrap());
        if let Some(before) = topic.insert(r.key.clone().unwrap(), value.clone()) {
            assert_eq!(before, value, "a key sent again with another value");
        }
    }
    (sorted_json(engine.rows(None)), joined, topic)
}

/// One member owning every partition of both topics.
fn alone(name: &str) -> Joined {
    let engine = engine(&format!("{name}-alone"), PARTITIONS, 0);
    let summary = member(&engine, &[0, 1, 2], Crash::Never).unwrap();
    assert_eq!((summary.rows_late, summary.rows_dead_lettered), (0, 0));
    let got = outputs(&engine);
    let tiers = |tier: &str| got.1.iter().filter(|r| r.contains(tier)).count();
    assert!(
        tiers("\"gold\"") > 0 && tiers("\"silver\"") > 0 && tiers("\"tier\":null") == 12,
        "matches of both updates, and the 12 clicks of the users without a profile: {:?}",
        got.1
    );
    got
}

#[test]
fn two_members_with_a_join_give_the_rows_of_one() {
    let expected = alone("partitions-join-two");
    let engine = engine("partitions-join-two", PARTITIONS, 0);
    member(&engine, &[0, 1], Crash::Never).unwrap();
    member(&engine, &[2], Crash::Never).unwrap();
    assert_eq!(outputs(&engine), expected);
}

#[test]
fn a_batch_crashed_mid_commit_is_replayed_with_its_right_records_by_new_owners() {
    let expected = alone("partitions-join-crashed");
    for batch in [3, 6, 9] {
        for point in [CrashPoint::AfterState, CrashPoint::AfterWindowCommit] {
            let engine = engine("partitions-join-crashed", PARTITIONS, 0);
            let crashed = member(&engine, &[0, 1, 2], Crash::Fail(point, batch));
            assert!(
                matches!(crashed, Err(PipelineError::Crashed { .. })),
                "{crashed:?}"
            );
            member(&engine, &[2, 0], Crash::Never).unwrap();
            member(&engine, &[1], Crash::Never).unwrap();
            assert_eq!(outputs(&engine), expected, "{point:?} of batch {batch}");
        }
    }
}

#[test]
fn a_right_topic_partitioned_otherwise_is_refused_by_name() {
    // Partitions 0 and 1 of both: given together, but 3 against 2.
    let counted = engine("partitions-join-count", 2, 0);
    let err = member(&counted, &[0, 1], Crash::Never).unwrap_err();
    assert!(
        matches!(&err, PipelineError::NotCoPartitioned { right, .. } if right == PROFILES),
        "{err}"
    );
    assert!(err.to_string().contains("3 partitions against 2"), "{err}");

    let shifted = engine("partitions-join-key", PARTITIONS, 1);
    let err = member(&shifted, &[0, 1, 2], Crash::Never).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "join right topic `profiles` is not keyed by `user_id` (join `enriched`'s key"
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with("nothing of this batch was committed"),
        "{err}"
    );

    let apart = engine("partitions-join-apart", PARTITIONS, 0);
    let given = Assignment::new(&[0, 1]);
    given.withhold(PROFILES, 1);
    let err = apart
        .open_member(&given, Crash::Never)
        .and_then(|mut p| p.run(&Default::default()))
        .unwrap_err();
    assert!(
        matches!(&err, PipelineError::NotCoPartitioned { .. })
            && err
                .to_string()
                .contains("partitions {0, 1} of the source topic and {0}"),
        "{err}"
    );
}
