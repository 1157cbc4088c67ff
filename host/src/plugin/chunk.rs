//! Crossing the boundary: records → a columnar [`Chunk`] (the WIT layout), and the plugin's
//! columnar answer → one [`Verdict`] per event, checked against the contract.
//!
//! A [`Chunk`] is laid out exactly as the plugin receives it, so a batch that is built as
//! chunks from the start (as the pipeline's batches are) crosses into a plugin with one
//! copy per list and no per-event work on the host.

use std::sync::Arc;

use super::bindings::sluice::plugin::scan::ChunkFields;
use super::bindings::sluice::plugin::types::{
    Action, EventChunk, Header as WireHeader, Patches as WirePatches, Verdicts,
};
use super::error::{EventSpan, Failure};
use crate::record::{FieldSpans, Patch, PatchFields, Record};
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
    /// The event goes on with these fields added or replaced.
    Patch(Patch),
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
    /// The host's reading of the events' fields, laid out for the `scan` import, when the
    /// chunk was laid out with it ([`Chunk::from_records`]).
    fields: Option<ChunkFields>,
}

impl Chunk {
    /// Lays out records as a chunk, with the host's reading of their fields laid out for
    /// plugins that read it: taken from the records that have one
    /// ([`crate::encode::index_fields`]), read here for the others. For a chunk judged by
    /// many plugins (a benchmark's); [`super::Plugin::process_records`] lays out only what
    /// its plugin reads.
    pub fn from_records<'a>(records: impl IntoIterator<Item = &'a Record> + Clone) -> Self {
        let (chunk, fields) = Chunk::laid_out(records, true);
        Chunk { fields, ..chunk }
    }

    /// Lays out records as a chunk without the reading of their fields, and that reading
    /// apart when `read` (made from the records' own where they have one).
    pub fn laid_out<'a>(
        records: impl IntoIterator<Item = &'a Record> + Clone,
        read: bool,
    ) -> (Self, Option<ChunkFields>) {
        let wire = encode(records.clone());
        let fields = read.then(|| fields_of(&wire, records.into_iter().map(Record::valid_spans)));
        (Chunk { wire, fields: None }, fields)
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

    /// Where the fields of each event's value lie, for the `scan` import: a flat JSON
    /// object is read once, so that a plugin need not read it again. A copy of the reading
    /// the chunk was laid out with, if any; else read here.
    pub(crate) fn fields(&self) -> ChunkFields {
        match &self.fields {
            Some(fields) => fields.clone(),
            None => fields_of(&self.wire, std::iter::repeat(None)),
        }
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

/// The fields of `wire`'s events for the `scan` import: for each event, `known`'s spans
/// when it has them, else the host's reading of its value.
fn fields_of<'a>(
    wire: &EventChunk,
    known: impl Iterator<Item = Option<&'a FieldSpans>>,
) -> ChunkFields {
    let mut fields = ChunkFields {
        counts: Vec::with_capacity(wire.value_lengths.len()),
        // A retail event has eighteen fields of four numbers.
        spans: Vec::with_capacity(wire.value_lengths.len() * 72),
    };
    let mut at = 0;
    for (&len, known) in wire.value_lengths.iter().zip(known) {
        let Ok(len) = usize::try_from(len) else {
            fields.counts.push(-1);
            continue;
        };
        let value = &wire.values[at..at + len];
        at += len;
        let count = match known {
            Some(spans) => {
                fields.spans.extend_from_slice(spans.get());
                Some(spans.get().len() as u32 / 4)
            }
            None => crate::encode::flat_spans(value, &mut fields.spans),
        };
        fields
            .counts
            .push(count.and_then(|n| i32::try_from(n).ok()).unwrap_or(-1));
    }
    fields
}

fn encode<'a>(records: impl IntoIterator<Item = &'a Record> + Clone) -> EventChunk {
    // Size every buffer first: values are most of the bytes, and growing a buffer copies it.
    let (mut n, mut key_bytes, mut value_bytes, mut header_count) = (0, 0, 0, 0);
    for r in records.clone() {
        n += 1;
        key_bytes += r.key.as_ref().map_or(0, |k| k.len());
        value_bytes += r.value.as_ref().map_or(0, |v| v.len());
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
    if verdicts.actions.len() != n {
        return bad(format!(
            "answered {} actions for {n} events",
            verdicts.actions.len()
        ));
    }
    let output = output_bytes(&verdicts);
    if output > max_output.0 {
        return Err(Failure::OutputTooLarge {
            bytes: output,
            limit: max_output,
        });
    }
    let mut rewrites = verdicts.rewrites.into_iter().peekable();
    let mut rejections = verdicts.rejections.into_iter().peekable();
    let mut patches = Patches::read(verdicts.patches)?;
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
            Action::Patch => match patches.next(i)? {
                Some(patch) => Verdict::Patch(patch),
                None => {
                    return bad(format!(
                        "event {i} is marked patch but has no fields in order"
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
    if let Some(event) = patches.events.get(patches.at) {
        return bad(format!(
            "patched fields for event {event} do not match a patch action"
        ));
    }
    Ok(out)
}

/// The bytes an answer brings back beyond its actions: rewritten values, rejections'
/// texts, patched names and values.
fn output_bytes(verdicts: &Verdicts) -> u64 {
    let rewrites: usize = verdicts.rewrites.iter().map(|r| r.value.len()).sum();
    let rejections: usize = verdicts
        .rejections
        .iter()
        .map(|r| r.code.len() + r.message.len() + r.field.as_ref().map_or(0, String::len))
        .sum();
    let patches = verdicts.patches.names.len() + verdicts.patches.values.len();
    (rewrites + rejections + patches) as u64
}

fn bad<T>(reason: String) -> Result<T, Failure> {
    Err(Failure::BadAnswer { reason })
}

/// A chunk's patched fields, checked, handed out event by event.
struct Patches {
    fields: Arc<PatchFields>,
    events: Vec<u32>,
    /// The next entry to hand out.
    at: usize,
}

impl Patches {
    /// Checks the columns' lengths, the values' JSON and the names' uniqueness per event.
    fn read(wire: WirePatches) -> Result<Self, Failure> {
        let m = wire.events.len();
        if wire.name_lengths.len() != m || wire.value_lengths.len() != m {
            return bad(format!(
                "patches have {m} events, {} name lengths and {} value lengths",
                wire.name_lengths.len(),
                wire.value_lengths.len()
            ));
        }
        let mut fields = PatchFields::default();
        let (mut name_at, mut value_at) = (0usize, 0usize);
        for j in 0..m {
            let name_end = name_at + wire.name_lengths[j] as usize;
            let value_end = value_at + wire.value_lengths[j] as usize;
            let name = wire.names.get(name_at..name_end);
            let (Some(name), Some(value)) = (name, wire.values.get(value_at..value_end)) else {
                return bad("patched names or values are shorter than their lengths".into());
            };
            fields.push(name, value);
            fields
                .check(j)
                .or_else(|e| bad(format!("event {}: {e}", wire.events[j])))?;
            (name_at, value_at) = (name_end, value_end);
        }
        if name_at != wire.names.len() || value_at != wire.values.len() {
            return bad("patched names or values are longer than their lengths".into());
        }
        Ok(Patches {
            fields: Arc::new(fields),
            events: wire.events,
            at: 0,
        })
    }

    /// The patch of event `i`: its consecutive entries, if the next ones are its.
    fn next(&mut self, i: u32) -> Result<Option<Patch>, Failure> {
        let from = self.at;
        while self.events.get(self.at) == Some(&i) {
            let name = self.fields.get(self.at).0;
            if (from..self.at).any(|k| self.fields.get(k).0 == name) {
                return bad(format!("event {i} patches field `{name}` twice"));
            }
            self.at += 1;
        }
        Ok((self.at > from).then(|| Patch::new(self.fields.clone(), from..self.at)))
    }
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
        a.key = Some(b"k".to_vec().into());
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
            patches: patches(&[]),
        }
    }

    /// Patched fields `(event, name, value)`, in order.
    fn patches(fields: &[(u32, &str, &str)]) -> WirePatches {
        WirePatches {
            events: fields.iter().map(|f| f.0).collect(),
            name_lengths: fields.iter().map(|f| f.1.len() as u32).collect(),
            names: fields.iter().map(|f| f.1).collect(),
            value_lengths: fields.iter().map(|f| f.2.len() as u32).collect(),
            values: fields.iter().flat_map(|f| f.2.bytes()).collect(),
        }
    }

    #[test]
    fn patches_are_read_and_checked() {
        use Action::*;
        let max = ByteSize::mib(1);
        let with = |actions: Vec<Action>, fields: &[(u32, &str, &str)]| {
            let mut a = answer(actions, vec![], vec![]);
            a.patches = patches(fields);
            decode(a, 3, max)
        };
        let ok = with(
            vec![Patch, Keep, Patch],
            &[
                (0, "tier", r#""gold""#),
                (0, "n", "1.50"),
                (2, "tier", "null"),
            ],
        )
        .unwrap();
        let Verdict::Patch(first) = &ok[0] else {
            panic!("{ok:?}")
        };
        assert_eq!(
            first.fields().collect::<Vec<_>>(),
            vec![("tier", &br#""gold""#[..]), ("n", &b"1.50"[..])]
        );
        assert_eq!(ok[1], Verdict::Keep);
        let Verdict::Patch(third) = &ok[2] else {
            panic!("{ok:?}")
        };
        assert_eq!(third.fields().count(), 1);

        for (actions, fields, reason) in [
            (
                vec![Patch, Keep, Keep],
                &[][..],
                "event 0 is marked patch but has no fields",
            ),
            (
                vec![Keep, Keep, Keep],
                &[(1, "a", "1")][..],
                "for event 1 do not match",
            ),
            (
                vec![Patch, Keep, Keep],
                &[(0, "a", "1"), (0, "a", "2")][..],
                "patches field `a` twice",
            ),
            (
                vec![Patch, Keep, Keep],
                &[(0, "a", "gold")][..],
                "event 0: the value of patched field `a` is not JSON",
            ),
            (
                vec![Keep, Patch, Patch],
                &[(2, "a", "1"), (1, "b", "1")][..],
                "event 1 is marked patch",
            ),
        ] {
            match with(actions, fields) {
                Err(Failure::BadAnswer { reason: r }) => assert!(r.contains(reason), "{r}"),
                other => panic!("{reason}: {other:?}"),
            }
        }
        let mut short = answer(vec![Patch, Keep, Keep], vec![], vec![]);
        short.patches = patches(&[(0, "a", "1")]);
        short.patches.values.clear();
        assert!(matches!(
            decode(short, 3, max),
            Err(Failure::BadAnswer { .. })
        ));
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
