//! Repartition topics (issue 35): how state keyed by a field the source topic is not keyed
//! by scales out. As Kafka Streams does, the records cross an internal topic keyed by the
//! state's key: *stage one* reads the source's partitions and sends each event to the
//! topic, to the partition its key gives ([`Outlet::event`]); *stage two* reads the
//! topic's partitions, each the task of the keys it holds, and runs the keyed operators.
//!
//! Two things travel with the events:
//!
//! - **Where each event was read** (header [`ORIGIN_HEADER`], `topic/partition@offset`).
//!   Stage one sends at least once: a batch replayed after a crash, or sent by a member
//!   frozen while its partitions moved on, sends its events again, the same events in the
//!   same order. Stage two keeps, per partition of the topic, the last offset it took from
//!   each source partition ([`Seen`]) and drops what is at or below it ([`Arrival::Again`]):
//!   each event is applied once, and none is lost (what was sent is read). Kafka
//!   transactions would do the same on brokers that have them; tansu has none, and this
//!   needs none.
//! - **The watermark.** After each batch, stage one sends every partition of the topic a
//!   *marker* per source partition it read: the newest event time read from it (header
//!   [`EVENT_TIME_HEADER`], no key, no value). Stage two's watermark is kept per source
//!   partition from the markers and the events, so a window still closes on the minimum
//!   over all the source's partitions, as with one process, not on what one partition of
//!   the repartition topic happened to receive.
//! - **The end of a bounded run.** Stage one ending an `available-now` run that flushes its
//!   windows at the end (`at-end = "flush"`) marks each source partition it read to the end
//!   as ended (header [`ENDED_HEADER`]); stage two flushes a partition's windows at its own
//!   end only once every source partition ended ([`Seen::all_ended`]), so that a member's
//!   stage two done before another's stage one does not close windows the other still
//!   fills (their events would be late).
//!
//! The topic is named after the pipeline and the operator ([`topic_name`]) and created
//! with the source topic's partition count; keys are placed by murmur2, as Kafka's Java
//! producers place them, so a repartition topic is co-partitioned with any topic those
//! produce keyed by the same field.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::kafka::partitioner::Partitioner;
use crate::record::Header;
use crate::units::Micros;

/// Header of a record in a repartition topic: where stage one read the event (or, on a
/// marker, the last record read from the partition), `topic/partition@offset`.
pub const ORIGIN_HEADER: &str = "sluice-origin";

/// Header of a marker: the newest event time read from its origin partition, in
/// microseconds since the epoch (empty: none yet).
pub const EVENT_TIME_HEADER: &str = "sluice-event-time";

/// Header of a marker sent at the end of an `available-now` run that flushes: its origin
/// partition was read to the end (no value).
pub const ENDED_HEADER: &str = "sluice-ended";

/// The repartition topic of `operator` (a window's or a join's name, or `dedup`) in
/// `pipeline`.
pub fn topic_name(pipeline: &str, operator: &str) -> String {
    format!("{pipeline}-{operator}-repartition")
}

/// A repartition topic cannot be written as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepartitionError {
    /// A topic needs a partition at least.
    #[error("repartition topic `{topic}`: {partitions} partitions (at least 1)")]
    Partitions {
        /// The topic.
        topic: String,
        /// The count asked for.
        partitions: i32,
    },
}

/// Where stage one read an event: a source partition (`topic/partition`) and an offset.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// The source partition, `topic/partition`.
    pub partition: String,
    /// The offset of the record in it.
    pub offset: i64,
}

impl Origin {
    /// As [`ORIGIN_HEADER`] carries it.
    pub fn header(&self) -> String {
        format!("{}@{}", self.partition, self.offset)
    }

    /// Read back from [`Origin::header`]'s text.
    pub fn parse(text: &str) -> Option<Origin> {
        let (partition, offset) = text.rsplit_once('@')?;
        let (_, number) = partition.rsplit_once('/')?;
        number.parse::<i32>().ok()?;
        Some(Origin {
            partition: partition.to_string(),
            offset: offset.parse().ok()?,
        })
    }
}

/// A record for a repartition topic, with the partition it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repartitioned {
    /// The partition of the repartition topic.
    pub partition: i32,
    /// The key: the event's value of the operator's key (`None` on a marker).
    pub key: Option<Vec<u8>>,
    /// The event as stage one leaves it (`None` on a marker).
    pub value: Option<Vec<u8>>,
    /// [`ORIGIN_HEADER`], and on a marker [`EVENT_TIME_HEADER`].
    pub headers: Vec<(&'static str, Vec<u8>)>,
}

/// Stage one's side of a repartition topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outlet {
    topic: String,
    partitions: i32,
    partitioner: Partitioner,
}

impl Outlet {
    /// Writes to `topic`, of `partitions` partitions, placing keys by murmur2 (as Kafka's
    /// Java producers do).
    pub fn new(topic: &str, partitions: i32) -> Result<Self, RepartitionError> {
        Self::placing(topic, partitions, Partitioner::Murmur2)
    }

    /// [`Outlet::new`], placing keys by `partitioner`.
    pub fn placing(
        topic: &str,
        partitions: i32,
        partitioner: Partitioner,
    ) -> Result<Self, RepartitionError> {
        if partitions < 1 {
            return Err(RepartitionError::Partitions {
                topic: topic.to_string(),
                partitions,
            });
        }
        Ok(Outlet {
            topic: topic.to_string(),
            partitions,
            partitioner,
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Its partition count.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The partition of `key`, by the outlet's partitioner.
    pub fn partition_of(&self, key: &[u8]) -> i32 {
        let placed = self.partitioner.partition(key, self.partitions);
        placed.unwrap_or(0)
    }

    /// An event whose key is `key`, read at `origin`.
    pub fn event(&self, key: &str, value: &[u8], origin: &Origin) -> Repartitioned {
        Repartitioned {
            partition: self.partition_of(key.as_bytes()),
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.to_vec()),
            headers: vec![(ORIGIN_HEADER, origin.header().into_bytes())],
        }
    }

    /// The markers after a batch: for each source partition it read (`read`: the last
    /// record read from it, and the newest event time read from it so far), one to every
    /// partition of the topic, in partition order; those of `ended` say their source
    /// partition was read to the end ([`ENDED_HEADER`]).
    pub fn markers(
        &self,
        read: &BTreeMap<String, (i64, Option<Micros>)>,
        ended: Option<&BTreeSet<String>>,
    ) -> Vec<Repartitioned> {
        let mut markers = Vec::with_capacity(read.len() * self.partitions as usize);
        for partition in 0..self.partitions {
            for (source, &(offset, time)) in read {
                let origin = Origin {
                    partition: source.clone(),
                    offset,
                };
                let time = time.map(|t| t.0.to_string()).unwrap_or_default();
                let mut headers = vec![
                    (ORIGIN_HEADER, origin.header().into_bytes()),
                    (EVENT_TIME_HEADER, time.into_bytes()),
                ];
                if ended.is_some_and(|e| e.contains(source)) {
                    headers.push((ENDED_HEADER, Vec::new()));
                }
                markers.push(Repartitioned {
                    partition,
                    key: None,
                    value: None,
                    headers,
                });
            }
        }
        markers
    }
}

/// What a record read from a repartition topic is, to stage two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// An event taken for the first time, read by stage one at `origin`.
    Event(Origin),
    /// A marker: the newest event time read from `origin`'s partition (`None`: none yet).
    Marker {
        /// The source partition and the last record read from it.
        origin: Origin,
        /// The newest event time read from it.
        time: Option<Micros>,
        /// Whether it was read to the end ([`ENDED_HEADER`]).
        ended: bool,
    },
    /// An event sent again (a replayed batch of stage one, or a member's frozen
    /// meanwhile): at or below the last offset taken from its source partition.
    Again(Origin),
    /// Not stage one's: no origin, or one that cannot be read (what the header said).
    Foreign(String),
}

/// The source partition (`topic/partition`) a record of a repartition topic was read
/// from, if its headers say.
pub fn origin_partition(headers: &[Header]) -> Option<String> {
    let header = headers.iter().find(|h| h.name == ORIGIN_HEADER)?;
    let text = std::str::from_utf8(header.value.as_deref()?).ok()?;
    Origin::parse(text).map(|o| o.partition)
}

/// Stage two's memory of one partition of a repartition topic: the last offset taken
/// from each source partition (`topic/partition` → offset), and which source partitions
/// ended. It is committed with the offsets of the repartition topic it goes with, so that
/// a replayed batch of stage two starts from the same memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// The last offset taken from each source partition.
    pub taken: BTreeMap<String, i64>,
    /// The source partitions an ended marker came from ([`ENDED_HEADER`]), with the last
    /// offset it vouched for: an event or a marker from further on ends that.
    pub ended: BTreeMap<String, i64>,
}

impl Seen {
    /// What a record with `headers` is; an event taken moves its source partition's
    /// offset on.
    pub fn admit(&mut self, headers: &[Header]) -> Arrival {
        let header = |name: &str| headers.iter().find(|h| h.name == name);
        let Some(origin) = header(ORIGIN_HEADER) else {
            return Arrival::Foreign(format!("no `{ORIGIN_HEADER}` header"));
        };
        let text = origin.value.as_deref().unwrap_or_default();
        let text = String::from_utf8_lossy(text);
        let Some(origin) = Origin::parse(&text) else {
            return Arrival::Foreign(format!("`{ORIGIN_HEADER}` is `{text}`"));
        };
        if let Some(time) = header(EVENT_TIME_HEADER) {
            let text = String::from_utf8_lossy(time.value.as_deref().unwrap_or_default());
            let time = match text.as_ref() {
                "" => None,
                t => match t.parse::<i64>() {
                    Ok(micros) => Some(Micros(micros)),
                    Err(_) => return Arrival::Foreign(format!("`{EVENT_TIME_HEADER}` is `{t}`")),
                },
            };
            let ended = header(ENDED_HEADER).is_some();
            self.heard(&origin, ended);
            return Arrival::Marker {
                origin,
                time,
                ended,
            };
        }
        match self.taken.get(&origin.partition) {
            Some(&last) if origin.offset <= last => Arrival::Again(origin),
            _ => {
                self.taken.insert(origin.partition.clone(), origin.offset);
                self.heard(&origin, false);
                Arrival::Event(origin)
            }
        }
    }

    /// `origin` heard from: ended, or not any more if it is past where it ended.
    fn heard(&mut self, origin: &Origin, ended: bool) {
        let at = self.ended.get(&origin.partition).copied();
        if ended {
            let offset = at.map_or(origin.offset, |at| at.max(origin.offset));
            self.ended.insert(origin.partition.clone(), offset);
        } else if at.is_some_and(|at| origin.offset > at) {
            self.ended.remove(&origin.partition);
        }
    }

    /// Whether every one of `origins` (`topic/partition`) ended.
    pub fn all_ended<'a>(&self, mut origins: impl Iterator<Item = &'a str>) -> bool {
        origins.all(|o| self.ended.contains_key(o))
    }

    /// As the commit summary carries it (JSON): the offsets taken alone until a source
    /// partition ended (as older versions wrote it), both fields after.
    pub fn to_json(&self) -> String {
        let json = match self.ended.is_empty() {
            true => serde_json::to_string(&self.taken),
            false => serde_json::to_string(self),
        };
        json.unwrap_or_default()
    }

    /// Read back from [`Seen::to_json`]'s text; `None` if it cannot be read.
    pub fn from_json(text: &str) -> Option<Seen> {
        if let Ok(seen) = serde_json::from_str::<Seen>(text) {
            return Some(seen);
        }
        let taken = serde_json::from_str(text).ok()?;
        Some(Seen {
            taken,
            ended: BTreeMap::new(),
        })
    }
}

#[cfg(test)]
mod tests;
