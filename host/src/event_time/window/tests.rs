//! Tumbling and sliding windows, packed keys, distinct sets and the stable hash.

use super::*;
use crate::event_time::config::{AggregateConfig, EmitMode, Function, WindowConfig};

const S: i64 = 1_000_000;

/// `n` seconds of event time.
fn s(n: i64) -> Micros {
    Micros(n * S)
}

/// A window on `k` with every kind of aggregate (of `x`, distinct `u`).
pub(crate) fn config(size: u64, slide: Option<u64>, emit: EmitMode) -> WindowConfig {
    let agg = |name: &str, function, field: Option<&str>| AggregateConfig {
        name: name.into(),
        function,
        field: field.map(String::from),
    };
    WindowConfig {
        name: "w".into(),
        size: Some(std::time::Duration::from_secs(size)),
        gap: None,
        slide: slide.map(std::time::Duration::from_secs),
        group_by: vec!["k".into()],
        aggregates: vec![
            agg("n", Function::Count, None),
            agg("sum", Function::Sum, Some("x")),
            agg("min", Function::Min, Some("x")),
            agg("max", Function::Max, Some("x")),
            agg("avg", Function::Avg, Some("x")),
            agg("users", Function::DistinctCount, Some("u")),
        ],
        emit,
        kafka: None,
        iceberg: None,
    }
}

fn input(key: &str, x: Option<f64>, user: &str) -> WindowInput {
    let x = x.map_or(Input::None, Input::Number);
    let key = PackedKey::pack([Some(key)]);
    WindowInput {
        hash: key_hash(&key),
        key,
        inputs: vec![Input::Present, x, x, x, x, Input::Hash(stable_hash(user))],
    }
}

#[test]
fn tumbling_windows_close_on_the_watermark() {
    let mut op = WindowOperator::new(config(60, None, EmitMode::OnWindowClose));
    assert_eq!(op.starts(s(61)).collect::<Vec<_>>(), vec![s(60)]);
    assert_eq!(op.starts(s(-1)).collect::<Vec<_>>(), vec![s(-60)]);
    op.add(s(10), &input("a", Some(2.0), "u1"), None);
    op.add(s(59), &input("a", Some(5.0), "u1"), None);
    op.add(s(30), &input("a", None, "u2"), None);
    op.add(s(20), &input("b", Some(1.5), "u1"), None);
    op.add(s(60), &input("a", Some(1.0), "u1"), None);
    assert!(op.finish_batch(Some(s(59))).is_empty());
    assert!(op.closes_any(s(60)));
    let mut rows = op.finish_batch(Some(s(60)));
    sort_rows(&mut rows);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].start, rows[0].end), (s(0), s(60)));
    assert_eq!(rows[0].key, vec![Some("a".to_string())]);
    assert_eq!(
        rows[0].values,
        serde_json::json!([3, 7.0, 2.0, 5.0, 3.5, 2])
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(
        rows[1].values,
        serde_json::json!([1, 1.5, 1.5, 1.5, 1.5, 1])
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(op.rows(), 1);
    // An event of a closed window is not added.
    op.add(s(5), &input("a", Some(1.0), "u1"), Some(s(60)));
    assert_eq!(op.rows(), 1);
    let saved = serde_json::to_string(&op.save_ref()).unwrap();
    let mut again = WindowOperator::new(config(60, None, EmitMode::OnWindowClose));
    again.restore(serde_json::from_str(&saved).unwrap());
    assert_eq!(again.last_end(), Some(s(120)));
    let rows = again.finish_batch(Some(s(200)));
    assert_eq!(rows[0].values[0], serde_json::json!(1));
    assert_eq!(rows[0].values[5], serde_json::json!(1));
    assert_eq!(rows[0].values[1], serde_json::json!(1.0));
}

#[test]
fn sliding_windows_and_update_mode() {
    let mut op = WindowOperator::new(config(60, Some(20), EmitMode::Update));
    assert_eq!(
        op.starts(s(65)).collect::<Vec<_>>(),
        vec![s(60), s(40), s(20)]
    );
    op.add(s(65), &input("a", Some(1.0), "u"), None);
    let mut rows = op.finish_batch(None);
    sort_rows(&mut rows);
    assert_eq!(
        rows.iter().map(|r| r.start.0 / S).collect::<Vec<_>>(),
        vec![20, 40, 60]
    );
    // Only the windows that change are emitted again.
    op.add(s(70), &input("a", Some(1.0), "u"), Some(s(81)));
    let mut rows = op.finish_batch(Some(s(81)));
    sort_rows(&mut rows);
    assert_eq!(
        rows.iter()
            .map(|r| (r.start.0 / S, r.values[0].clone()))
            .collect::<Vec<_>>(),
        vec![(40, serde_json::json!(2)), (60, serde_json::json!(2))]
    );
    assert_eq!(op.rows(), 2);
    // Closing emits nothing more in update mode.
    assert!(op.finish_batch(Some(s(1000))).is_empty());
    assert_eq!(op.rows(), 0);
}

#[test]
fn packed_keys_unpack_and_save_like_group_keys() {
    let keys: [GroupKey; 5] = [
        vec![Some("a".into()), None],
        vec![None, Some("a".into())],
        vec![Some("ab".into())],
        vec![Some("a".into()), Some("b".into())],
        vec![Some(String::new()), Some("Zoë \u{1f}\0".into()), None],
    ];
    let packed: Vec<PackedKey> = keys.iter().map(PackedKey::of).collect();
    for (key, p) in keys.iter().zip(&packed) {
        assert_eq!(&p.unpack(), key);
        assert_eq!(
            serde_json::to_string(p).unwrap(),
            serde_json::to_string(key).unwrap()
        );
        let binary = postcard::to_allocvec(p).unwrap();
        assert_eq!(binary, postcard::to_allocvec(key).unwrap());
    }
    for (i, a) in packed.iter().enumerate() {
        for b in &packed[i + 1..] {
            assert_ne!(a, b, "keys pack apart");
        }
    }
}

#[test]
fn distinct_sets_hold_a_few_in_place_then_a_table() {
    let mut set = DistinctSet::default();
    for v in [7, 7, 9, 7] {
        set.insert(v);
    }
    assert!(matches!(set, DistinctSet::Few(2, _)));
    assert_eq!(set.len(), 2);
    for v in [1, 9, 2, 3, 2] {
        set.insert(v);
    }
    assert!(matches!(set, DistinctSet::Many(_)));
    assert_eq!(set.len(), 5);
    let mut values: Vec<u64> = set.iter().collect();
    values.sort_unstable();
    assert_eq!(values, [1, 2, 3, 7, 9]);
    // Saved as a list, read back into either form.
    let json = serde_json::to_string(&set).unwrap();
    let again: DistinctSet = serde_json::from_str(&json).unwrap();
    assert_eq!(again, set);
    let few: DistinctSet = serde_json::from_str("[4]").unwrap();
    assert!(matches!(few, DistinctSet::Few(1, _)));
    assert_ne!(few, set);
    assert_eq!(few, [4].into_iter().collect());
}

/// The hashes are saved in state files: a change to the function would make saved
/// distinct counts wrong after an upgrade. These values were computed once, by this
/// function and by an independent FNV-1a in Python; they must never change.
#[test]
fn hash_is_stable() {
    for (text, hash) in [
        ("", 0xecba_3df2_c338_3c52_u64),
        ("user_1", 0x5053_5a53_7379_1212),
        ("user_2", 0xc237_1a9e_1841_72ad),
        ("u_00042", 0x1550_0a9b_2525_d4fc),
        ("Zoë", 0x2c8b_0eb8_69f8_1c5e),
    ] {
        assert_eq!(stable_hash(text), hash, "stable_hash({text:?})");
    }
}
