//! The unit of data that flows through sluice: one Kafka record, and the positions
//! ([`TopicPartition`], [`Offsets`]) that sources read from and commits record.

mod patch;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

pub use self::patch::{Patch, PatchError, PatchFields};

/// One Kafka header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name.
    pub name: String,
    /// Header value; `None` for a header with a null value.
    pub value: Option<Vec<u8>>,
}

/// One Kafka record with its position. Sources produce these; plugins judge them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The topic it was read from.
    pub topic: Arc<str>,
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Kafka timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
    /// Record key; `None` for a null key.
    pub key: Option<Bytes>,
    /// Record value; `None` for a null value (a tombstone). Read from Kafka, it shares a
    /// buffer with its neighbours (see [`crate::source`]); whatever keeps it beyond its
    /// batch copies it first ([`Record::own_bytes`]).
    pub value: Option<Bytes>,
    /// Headers in producer order.
    pub headers: Vec<Header>,
    /// Where the fields of `value` lie, when the host has read them (once per record, for
    /// the plugins and the encoder alike); see [`Record::field_spans`].
    pub spans: Option<FieldSpans>,
}

/// Where the top-level fields of one value lie, four numbers per field (key offset and
/// length, raw value offset and length), as the host's one reading of the value found
/// them: a slice of a buffer shared by the records read together. Tied to the value it
/// was made for: a record whose value is replaced no longer uses them.
///
/// A cache of what the value says, not part of the record: two records are equal
/// whatever their spans.
#[derive(Clone)]
pub struct FieldSpans {
    all: Arc<Vec<u32>>,
    first: u32,
    count: u32,
    /// The address and length of the value they were made for.
    value: (usize, usize),
}

impl FieldSpans {
    /// `count` fields from `first` (a field index) in `all`, made for `value`.
    pub fn new(all: Arc<Vec<u32>>, first: u32, count: u32, value: &[u8]) -> Self {
        FieldSpans {
            all,
            first,
            count,
            value: (value.as_ptr() as usize, value.len()),
        }
    }
}

impl FieldSpans {
    /// The four numbers of each field.
    pub fn get(&self) -> &[u32] {
        let first = self.first as usize * 4;
        self.all
            .get(first..first + self.count as usize * 4)
            .unwrap_or_default()
    }
}

impl fmt::Debug for FieldSpans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FieldSpans({} fields)", self.count)
    }
}

impl PartialEq for FieldSpans {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for FieldSpans {}

impl Record {
    /// A record with only a value, at `offset` of partition 0 of `topic`.
    pub fn with_value(topic: Arc<str>, offset: i64, value: impl Into<Vec<u8>>) -> Self {
        Record {
            topic,
            partition: 0,
            offset,
            timestamp_ms: None,
            key: None,
            value: Some(Bytes::from(value.into())),
            headers: Vec::new(),
            spans: None,
        }
    }

    /// Where the fields of its value lie, if the host read them from this very value
    /// (four numbers per field; see [`FieldSpans`]).
    pub fn field_spans(&self) -> Option<&[u32]> {
        self.valid_spans().map(FieldSpans::get)
    }

    /// Its [`FieldSpans`], if they were made for its value as it is.
    pub fn valid_spans(&self) -> Option<&FieldSpans> {
        let spans = self.spans.as_ref()?;
        let value = self.value.as_deref()?;
        (spans.value == (value.as_ptr() as usize, value.len())).then_some(spans)
    }

    /// The bytes of its key and value: what a batch's `max-bytes` counts.
    pub fn bytes(&self) -> u64 {
        let len = |b: &Option<Bytes>| b.as_ref().map_or(0, |b| b.len() as u64);
        len(&self.key) + len(&self.value)
    }

    /// Copies its key and value into memory of their own, so that keeping it keeps no
    /// neighbour's bytes (a record read from Kafka shares a buffer with the records read
    /// around it).
    pub fn own_bytes(&mut self) {
        let own = |b: &mut Option<Bytes>| {
            if let Some(bytes) = b {
                *bytes = Bytes::copy_from_slice(bytes);
            }
        };
        own(&mut self.key);
        own(&mut self.value);
        self.spans = None;
    }

    /// `topic/partition@offset`, for messages.
    pub fn position(&self) -> String {
        format!("{}/{}@{}", self.topic, self.partition, self.offset)
    }
}

/// One partition of one topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

/// The next offset to read of each topic-partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offsets(pub BTreeMap<TopicPartition, i64>);

impl Offsets {
    /// The next offset of `tp`, if known.
    pub fn get(&self, tp: &TopicPartition) -> Option<i64> {
        self.0.get(tp).copied()
    }

    /// Sets the next offset of `tp`.
    pub fn set(&mut self, tp: TopicPartition, next: i64) {
        self.0.insert(tp, next);
    }

    /// Records between `self` and `later` (the sum over partitions of the offset gaps).
    pub fn distance_to(&self, later: &Offsets) -> i64 {
        later
            .0
            .iter()
            .map(|(tp, &end)| (end - self.get(tp).unwrap_or(end)).max(0))
            .sum()
    }

    /// Per partition of `later` that this is behind: how many records.
    pub fn behind(&self, later: &Offsets) -> BTreeMap<String, i64> {
        later
            .0
            .iter()
            .map(|(tp, &end)| (tp, (end - self.get(tp).unwrap_or(end)).max(0)))
            .filter(|&(_, lag)| lag > 0)
            .map(|(tp, lag)| (tp.to_string(), lag))
            .collect()
    }

    /// As JSON, `{"topic": {"0": 42, "1": 7}}`: what a commit stores.
    pub fn to_json(&self) -> String {
        let mut map: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
        for (tp, &next) in &self.0 {
            map.entry(&tp.topic)
                .or_default()
                .insert(tp.partition.to_string(), next);
        }
        serde_json::to_string(&map).expect("a map of numbers serialises")
    }

    /// Parses what [`Offsets::to_json`] wrote.
    pub fn from_json(text: &str) -> Result<Offsets, String> {
        let map: BTreeMap<String, BTreeMap<String, i64>> =
            serde_json::from_str(text).map_err(|e| format!("invalid offsets {text:?}: {e}"))?;
        let mut offsets = Offsets::default();
        for (topic, partitions) in map {
            let topic: Arc<str> = topic.into();
            for (partition, next) in partitions {
                let partition = partition
                    .parse()
                    .map_err(|_| format!("invalid partition {partition:?} in offsets"))?;
                offsets.set(
                    TopicPartition {
                        topic: topic.clone(),
                        partition,
                    },
                    next,
                );
            }
        }
        Ok(offsets)
    }
}

impl fmt::Display for Offsets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_capped_on_a_character_boundary() {
        assert_eq!(&*capped("short"), "short");
        let long = "é".repeat(10_000);
        let cut = capped(&long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with(" more bytes cut]"), "{cut}");
        let kept = cut.split('…').next().unwrap().len();
        assert!(cut.contains(&format!("[{} more bytes cut]", long.len() - kept)));
    }
}

/// Why a record left the stream for the dead-letter output: refused by a plugin, failed
/// in one, not fitting the table, or late.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// Stage name, `encode` or `event-time`.
    pub stage: String,
    /// The stage's plugin digest, if a plugin refused it.
    pub digest: Option<String>,
    /// Machine-readable code.
    pub code: String,
    /// Message for people, at most [`MAX_MESSAGE_BYTES`] (see [`capped`]); shared by the
    /// records of one failed plugin call rather than copied per record.
    pub message: Arc<str>,
    /// Offending field.
    pub field: Option<String>,
}

/// The longest reason message kept: a plugin's rejection or error message beyond this is
/// cut (a plugin cannot make each dead letter carry megabytes of text).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// `message`, cut at [`MAX_MESSAGE_BYTES`] on a character boundary with a note of how much
/// was cut.
pub fn capped(message: &str) -> Arc<str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.into();
    }
    let mut end = MAX_MESSAGE_BYTES - 40;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [{} more bytes cut]",
        &message[..end],
        message.len() - end
    )
    .into()
}
