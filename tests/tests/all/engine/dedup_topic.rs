//! A dedup keyed otherwise than the source (issue 35): events keyed by user, deduplicated
//! by event id. Copies of an event land in other users' partitions, where no member's
//! partitions alone would see both: stage one sends the events to a topic keyed by event
//! id, whose stage deduplicates them, writes the table's rows and sends them on to the
//! window's own topic (the stages compose). Members of each stage, crashes included, give
//! the table and the counts of one process.

use sluice::kafka::partitioner::Partitioner;
use sluice::pipeline::PipelineError;
use sluice::pipeline::crash::{Crash, CrashPoint};
use sluice::sink::memory::MemoryTopics;
use sluice::source::memory::Assignment;

use super::join::{JOIN, join_table};
use super::partitions::BY_USER;
use super::partitions_join::append_profiles;
use super::{Engine, TOPIC, sorted_json};

const PARTITIONS: i32 = 3;

/// 1-minute counts per page.
const PAGES: &str = r#"
[[windows]]
name = "pages"
size = "1m"
group-by = ["page"]
aggregates = [{ name = "views", fn = "count" }]
iceberg = { table = "pages" }
"#;

/// [`BY_USER`]'s events deduplicated by `event_id` alone, counted per page.
fn by_event() -> String {
    let events = &BY_USER[..BY_USER.find("\n[[windows]]").unwrap()];
    let by_event = events.replace(
        "keys = [\"event_id\", \"user_id\"]",
        "keys = [\"event_id\"]",
    );
    by_event + PAGES
}

/// 72 events of 8 users, in time order in each user's partition; every seventh also sent
/// as another user's (the same event id, page and time) in that user's partition, every
/// eleventh twice in a row.
fn engine(name: &str, partitions: bool) -> Engine {
    let mut toml = by_event().replace(
        "topics = [\"clicks\"]",
        "topics = [\"clicks\"]\nmode = \"group\"\nkeyed-by = \"user_id\"",
    );
    if !partitions {
        toml = toml.replace("scale-out = \"partitions\"\n", "");
    }
    let mut engine = Engine::new(name, &toml);
    engine.log.recreate(TOPIC, PARTITIONS);
    engine.topics = MemoryTopics::with_log(&engine.log);
    for i in 0..72u32 {
        let secs = 600 + i * 17;
        let time = format!("2026-07-29T10:{:02}:{:02}Z", secs / 60 % 60, secs % 60);
        let mut users = vec![i % 8];
        if i % 7 == 0 {
            users.push((i + 3) % 8);
        }
        if i % 11 == 0 {
            users.push(i % 8);
        }
        for user in users {
            let user = format!("user_{user}");
            let event = format!(
                r#"{{"event_id":"e{i}","user_id":"{user}","page":"/p{}","timestamp":"{time}"}}"#,
                i % 5
            );
            let p = Partitioner::Murmur2.partition(user.as_bytes(), PARTITIONS);
            engine.log.append(TOPIC, p.unwrap(), None, event.as_bytes());
        }
    }
    engine
}

/// Runs each stage of the plan in turn: first, for each of `crashes` of that stage (its
/// index in the plan), a member owning every partition that crashes at that point of that
/// batch; then members owning `owns`, one after the other, to the end.
fn staged(engine: &Engine, owns: &[&[i32]], crashes: &[(usize, CrashPoint, u64)]) {
    assert_eq!(
        engine.config.plan().len(),
        3,
        "stage one, the dedup's, the window's"
    );
    staged_plan(engine, owns, crashes);
}

/// [`staged`], for any plan.
fn staged_plan(engine: &Engine, owns: &[&[i32]], crashes: &[(usize, CrashPoint, u64)]) {
    let plan = engine.config.plan();
    for (i, stage) in plan.iter().enumerate() {
        let run = |partitions: &[i32], crash: Crash| {
            let assignment = Assignment::new(partitions);
            let mut member = engine.open_member_as(&stage.config, &assignment, crash)?;
            member.take_stage(&engine.topics, stage)?;
            assignment.set(partitions);
            member.run(&Default::default())
        };
        for &(_, point, batch) in crashes.iter().filter(|c| c.0 == i) {
            let crashed = run(&[0, 1, 2], Crash::Fail(point, batch));
            assert!(
                matches!(crashed, Err(PipelineError::Crashed { .. })),
                "stage {i}: {crashed:?}"
            );
        }
        for partitions in owns {
            run(partitions, Crash::Never).unwrap();
        }
    }
}

/// The main table's rows and the window's, without batch ids, sorted.
fn outputs(engine: &Engine) -> (Vec<String>, Vec<String>) {
    let without_batch = |window| {
        let rows = engine.rows(window).into_iter().map(|mut row| {
            row.remove("batch_id");
            row
        });
        sorted_json(rows.collect())
    };
    (without_batch(None), without_batch(Some("pages")))
}

/// What one process reading every partition writes: each event once, whichever copy.
fn alone(name: &str) -> (Vec<String>, Vec<String>) {
    let engine = engine(name, false);
    engine.run().unwrap();
    let (events, pages) = outputs(&engine);
    assert!(pages.len() > 20, "{pages:?}");
    (events, pages)
}

/// The event ids of `rows`, sorted.
fn ids(rows: &[String]) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| serde_json::from_str::<serde_json::Value>(r).unwrap()["event_id"].to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_dedup_by_a_field_the_source_is_not_keyed_by_keeps_each_event_once_across_members() {
    let (events, pages) = alone("dedup-topic-alone");
    assert_eq!(events.len(), 72);
    let engine = engine("dedup-topic-members", true);
    staged(&engine, &[&[0, 1], &[2]], &[]);
    let (got_events, got_pages) = outputs(&engine);
    // Each event once (which user's copy is the first to arrive may differ), and the
    // counts per page of one process.
    assert_eq!(ids(&got_events), ids(&events));
    assert_eq!(got_pages, pages);
    // Stage one wrote no rows: the dedup's stage did, each stage committing its marks.
    assert_eq!(
        engine.config.plan()[1].config.pipeline.name,
        "by-user-dedup"
    );
    assert!(
        engine.topic("dead").is_empty(),
        "nothing late, nothing refused"
    );
}

#[test]
fn crashes_in_any_stage_leave_the_table_and_counts_of_one_process() {
    let (events, pages) = alone("dedup-topic-crashes-alone");
    let resent = (0, CrashPoint::AfterDeadLetter, 4);
    for crashes in [
        vec![resent],
        vec![(1, CrashPoint::AfterState, 5)],
        vec![(1, CrashPoint::AfterCommit, 3)],
        vec![resent, (1, CrashPoint::AfterDeadLetter, 6)],
        vec![(2, CrashPoint::AfterWindowCommit, 4)],
        vec![
            resent,
            (1, CrashPoint::AfterCommit, 8),
            (2, CrashPoint::AfterState, 5),
        ],
    ] {
        let engine = engine("dedup-topic-crashes", true);
        staged(&engine, &[&[1], &[0, 2]], &crashes);
        eprintln!("{crashes:?}");
        let (got_events, got_pages) = outputs(&engine);
        assert_eq!(ids(&got_events), ids(&events), "{crashes:?}");
        assert_eq!(got_pages, pages, "{crashes:?}");
    }
}

/// The engine's join (clicks joined left-outer with the profile updates of the hour
/// before, by user), past a dedup by `event_id`: clicks and profiles keyed by user.
fn join_engine(name: &str, partitions: bool) -> Engine {
    let mut toml = JOIN.replace(
        "topics = [\"clicks\"]",
        "topics = [\"clicks\"]\nmode = \"group\"\nkeyed-by = \"user_id\"",
    ) + "\n[dedup]\nkeys = [\"event_id\"]\n";
    if partitions {
        toml = toml.replace(
            "at-end = \"flush\"",
            "at-end = \"flush\"\nscale-out = \"partitions\"",
        );
    }
    let engine = Engine::new(name, &toml);
    engine.log.recreate(TOPIC, PARTITIONS);
    engine.log.recreate("profiles", PARTITIONS);
    let place = |user: &str| Partitioner::Murmur2.partition(user.as_bytes(), PARTITIONS);
    for i in 0..60u32 {
        let user = format!("user_{}", i % 10);
        let secs = i * 27;
        let time = format!("2026-07-29T10:{:02}:{:02}Z", secs / 60, secs % 60);
        let click = format!(r#"{{"event_id":"e{i}","user_id":"{user}","timestamp":"{time}"}}"#);
        let copies = if i % 7 == 0 { 2 } else { 1 };
        for _ in 0..copies {
            engine
                .log
                .append(TOPIC, place(&user).unwrap(), None, click.as_bytes());
        }
    }
    append_profiles(&engine, PARTITIONS, 0);
    engine
}

/// The main table's rows and the join table's, without batch ids, sorted.
fn joined(engine: &Engine) -> (Vec<String>, Vec<String>) {
    let rows = |rows: Vec<serde_json::Map<String, serde_json::Value>>| {
        let each = rows.into_iter().map(|mut row| {
            row.remove("batch_id");
            row
        });
        sorted_json(each.collect())
    };
    let table = join_table(engine).read_rows().unwrap();
    (rows(engine.rows(None)), rows(table))
}

#[test]
fn a_join_on_another_key_past_the_dedup_crosses_a_topic_co_partitioned_with_its_right_one() {
    let alone = join_engine("dedup-join-alone", false);
    alone.run().unwrap();
    let expected = joined(&alone);
    let tiers = |tier: &str| expected.1.iter().filter(|r| r.contains(tier)).count();
    assert!(tiers("\"gold\"") > 0 && tiers("\"silver\"") > 0 && tiers("\"tier\":null") == 12);
    let mut engine = join_engine("dedup-join-members", true);
    engine.topics = MemoryTopics::with_log(&engine.log);
    let names: Vec<String> = engine
        .config
        .plan()
        .into_iter()
        .map(|s| s.config.pipeline.name)
        .collect();
    assert_eq!(names, ["join", "join-dedup", "join-dedup-enriched"]);
    // Stage one's and the dedup's stage's batches sent again, the join's replayed.
    let crashes = [
        (0, CrashPoint::AfterDeadLetter, 4),
        (1, CrashPoint::AfterDeadLetter, 6),
        (2, CrashPoint::AfterState, 5),
    ];
    staged_plan(&engine, &[&[0, 1], &[2]], &crashes);
    assert_eq!(joined(&engine), expected);
}
