use super::*;

#[test]
fn shards_are_spread_and_stable_in_a_process() {
    let mut counts = [0usize; 4];
    for i in 0..40_000 {
        counts[shard_of(hash_str(&format!("user_{i}")), 4)] += 1;
    }
    assert!(
        counts.iter().all(|&n| (9_000..11_000).contains(&n)),
        "{counts:?}"
    );
    assert_eq!(hash_str("a"), hash_str("a"));
    assert_eq!(hash_bytes(b"ab"), hash_bytes(b"ab"));
    assert_eq!(shard_of(u64::MAX, 3), 2);
    assert_eq!(shard_of(12345, 1), 0);
}

#[test]
fn parts_run_in_shard_order_on_threads_or_not() {
    for parallel in [false, true] {
        let out = each(vec![10, 20, 30], parallel, |i, x| (i, x * 2));
        assert_eq!(out, vec![(0, 20), (1, 40), (2, 60)]);
    }
}

mod sharded {
    //! Operators with their keyed state in several shards, run on threads, give exactly
    //! what one shard gives: verdicts, rows, watermarks and the state saved.

    use std::time::Duration;

    use proptest::prelude::*;

    use crate::event_time::config::{
        AggregateConfig, DedupConfig, EmitMode, Function, WindowConfig,
    };
    use crate::event_time::delta::tests::plan;
    use crate::event_time::state::{MemoryStore, SavedState};
    use crate::event_time::tests::config;
    use crate::event_time::window::sort_rows;
    use crate::event_time::{EventTime, Fields};
    use crate::units::Millis;

    fn window(name: &str, slide: Option<u64>, group_by: &str, emit: EmitMode) -> WindowConfig {
        let agg = |name: &str, function, field: Option<&str>| AggregateConfig {
            name: name.into(),
            function,
            field: field.map(String::from),
        };
        WindowConfig {
            name: name.into(),
            size: Some(Duration::from_secs(60)),
            gap: None,
            slide: slide.map(Duration::from_secs),
            group_by: vec![group_by.into()],
            aggregates: vec![
                agg("n", Function::Count, None),
                agg("users", Function::DistinctCount, Some("user")),
                agg("sum", Function::Sum, Some("x")),
                agg("min", Function::Min, Some("x")),
                agg("avg", Function::Avg, Some("x")),
            ],
            emit,
            kafka: None,
            iceberg: None,
        }
    }

    fn operators(emit: EmitMode, threads: usize) -> EventTime {
        let windows = [
            window("by-type", None, "type", emit),
            window("by-user", Some(20), "user", emit),
        ];
        let dedup = DedupConfig {
            keys: vec!["id".into()],
        };
        EventTime::new(&config(), Some(&dedup), &windows)
            .with_threads(threads)
            .always_parallel()
    }

    fn state(et: &EventTime) -> SavedState {
        let saved: SavedState =
            serde_json::from_slice(&serde_json::to_vec(&et.save_ref()).unwrap()).unwrap();
        saved.sorted()
    }

    /// One random event: id, partition, seconds past the batch's base time, type, user, x.
    type Event = (u32, u8, i64, u8, u8, Option<u8>);

    fn fields(et: &EventTime, events: &[Event], base: i64) -> Vec<(String, Fields)> {
        let mut events = events.to_vec();
        // Events come in partition order.
        events.sort_by_key(|e| e.1);
        let types = ["view", "buy", "cart"];
        let event = |&(id, p, secs, ty, user, x): &Event| {
            let x = x.map_or("null".to_string(), |x| format!("{x}.5"));
            let json = format!(
                r#"{{"id":"e{id}","ts":{},"type":"{}","user":"u{user}","x":{x}}}"#,
                (base + secs) * 1000,
                types[usize::from(ty)]
            );
            (format!("t/{p}"), et.fields(Some(json.as_bytes())).unwrap())
        };
        events.iter().map(event).collect()
    }

    type Batch = (Vec<Event>, i64, bool);

    fn batches() -> impl Strategy<Value = Vec<Batch>> {
        let event = (
            0u32..300,
            0u8..3,
            0i64..90,
            0u8..3,
            0u8..40,
            prop::option::of(0u8..9),
        );
        let batch = (
            prop::collection::vec(event, 0..60),
            0i64..40_000,
            prop::bool::weighted(0.05),
        );
        prop::collection::vec(batch, 1..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn shards_on_threads_give_what_one_shard_gives(
            batches in batches(),
            update in any::<bool>(),
            threads in 2usize..6,
        ) {
            let emit = if update { EmitMode::Update } else { EmitMode::OnWindowClose };
            let (mut one, mut many) = (operators(emit, 1), operators(emit, threads));
            let store = MemoryStore::default();
            let mut now = 0;
            for (i, (events, step, flush)) in batches.into_iter().enumerate() {
                let base = i as i64 * 15 - 30;
                let batch = fields(&one, &events, base);
                let events = || batch.iter().map(|(p, f)| (p.as_str(), f));
                now += step;
                let mut expected = one.process(events(), Millis(now), flush);
                let mut got = many.process(events(), Millis(now), flush);
                for rows in expected.emitted.iter_mut().chain(got.emitted.iter_mut()) {
                    sort_rows(rows);
                }
                prop_assert_eq!(&got, &expected, "batch {}", i + 1);
                prop_assert_eq!(state(&many), state(&one));
                // What the shards save is read back by one shard (and the reverse).
                let (saved, _) = many.save(&store, "m", "p", "r", &plan(i as u64 + 1)).unwrap();
                let mut again = operators(emit, 1);
                again.recover(&store, Some(&saved), true, "none", "").unwrap();
                prop_assert_eq!(state(&again), state(&one), "{}", saved);
            }
        }
    }
}
