//! A saved state split by partition (issue 35): each partition's share, restored alone and
//! run over that partition's events, gives that partition's part of the rows one process
//! gives; the shares put together are the state again.

use std::time::Duration;

use super::*;
use crate::event_time::join::config::{JoinField, JoinKind};
use crate::event_time::join::{RightFields, row_id};
use crate::event_time::state::split::partition_key;
use crate::kafka::partitioner::Partitioner;

const PARTITIONS: i32 = 3;

/// The partition a producer keyed by `user` puts a record of `user` in.
fn home(user: &[u8]) -> i32 {
    Partitioner::Murmur2.partition(user, PARTITIONS).unwrap()
}

/// A 1-minute window and 30-second sessions by `user`, and a join of events with
/// profiles on `user`: all keyed by the field the topics are keyed by.
fn operators() -> EventTime {
    let window = |name: &str, size: Option<u64>, gap: Option<u64>| WindowConfig {
        name: name.into(),
        size: size.map(Duration::from_secs),
        gap: gap.map(Duration::from_secs),
        slide: None,
        group_by: vec!["user".into()],
        aggregates: vec![AggregateConfig {
            name: "n".into(),
            function: Function::Count,
            field: None,
        }],
        emit: EmitMode::OnWindowClose,
        kafka: None,
        iceberg: None,
    };
    let join = JoinConfig {
        name: "j".into(),
        right_topic: "profiles".into(),
        right_time_field: "ts".into(),
        right_max_delay: Duration::from_secs(5),
        on: vec!["user".into()],
        right_on: None,
        kind: JoinKind::Inner,
        before: Duration::from_secs(60),
        after: Duration::ZERO,
        left_fields: vec![JoinField::Name("id".into())],
        right_fields: vec![JoinField::Name("tier".into())],
        max_rows: 10_000,
        kafka: None,
        iceberg: None,
    };
    EventTime::new(
        &config(),
        None,
        &[
            window("minutes", Some(60), None),
            window("sessions", None, Some(30)),
        ],
    )
    .with_joins(&[join])
}

/// Events of 12 users every 7 seconds from `from` to `to` (users with a gap now and then),
/// as `(partition, fields)`.
fn events(et: &EventTime, from: i64, to: i64) -> Vec<(String, Fields)> {
    let mut out = Vec::new();
    for secs in (from..to).step_by(7) {
        for u in 0..12 {
            if (secs / 7 + u) % 5 == 0 {
                continue;
            }
            let user = format!("u{u}");
            let json = format!(
                r#"{{"id":"{user}-{secs}","ts":{},"user":"{user}"}}"#,
                secs * 1000
            );
            let mut fields = et.fields(Some(json.as_bytes())).unwrap();
            let p = home(user.as_bytes());
            fields.id = row_id("clicks", p, secs * 100 + u);
            out.push((format!("clicks/{p}"), fields));
        }
    }
    out
}

/// A profile of each user at `secs`.
fn profiles(et: &EventTime, secs: i64) -> Vec<(String, RightFields)> {
    (0..12)
        .map(|u| {
            let user = format!("u{u}");
            let json = format!(r#"{{"ts":{},"user":"{user}","tier":"t{u}"}}"#, secs * 1000);
            let mut fields = et.right_fields(0, Some(json.as_bytes())).unwrap();
            let p = home(user.as_bytes());
            fields.id = row_id("profiles", p, secs * 100 + u);
            (format!("profiles/{p}"), fields)
        })
        .collect()
}

/// The rows a batch emitted (join rows with their ids, from the records' positions),
/// sorted.
fn rows(out: &EventTimeOutcome) -> Vec<String> {
    let mut rows: Vec<String> = out
        .emitted
        .iter()
        .enumerate()
        .flat_map(|(w, rows)| {
            rows.iter()
                .map(move |r| format!("{w} {:?} {:?} {:?}", r.start, r.key, r.values))
        })
        .collect();
    rows.extend(out.joined[0].iter().map(|r| format!("j {r:?}")));
    rows.sort();
    rows
}

/// Runs `events` and `right` (only those of `partition`, if given) as one batch at `now`.
fn run(
    et: &mut EventTime,
    events: &[(String, Fields)],
    right: &[(String, RightFields)],
    partition: Option<i32>,
    now: i64,
    flush: bool,
) -> EventTimeOutcome {
    let ours = |p: &str| partition.is_none_or(|n| p.ends_with(&format!("/{n}")));
    let right: Vec<(&str, &RightFields)> = right
        .iter()
        .filter(|(p, _)| ours(p))
        .map(|(p, f)| (p.as_str(), f))
        .collect();
    let left = events
        .iter()
        .filter(|(p, _)| ours(p))
        .map(|(p, f)| (p.as_str(), f));
    et.process_joined(left, &[right], Millis(now), flush)
}

fn saved(et: &EventTime) -> SavedState {
    serde_json::from_str(&serde_json::to_string(&et.save_ref()).unwrap()).unwrap()
}

#[test]
fn each_partitions_share_of_the_state_gives_its_part_of_the_rows() {
    let mut one = operators();
    let (first, second) = (events(&one, 0, 120), events(&one, 120, 300));
    let (early, late) = (profiles(&one, 100), profiles(&one, 150));
    run(&mut one, &first, &early, None, 0, false);
    let state = saved(&one);
    let whole = rows(&run(&mut one, &second, &late, None, 1_000, true));
    assert!(whole.len() > 100, "{}", whole.len());
    assert!(
        whole.iter().any(|r| r.starts_with("j ")),
        "the join matched"
    );

    let mut parts = Vec::new();
    let mut shares = Vec::new();
    for p in 0..PARTITIONS {
        let mut share = state.clone();
        share.retain(&|key| home(key) == p, &|tp| tp.ends_with(&format!("/{p}")));
        let mut alone = operators();
        alone.restore(share.clone());
        parts.extend(rows(&run(&mut alone, &second, &late, Some(p), 1_000, true)));
        shares.push(share);
    }
    parts.sort();
    assert_eq!(parts, whole, "the partitions' rows are the rows");

    let mut together = SavedState::default();
    for share in shares {
        together.absorb(share);
    }
    assert_eq!(
        together.sorted(),
        state.sorted(),
        "the shares are the state"
    );
}

#[test]
fn a_share_holds_only_the_keys_its_partition_owns() {
    let mut et = operators();
    let (first, early) = (events(&et, 0, 120), profiles(&et, 100));
    run(&mut et, &first, &early, None, 0, false);
    let state = saved(&et);
    let mut share = state.clone();
    share.retain(&|key| home(key) == 1, &|tp| tp.ends_with("/1"));
    let groups = &share.windows["minutes"];
    assert!(!groups.is_empty() && groups.len() < state.windows["minutes"].len());
    assert!(groups.iter().all(|g| home(&partition_key(&g.key)) == 1));
    let join = &share.joins["j"];
    assert!(!join.left.is_empty() && !join.right.is_empty(), "{join:?}");
    assert!(
        join.left
            .iter()
            .chain(&join.right)
            .all(|r| home(&partition_key(&r.key)) == 1)
    );
    assert!(
        share.watermark.partitions.keys().all(|tp| tp == "clicks/1"),
        "{:?}",
        share.watermark
    );
    assert_eq!(share.watermark.current, state.watermark.current);
}

#[test]
fn partition_keys_are_a_fields_text_or_the_fields_joined() {
    assert_eq!(&*partition_key(&[Some("u1".into())]), b"u1");
    assert_eq!(&*partition_key(&[None]), b"");
    assert_eq!(
        &*partition_key(&[Some("a".into()), None, Some("b".into())]),
        b"a\x1f\x1fb"
    );
}
