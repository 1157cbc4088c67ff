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
    engine_of(name, partitions, &by_event(), |_| String::new())
}

/// [`engine`] over `toml` ([`by_event`] changed), the fields `more(i)` says added to
/// event `i`.
fn engine_of(name: &str, partitions: bool, toml: &str, more: impl Fn(u32) -> String) -> Engine {
    let mut toml = toml.replace(
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
        let more = more(i);
        for user in users {
            let user = format!("user_{user}");
            let event = format!(
                r#"{{"event_id":"e{i}","user_id":"{user}","page":"/p{}","timestamp":"{time}"{more}}}"#,
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

/// [`by_event`]'s pipeline with `unknown-fields = "add"`, over events that gain fields as
/// they go: `referrer` from the 15th, `score` from the 30th (a whole number, then from
/// the 50th every other one a fraction, refused), `device.os` from the 45th.
fn evolving_engine(name: &str, partitions: bool) -> Engine {
    let toml = by_event().replace(
        "table = \"events\"",
        "table = \"events\"\nunknown-fields = \"add\"",
    );
    engine_of(name, partitions, &toml, |i| {
        let mut more = String::new();
        if i >= 15 {
            more += &format!(r#","referrer":"r{}""#, i % 3);
        }
        if i >= 30 {
            let fraction = if i >= 50 && i % 2 == 1 { ".5" } else { "" };
            more += &format!(r#","score":{i}{fraction}"#);
        }
        if i >= 45 {
            more += &format!(r#","device":{{"os":"os{}"}}"#, i % 2);
        }
        more
    })
}

/// The main table's rows without `user_id` (which copy of an event is the first to
/// arrive differs) and batch ids, their columns by name (stages may add them in another
/// order), sorted.
fn evolved_rows(engine: &Engine) -> Vec<String> {
    let mut rows: Vec<String> = engine
        .rows(None)
        .into_iter()
        .map(|row| {
            let mut by_name: std::collections::BTreeMap<_, _> = row.into_iter().collect();
            by_name.remove("batch_id");
            by_name.remove("user_id");
            serde_json::to_string(&by_name).unwrap()
        })
        .collect();
    rows.sort();
    rows
}

/// The main table's columns: name and type, by name.
fn columns(engine: &Engine) -> Vec<String> {
    let table = engine.table(None);
    let schema = table.table().metadata().current_schema().clone();
    let mut columns: Vec<String> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name, f.field_type))
        .collect();
    columns.sort();
    columns
}

/// The dead letters: each refused event (its value) and its code, sorted, once each
/// (dead letters are delivered at least once: a batch read again sends its own again).
fn refused(engine: &Engine) -> Vec<String> {
    let mut dead: Vec<String> = engine
        .topic("dead")
        .into_iter()
        .map(|d| format!("{} {:?}", d.headers["sluice.error.code"], d.value))
        .collect();
    dead.sort();
    dead.dedup();
    dead
}

/// Stage one evolves the table's schema (it encodes, to refuse what the table cannot
/// take, as one process would) while the dedup's stage writes the rows and evolves it for
/// the same fields: whichever commits a change second reads its batch again against the
/// new schema. Run concurrently (stage one in a thread, the dedup's members taking turns
/// until it ends), and with stage one stopped after sending a batch whose fields it had
/// not yet added.
#[test]
fn new_fields_evolve_the_table_once_whichever_stage_adds_them_first() {
    let alone = evolving_engine("dedup-evolve-alone", false);
    alone.run().unwrap();
    let expected = (evolved_rows(&alone), outputs(&alone).1, refused(&alone));
    // A whole number made the column a long: fractions are refused (Iceberg widens no
    // long to a double), both copies of an event when refused before the dedup.
    assert_eq!(refused(&alone).len(), 12);
    assert_eq!(expected.0.len(), 61);
    let fields = |row: &str| row.contains("\"referrer\":\"r") && row.contains("\"score\":4");
    assert!(expected.0.iter().any(|r| fields(r) && r.contains("os1")));
    for crash in [
        None,
        Some((CrashPoint::AfterDeadLetter, 3)),
        Some((CrashPoint::AfterDeadLetter, 7)),
    ] {
        let engine = evolving_engine("dedup-evolve-members", true);
        let plan = engine.config.plan();
        let open = |stage: usize, partitions: &[i32], crash: Crash| {
            let assignment = Assignment::new(partitions);
            let config = &plan[stage].config;
            let mut member = engine.open_member_as(config, &assignment, crash).unwrap();
            member.take_stage(&engine.topics, &plan[stage]).unwrap();
            assignment.set(partitions);
            member
        };
        let member = |stage: usize, partitions: &[i32], crash: Crash| {
            open(stage, partitions, crash).run(&Default::default())
        };
        if let Some((point, batch)) = crash {
            let crashed = member(0, &[0, 1, 2], Crash::Fail(point, batch));
            assert!(
                matches!(crashed, Err(PipelineError::Crashed { .. })),
                "{crashed:?}"
            );
            // The dedup's stage reads what stage one sent, fields it had not added yet.
            let first = member(1, &[0, 1, 2], Crash::Never).unwrap();
            assert_eq!(first.columns_added, 1, "{crash:?}");
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut one = open(0, &[0, 1, 2], Crash::Never);
        std::thread::scope(|scope| {
            let one = scope.spawn(|| {
                let ran = one.run(&Default::default());
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                ran
            });
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                member(1, &[0, 1], Crash::Never).unwrap();
                member(1, &[2], Crash::Never).unwrap();
            }
            one.join().unwrap().unwrap();
        });
        member(1, &[0, 1, 2], Crash::Never).unwrap();
        member(2, &[0, 1, 2], Crash::Never).unwrap();
        let got = (evolved_rows(&engine), outputs(&engine).1, refused(&engine));
        assert_eq!(got, expected, "{crash:?}");
        assert_eq!(columns(&engine), columns(&alone), "{crash:?}");
    }
}
