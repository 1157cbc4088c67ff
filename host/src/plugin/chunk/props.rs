//! Randomised properties of the boundary (proptest): records laid out as a chunk can be
//! read back from its columns, and a plugin's answer, whatever it holds, is decoded exactly
//! when it keeps the contract and refused otherwise, never with a panic. `PROPTEST_CASES`
//! cases each (256 by default); `scripts/fuzz` runs them for as long as it is asked to.

use proptest::prelude::*;

use super::super::bindings::sluice::plugin::types::{Rejection as WireRejection, Rewrite};
use super::*;
use crate::record::Header;

fn bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12))
}

fn record() -> impl Strategy<Value = Record> {
    let header = ("[a-z]{0,4}", bytes()).prop_map(|(name, value)| Header { name, value });
    (
        0..3usize,
        any::<i32>(),
        any::<i64>(),
        proptest::option::of(0..i64::MAX),
        bytes(),
        bytes(),
        proptest::collection::vec(header, 0..3),
    )
        .prop_map(
            |(topic, partition, offset, timestamp_ms, key, value, headers)| Record {
                topic: ["clicks", "orders", "é"][topic].into(),
                partition,
                offset,
                timestamp_ms,
                key: key.map(Into::into),
                value: value.map(Into::into),
                headers,
                spans: None,
            },
        )
}

/// Cuts `lengths` (-1: null) out of `bytes`, in order.
fn cut(bytes: &[u8], lengths: &[i32]) -> Vec<Option<Vec<u8>>> {
    let mut at = 0;
    lengths
        .iter()
        .map(|&n| {
            let n = usize::try_from(n).ok()?;
            at += n;
            Some(bytes[at - n..at].to_vec())
        })
        .collect()
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::Keep),
        Just(Action::Rewrite),
        Just(Action::Reject),
        Just(Action::Patch)
    ]
}

/// An answer: mostly one that keeps the contract for its actions, sometimes with events
/// moved, dropped or added; and a number of events near the number of actions.
fn answer() -> impl Strategy<Value = (Verdicts, usize)> {
    let actions = proptest::collection::vec(action(), 0..8);
    let damage = proptest::collection::vec((any::<u8>(), any::<u8>()), 0..3);
    (actions, damage, 0..3usize, 0..24usize).prop_map(|(actions, damage, n_shift, code_len)| {
        let of = |kind: Action| -> Vec<u32> {
            (0..actions.len() as u32)
                .filter(|&i| actions[i as usize] == kind)
                .collect()
        };
        let mut rewrites = of(Action::Rewrite);
        let mut rejections = of(Action::Reject);
        let mut patched = of(Action::Patch);
        for (what, event) in damage {
            let list = match (what / 3) % 3 {
                0 => &mut rewrites,
                1 => &mut rejections,
                _ => &mut patched,
            };
            match what % 3 {
                0 => drop(list.pop()),
                1 => list.push(u32::from(event % 10)),
                _ => list.insert(0, u32::from(event % 10)),
            }
        }
        let n = (actions.len() + n_shift).saturating_sub(1);
        let verdicts = Verdicts {
            actions,
            rewrites: rewrites
                .into_iter()
                .map(|event| Rewrite {
                    event,
                    value: vec![b'v'; code_len],
                })
                .collect(),
            rejections: rejections
                .into_iter()
                .map(|event| WireRejection {
                    event,
                    code: "c".repeat(code_len),
                    message: String::new(),
                    field: None,
                })
                .collect(),
            patches: WirePatches {
                name_lengths: vec![1; patched.len()],
                names: "f".repeat(patched.len()),
                value_lengths: vec![1; patched.len()],
                values: vec![b'1'; patched.len()],
                events: patched,
            },
        };
        (verdicts, n)
    })
}

/// Whether an answer keeps the contract for `n` events: one action per event, and the
/// rewrites and rejections exactly those the actions announce, in order.
fn keeps_the_contract(v: &Verdicts, n: usize) -> bool {
    let marked = |kind: Action| -> Vec<u32> {
        (0..v.actions.len() as u32)
            .filter(|&i| v.actions[i as usize] == kind)
            .collect()
    };
    v.actions.len() == n
        && v.rewrites.iter().map(|r| r.event).collect::<Vec<_>>() == marked(Action::Rewrite)
        && v.rejections.iter().map(|r| r.event).collect::<Vec<_>>() == marked(Action::Reject)
        && v.patches.events == marked(Action::Patch)
}

fn output_bytes(v: &Verdicts) -> u64 {
    let rewrites: usize = v.rewrites.iter().map(|r| r.value.len()).sum();
    let rejections: usize = v.rejections.iter().map(|r| r.code.len()).sum();
    (rewrites + rejections + v.patches.names.len() + v.patches.values.len()) as u64
}

proptest! {
    #[test]
    fn records_can_be_read_back_from_their_chunk(records in proptest::collection::vec(record(), 0..10)) {
        let chunk = Chunk::from_records(&records);
        prop_assert_eq!(chunk.len(), records.len());
        let w = &chunk.wire;
        let keys = cut(&w.keys, &w.key_lengths);
        let values = cut(&w.values, &w.value_lengths);
        for (i, r) in records.iter().enumerate() {
            prop_assert_eq!(&*w.topics[usize::from(w.topic_index[i])], &*r.topic);
            prop_assert_eq!(chunk.position(i), Some(format!("{}/{}@{}", r.topic, r.partition, r.offset)));
            prop_assert_eq!(w.timestamps[i], r.timestamp_ms.unwrap_or(-1));
            prop_assert_eq!(keys[i].as_deref(), r.key.as_deref());
            prop_assert_eq!(values[i].as_deref(), r.value.as_deref());
            let headers: Vec<_> = w.headers.iter().filter(|h| h.event as usize == i).map(|h| (h.name.clone(), h.value.clone())).collect();
            let expected: Vec<_> = r.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect();
            prop_assert_eq!(headers, expected);
        }
        prop_assert!(w.headers.windows(2).all(|h| h[0].event <= h[1].event));
        let distinct: std::collections::BTreeSet<&str> = records.iter().map(|r| &*r.topic).collect();
        prop_assert_eq!(w.topics.len(), distinct.len());
    }

    #[test]
    fn answers_are_decoded_exactly_when_they_keep_the_contract((verdicts, n) in answer(), limit in 0..64u64) {
        let expected = keeps_the_contract(&verdicts, n);
        let too_large = output_bytes(&verdicts) > limit;
        let actions = verdicts.actions.clone();
        let decoded = decode(verdicts, n, ByteSize(limit));
        match decoded {
            Ok(out) => {
                prop_assert!(expected && !too_large);
                let kinds: Vec<Action> = out.iter().map(|v| match v {
                    Verdict::Keep => Action::Keep,
                    Verdict::Rewrite(_) => Action::Rewrite,
                    Verdict::Reject(_) => Action::Reject,
                    Verdict::Patch(_) => Action::Patch,
                }).collect();
                prop_assert_eq!(kinds, actions);
            }
            Err(Failure::OutputTooLarge { .. }) => prop_assert!(too_large),
            Err(Failure::BadAnswer { .. }) => prop_assert!(!expected),
            Err(other) => prop_assert!(false, "{other:?}"),
        }
    }
}
