//! Randomised properties of the guest's side of the boundary (proptest): a chunk, however
//! malformed, is judged or refused with a message, never with a panic (a panic in a plugin
//! is a trap for the whole chunk); a well-formed chunk gives back each event as the host
//! laid it out, with values checked as UTF-8 one by one. `PROPTEST_CASES` cases each (256
//! by default); `scripts/fuzz` runs them for as long as it is asked to.

use proptest::prelude::*;

use super::*;
use crate::bindings::sluice::plugin::types::Header as WireHeader;

/// What a judge saw of an event: topic, partition, offset, timestamp, key, value,
/// headers, and whether the value is UTF-8 text.
pub(super) type Seen = (
    String,
    i32,
    i64,
    Option<i64>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
    bool,
);

pub(super) fn see(e: &Event<'_>) -> Seen {
    (
        e.topic().to_string(),
        e.partition(),
        e.offset(),
        e.timestamp_ms(),
        e.key().map(<[u8]>::to_vec),
        e.value().map(<[u8]>::to_vec),
        e.headers()
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
        e.value_str().is_ok(),
    )
}

fn bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(
        prop_oneof![any::<u8>(), Just(b'a'), Just(0xc3), Just(0xa9)],
        0..8,
    ))
}

/// One event as the host lays it out: (topic, partition, offset, timestamp, key, value,
/// headers).
type Laid = (
    usize,
    i32,
    i64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn event() -> impl Strategy<Value = Laid> {
    (
        0..2usize,
        any::<i32>(),
        any::<i64>(),
        prop_oneof![Just(-1i64), 0..i64::MAX],
        bytes(),
        bytes(),
        proptest::collection::vec(("[a-z]{0,3}", bytes()), 0..3),
    )
}

fn lay_out(events: &[Laid]) -> EventChunk {
    let lengths = |b: &Option<Vec<u8>>| b.as_ref().map_or(-1, |b| b.len() as i32);
    EventChunk {
        topics: vec!["clicks".into(), "é".into()],
        topic_index: events.iter().map(|e| e.0 as u16).collect(),
        partitions: events.iter().map(|e| e.1).collect(),
        offsets: events.iter().map(|e| e.2).collect(),
        timestamps: events.iter().map(|e| e.3).collect(),
        key_lengths: events.iter().map(|e| lengths(&e.4)).collect(),
        keys: events
            .iter()
            .flat_map(|e| e.4.clone().unwrap_or_default())
            .collect(),
        value_lengths: events.iter().map(|e| lengths(&e.5)).collect(),
        values: events
            .iter()
            .flat_map(|e| e.5.clone().unwrap_or_default())
            .collect(),
        headers: events
            .iter()
            .enumerate()
            .flat_map(|(i, e)| {
                e.6.iter().map(move |(name, value)| WireHeader {
                    event: i as u32,
                    name: name.clone(),
                    value: value.clone(),
                })
            })
            .collect(),
    }
}

/// A chunk of any shape: lists of any lengths, lengths that do not add up, headers for
/// events that do not exist or out of order, topic indexes past the topics.
fn any_chunk() -> impl Strategy<Value = EventChunk> {
    let list = |max: usize| 0..max;
    let header = (0..6u32, "[a-z]{0,2}", bytes()).prop_map(|(event, name, value)| WireHeader {
        event,
        name,
        value,
    });
    (
        (
            proptest::collection::vec(any::<u16>().prop_map(|i| i % 4), list(6)),
            proptest::collection::vec(any::<i32>(), list(6)),
            proptest::collection::vec(any::<i64>(), list(6)),
            proptest::collection::vec(any::<i64>(), list(6)),
        ),
        (
            proptest::collection::vec(-3i32..10, list(6)),
            proptest::collection::vec(any::<u8>(), list(20)),
            proptest::collection::vec(prop_oneof![-3i32..10, Just(i32::MAX)], list(6)),
            proptest::collection::vec(any::<u8>(), list(20)),
            proptest::collection::vec(header, list(5)),
        ),
    )
        .prop_map(
            |(
                (topic_index, partitions, offsets, timestamps),
                (key_lengths, keys, value_lengths, values, headers),
            )| EventChunk {
                topics: vec!["clicks".into(), "orders".into()],
                topic_index,
                partitions,
                offsets,
                timestamps,
                key_lengths,
                keys,
                value_lengths,
                values,
                headers,
            },
        )
}

proptest! {
    #[test]
    fn a_chunk_of_any_shape_is_judged_or_refused(chunk in any_chunk()) {
        let n = chunk.partitions.len();
        match judge_chunk(chunk, |e| { let _ = see(e); let _ = e.json::<serde_json::Value>(); Verdict::Keep }) {
            Ok(verdicts) => prop_assert_eq!(verdicts.actions.len(), n),
            Err(message) => prop_assert!(message.starts_with("malformed chunk: "), "{}", message),
        }
    }

    #[test]
    fn a_well_formed_chunk_gives_back_its_events(events in proptest::collection::vec(event(), 0..8)) {
        let mut seen = Vec::new();
        let verdicts = judge_chunk(lay_out(&events), |e| {
            seen.push(see(e));
            if e.offset() % 2 == 0 { Verdict::Keep } else { Verdict::Rewrite(b"{}".to_vec()) }
        }).unwrap();
        prop_assert_eq!(verdicts.actions.len(), events.len());
        prop_assert_eq!(verdicts.rewrites.iter().map(|r| r.event as usize).collect::<Vec<_>>(), (0..events.len()).filter(|&i| events[i].2 % 2 != 0).collect::<Vec<_>>());
        for (e, s) in events.iter().zip(&seen) {
            let topic = ["clicks", "é"][e.0];
            let utf8 = e.5.as_ref().is_some_and(|v| std::str::from_utf8(v).is_ok());
            let expected: Seen = (topic.into(), e.1, e.2, (e.3 >= 0).then_some(e.3), e.4.clone(), e.5.clone(), e.6.clone(), utf8);
            prop_assert_eq!(s, &expected);
        }
    }
}
