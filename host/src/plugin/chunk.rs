//! Crossing the boundary: records → a columnar [`Chunk`] (the WIT layout), and the plugin's
//! columnar answer → one [`Verdict`] per event, checked against the contract.
//!
//! A [`Chunk`] is laid out exactly as the plugin receives it, so a batch that is built as
//! chunks from the start (as the pipeline's batches are) crosses into a plugin with one
//! copy per list and no per-event work on the host.

use std::sync::Arc;

use super::bindings::sluice::plugin::types::{Action, EventChunk, Header as WireHeader, Verdicts};
use super::error::{EventSpan, Failure};
use crate::record::Record;
use crate::units::ByteSize;

/// What a plugin decided for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The event goes on unchanged.
    Keep,
    /// The event goes on with this new value.
    Rewrite(Vec<u8>),
    /// The event is rejected.
    Reject(Rejection),
}

/// Why a plugin rejected an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Machine-readable code, e.g. `missing_required_field`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// The offending field, if the plugin named one.
    pub field: Option<String>,
}

/// Events in the columnar layout of the WIT contract, ready to cross into a plugin.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub(crate) wire: EventChunk,
}

impl Chunk {
    /// Lays out records as a chunk.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a Record> + Clone) -> Self {
        Chunk {
            wire: encode(records),
        }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.wire.offsets.len()
    }

    /// Whether the chunk has no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position (`topic/partition@offset`) of event `i`.
    pub fn position(&self, i: usize) -> Option<String> {
        let w = &self.wire;
        let topic = w.topics.get(usize::from(*w.topic_index.get(i)?))?;
        Some(format!("{topic}/{}@{}", w.partitions[i], w.offsets[i]))
    }

    /// The span of the chunk's events, for error messages.
    pub fn span(&self) -> EventSpan {
        let n = self.len();
        EventSpan {
            count: n,
            first: self.position(0),
            last: n.checked_sub(1).and_then(|i| self.position(i)),
        }
    }
}

fn encode<'a>(records: impl IntoIterator<Item = &'a Record> + Clone) -> EventChunk {
    // Size every buffer first: values are most of the bytes, and growing a buffer copies it.
    let (mut n, mut key_bytes, mut value_bytes, mut header_count) = (0, 0, 0, 0);
    for r in records.clone() {
        n += 1;
        key_bytes += r.key.as_ref().map_or(0, Vec::len);
        value_bytes += r.value.as_ref().map_or(0, Vec::len);
        header_count += r.headers.len();
    }
    let mut chunk = EventChunk {
        topics: Vec::new(),
        topic_index: Vec::with_capacity(n),
        partitions: Vec::with_capacity(n),
        offsets: Vec::with_capacity(n),
        timestamps: Vec::with_capacity(n),
        key_lengths: Vec::with_capacity(n),
        keys: Vec::with_capacity(key_bytes),
        value_lengths: Vec::with_capacity(n),
        values: Vec::with_capacity(value_bytes),
        headers: Vec::with_capacity(header_count),
    };
    let mut last_topic: Option<(&Arc<str>, u16)> = None;
    for (i, record) in records.into_iter().enumerate() {
        let topic = match last_topic {
            Some((t, index)) if Arc::ptr_eq(t, &record.topic) || **t == *record.topic => index,
            _ => {
                let index = match chunk.topics.iter().position(|t| **t == *record.topic) {
                    Some(t) => t,
                    None => {
                        chunk.topics.push(record.topic.to_string());
                        chunk.topics.len() - 1
                    }
                };
                let index = u16::try_from(index).unwrap_or(u16::MAX);
                last_topic = Some((&record.topic, index));
                index
            }
        };
        chunk.topic_index.push(topic);
        chunk.partitions.push(record.partition);
        chunk.offsets.push(record.offset);
        chunk.timestamps.push(record.timestamp_ms.unwrap_or(-1));
        chunk
            .key_lengths
            .push(append(&mut chunk.keys, record.key.as_deref()));
        chunk
            .value_lengths
            .push(append(&mut chunk.values, record.value.as_deref()));
        for h in &record.headers {
            chunk.headers.push(WireHeader {
                event: i as u32,
                name: h.name.clone(),
                value: h.value.clone(),
            });
        }
    }
    chunk
}

fn append(into: &mut Vec<u8>, bytes: Option<&[u8]>) -> i32 {
    match bytes {
        Some(b) => {
            into.extend_from_slice(b);
            i32::try_from(b.len()).unwrap_or(i32::MAX)
        }
        None => -1,
    }
}

/// Turns a plugin's answer for `n` events into one verdict per event, refusing answers that
/// break the contract or exceed `max_output`.
pub fn decode(verdicts: Verdicts, n: usize, max_output: ByteSize) -> Result<Vec<Verdict>, Failure> {
    let bad = |reason: String| Err(Failure::BadAnswer { reason });
    if verdicts.actions.len() != n {
        return bad(format!(
            "answered {} actions for {n} events",
            verdicts.actions.len()
        ));
    }
    let output: u64 = verdicts
        .rewrites
        .iter()
        .map(|r| r.value.len() as u64)
        .sum::<u64>()
        + verdicts
            .rejections
            .iter()
            .map(|r| {
                (r.code.len() + r.message.len() + r.field.as_ref().map_or(0, String::len)) as u64
            })
            .sum::<u64>();
    if output > max_output.0 {
        return Err(Failure::OutputTooLarge {
            bytes: output,
            limit: max_output,
        });
    }
    let mut rewrites = verdicts.rewrites.into_iter().peekable();
    let mut rejections = verdicts.rejections.into_iter().peekable();
    let mut out = Vec::with_capacity(n);
    for (i, action) in verdicts.actions.into_iter().enumerate() {
        let i = i as u32;
        let verdict = match action {
            Action::Keep => Verdict::Keep,
            Action::Rewrite => match rewrites.next_if(|r| r.event == i) {
                Some(r) => Verdict::Rewrite(r.value),
                None => {
                    return bad(format!(
                        "event {i} is marked rewrite but has no rewrite in order"
                    ));
                }
            },
            Action::Reject => match rejections.next_if(|r| r.event == i) {
                Some(r) => Verdict::Reject(Rejection {
                    code: r.code,
                    message: r.message,
                    field: r.field,
                }),
                None => {
                    return bad(format!(
                        "event {i} is marked reject but has no rejection in order"
                    ));
                }
            },
        };
        out.push(verdict);
    }
    if let Some(r) = rewrites.next() {
        return bad(format!(
            "rewrite for event {} does not match a rewrite action",
            r.event
        ));
    }
    if let Some(r) = rejections.next() {
        return bad(format!(
            "rejection for event {} does not match a reject action",
            r.event
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::super::bindings::sluice::plugin::types::{Rejection as WireRejection, Rewrite};
    use super::*;
    use crate::record::Header;

    #[test]
    fn records_become_columns() {
        let clicks: Arc<str> = "clicks".into();
        let mut a = Record::with_value(clicks.clone(), 5, b"{}".to_vec());
        a.key = Some(b"k".to_vec());
        a.headers.push(Header {
            name: "h".into(),
            value: None,
        });
        let mut b = Record::with_value("orders".into(), 9, b"[1]".to_vec());
        b.value = None;
        b.timestamp_ms = Some(42);
        let c = Record::with_value(clicks, 6, b"x".to_vec());
        let chunk = Chunk::from_records([&a, &b, &c]);
        assert_eq!(chunk.len(), 3);
        assert_eq!(
            chunk.span().to_string(),
            "3 events (clicks/0@5 .. clicks/0@6)"
        );
        let chunk = chunk.wire;
        assert_eq!(chunk.topics, vec!["clicks", "orders"]);
        assert_eq!(chunk.topic_index, vec![0, 1, 0]);
        assert_eq!(chunk.offsets, vec![5, 9, 6]);
        assert_eq!(chunk.timestamps, vec![-1, 42, -1]);
        assert_eq!(chunk.key_lengths, vec![1, -1, -1]);
        assert_eq!(chunk.value_lengths, vec![2, -1, 1]);
        assert_eq!(chunk.values, b"{}x");
        assert_eq!(chunk.headers.len(), 1);
    }

    fn answer(actions: Vec<Action>, rewrites: Vec<u32>, rejections: Vec<u32>) -> Verdicts {
        Verdicts {
            actions,
            rewrites: rewrites
                .into_iter()
                .map(|event| Rewrite {
                    event,
                    value: b"v".to_vec(),
                })
                .collect(),
            rejections: rejections
                .into_iter()
                .map(|event| WireRejection {
                    event,
                    code: "c".into(),
                    message: "m".into(),
                    field: None,
                })
                .collect(),
        }
    }

    #[test]
    fn answers_are_checked() {
        use Action::*;
        let max = ByteSize::mib(1);
        let ok = decode(
            answer(vec![Keep, Rewrite, Reject], vec![1], vec![2]),
            3,
            max,
        )
        .unwrap();
        assert_eq!(ok[1], Verdict::Rewrite(b"v".to_vec()));
        assert!(matches!(&ok[2], Verdict::Reject(r) if r.code == "c"));

        for (answer, n) in [
            (answer(vec![Keep, Keep], vec![], vec![]), 3),
            (answer(vec![Keep, Rewrite], vec![0], vec![]), 2),
            (answer(vec![Keep, Keep], vec![0], vec![]), 2),
            (answer(vec![Reject, Keep], vec![], vec![0, 1]), 2),
            (answer(vec![Reject], vec![], vec![]), 1),
        ] {
            assert!(matches!(
                decode(answer, n, max),
                Err(Failure::BadAnswer { .. })
            ));
        }
        let big = answer(vec![Rewrite], vec![0], vec![]);
        assert!(matches!(
            decode(big, 1, ByteSize(0)),
            Err(Failure::OutputTooLarge { bytes: 1, .. })
        ));
    }
}
