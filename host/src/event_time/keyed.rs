//! Whether a source topic is keyed by an operator's state key (issue 35: co-partitioned
//! input needs no shuffle).
//!
//! State can be split by source partition without moving records only when every record
//! of one key value sits in one partition. Kafka does not say how a topic was partitioned,
//! so the records are asked: a topic is keyed by a field when each record sits in the
//! partition that one producer partitioner ([`Partitioner`]: murmur2 for Kafka's Java
//! client, crc32 for librdkafka's default) gives the field's text. One record elsewhere is
//! enough to say the topic is not keyed by it (a producer keyed by something else, or
//! chose partitions itself), and [`Keyed`] names the first such record.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::extract::Scalar;
use crate::kafka::partitioner::Partitioner;

/// A source declared keyed by a field (`[source] keyed-by`): where its value sits among
/// the values an event's reading gives, and how many partitions each topic has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedBy {
    /// The field, as configured.
    pub field: String,
    /// Its slot among the values read from an event.
    pub(super) slot: usize,
    /// Partitions per topic, as the source last said.
    counts: BTreeMap<Arc<str>, i32>,
}

impl KeyedBy {
    /// `field`, read at `slot`; no partition counts yet.
    pub(super) fn new(field: &str, slot: usize) -> Self {
        KeyedBy {
            field: field.to_string(),
            slot,
            counts: BTreeMap::new(),
        }
    }

    /// The topics' partition counts, as the source says now.
    pub fn set_counts(&mut self, counts: BTreeMap<Arc<str>, i32>) {
        self.counts = counts;
    }

    /// The partitions of `topic`, if known.
    pub fn count(&self, topic: &str) -> Option<i32> {
        self.counts.get(topic).copied()
    }

    /// Where each partitioner ([`Partitioner::ALL`]) puts `value`'s text in `topic`:
    /// `None` without a value or a known partition count.
    pub(super) fn place(&self, topic: &str, value: Option<&Scalar>) -> Option<[i32; 2]> {
        let key = value?.text().as_bytes();
        let count = self.count(topic)?;
        Some(Partitioner::ALL.map(|p| p.partition(key, count).unwrap_or(-1)))
    }
}

/// A record no partitioner puts where it is, for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misplaced {
    /// The key's text (lossy for bytes that are not UTF-8).
    pub key: String,
    /// The partition it is in.
    pub partition: i32,
    /// Where each partitioner would have put it, in [`Partitioner::ALL`] order.
    pub expected: [i32; 2],
}

/// What the records seen so far say of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyCheck {
    /// Records with a value of the key.
    checked: u64,
    /// Of them, how many sit where each partitioner would put them ([`Partitioner::ALL`]).
    fits: [u64; 2],
    /// Per partitioner, the first record it would have put elsewhere.
    first_misplaced: [Option<Misplaced>; 2],
}

/// What a [`KeyCheck`] concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keyed {
    /// No record with a value of the key yet.
    Unseen,
    /// Every record sits where this partitioner puts its key (murmur2 first when both
    /// fit, as with a single partition).
    By(Partitioner),
    /// Some do not: the partitioner that fits the most records, how many it misplaces of
    /// how many, and the first it misplaces.
    Not {
        /// The partitioner that fits the most records.
        nearest: Partitioner,
        /// The records it would have put elsewhere.
        misplaced: u64,
        /// The records checked.
        checked: u64,
        /// The first it would have put elsewhere.
        first: Misplaced,
    },
}

impl KeyCheck {
    /// Looks at one record whose key value is `key` (its text), in `partition` of a topic
    /// of `partitions` partitions.
    pub fn observe(&mut self, key: &[u8], partition: i32, partitions: i32) {
        let expected = Partitioner::ALL.map(|p| p.partition(key, partitions).unwrap_or(-1));
        self.observe_placed(expected, partition, || {
            String::from_utf8_lossy(key).into_owned()
        });
    }

    /// Looks at one record in `partition` whose key each partitioner puts in `expected`
    /// ([`Partitioner::ALL`] order); `key` gives its text, asked only when it is the first
    /// one misplaced.
    pub fn observe_placed(
        &mut self,
        expected: [i32; 2],
        partition: i32,
        key: impl FnOnce() -> String,
    ) {
        self.checked += 1;
        let mut key = Some(key);
        let mut text = None;
        for (i, &at) in expected.iter().enumerate() {
            if at == partition {
                self.fits[i] += 1;
            } else if self.first_misplaced[i].is_none() {
                let text = text
                    .get_or_insert_with(|| key.take().map(|k| k()).unwrap_or_default())
                    .clone();
                self.first_misplaced[i] = Some(Misplaced {
                    key: text,
                    partition,
                    expected,
                });
            }
        }
    }

    /// What the records seen say of `partitioner` alone (a partitioner the configuration
    /// names): [`Keyed::By`] it if it placed every one.
    pub fn verdict_of(&self, partitioner: Partitioner) -> Keyed {
        if self.checked == 0 {
            return Keyed::Unseen;
        }
        let i = Partitioner::ALL
            .iter()
            .position(|&p| p == partitioner)
            .unwrap_or(0);
        match &self.first_misplaced[i] {
            None => Keyed::By(partitioner),
            Some(first) => Keyed::Not {
                nearest: partitioner,
                misplaced: self.checked - self.fits[i],
                checked: self.checked,
                first: first.clone(),
            },
        }
    }

    /// What the records seen say.
    pub fn verdict(&self) -> Keyed {
        if self.checked == 0 {
            return Keyed::Unseen;
        }
        let best = (0..Partitioner::ALL.len())
            .max_by_key(|&i| (self.fits[i], std::cmp::Reverse(i)))
            .unwrap_or(0);
        match &self.first_misplaced[best] {
            None => Keyed::By(Partitioner::ALL[best]),
            Some(first) => Keyed::Not {
                nearest: Partitioner::ALL[best],
                misplaced: self.checked - self.fits[best],
                checked: self.checked,
                first: first.clone(),
            },
        }
    }
}

impl fmt::Display for Keyed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keyed::Unseen => f.write_str("no record with a value of the key yet"),
            Keyed::By(p) => write!(f, "keyed by it ({p})"),
            Keyed::Not {
                nearest,
                misplaced,
                checked,
                first,
            } => {
                let [murmur2, crc32] = first.expected;
                write!(
                    f,
                    "not keyed by it: {misplaced} of {checked} records are not in the partition \
                     {nearest} gives their key (the first: key {:?} in partition {}, where \
                     murmur2 gives {murmur2} and crc32 {crc32})",
                    first.key, first.partition
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(partitioner: Option<Partitioner>, keys: &[&str]) -> KeyCheck {
        let mut check = KeyCheck::default();
        for (i, key) in keys.iter().enumerate() {
            let partition = match partitioner {
                Some(p) => p.partition(key.as_bytes(), 6).unwrap(),
                None => (i % 6) as i32,
            };
            check.observe(key.as_bytes(), partition, 6);
        }
        check
    }

    fn users() -> Vec<String> {
        (0..200).map(|i| format!("user_{}", i % 40)).collect()
    }

    #[test]
    fn records_placed_by_a_partitioner_say_which() {
        let users = users();
        let keys: Vec<&str> = users.iter().map(String::as_str).collect();
        for p in Partitioner::ALL {
            assert_eq!(checked(Some(p), &keys).verdict(), Keyed::By(p));
        }
        assert_eq!(KeyCheck::default().verdict(), Keyed::Unseen);
    }

    #[test]
    fn one_record_elsewhere_is_named() {
        let users = users();
        let keys: Vec<&str> = users.iter().map(String::as_str).collect();
        let mut check = checked(Some(Partitioner::Crc32), &keys);
        let home = Partitioner::Crc32.partition(b"user_3", 6).unwrap();
        check.observe(b"user_3", (home + 1) % 6, 6);
        let Keyed::Not {
            nearest,
            misplaced,
            checked,
            first,
        } = check.verdict()
        else {
            panic!("{:?}", check.verdict())
        };
        assert_eq!((nearest, misplaced, checked), (Partitioner::Crc32, 1, 201));
        assert_eq!(
            (first.key.as_str(), first.partition),
            ("user_3", (home + 1) % 6)
        );
        let text = check.verdict().to_string();
        assert!(
            text.contains("1 of 201 records") && text.contains("\"user_3\""),
            "{text}"
        );
    }

    #[test]
    fn a_named_partitioner_is_held_to_every_record() {
        let users = users();
        let keys: Vec<&str> = users.iter().map(String::as_str).collect();
        let check = checked(Some(Partitioner::Crc32), &keys);
        assert_eq!(
            check.verdict_of(Partitioner::Crc32),
            Keyed::By(Partitioner::Crc32)
        );
        let Keyed::Not {
            nearest, checked, ..
        } = check.verdict_of(Partitioner::Murmur2)
        else {
            panic!("crc32's placement is not murmur2's")
        };
        assert_eq!((nearest, checked), (Partitioner::Murmur2, 200));
        assert_eq!(
            KeyCheck::default().verdict_of(Partitioner::Crc32),
            Keyed::Unseen
        );
    }

    #[test]
    fn a_placed_records_key_is_read_only_when_it_is_the_first_misplaced() {
        let mut check = KeyCheck::default();
        let mut asked = 0;
        for _ in 0..3 {
            check.observe_placed([1, 2], 1, || {
                asked += 1;
                "k".into()
            });
        }
        assert_eq!(asked, 1, "the first record crc32 misplaces");
        check.observe_placed([3, 3], 0, || {
            asked += 1;
            "j".into()
        });
        assert_eq!(asked, 2, "the first murmur2 misplaces");
        assert!(matches!(
            check.verdict(),
            Keyed::Not {
                misplaced: 1,
                checked: 4,
                ..
            }
        ));
    }

    #[test]
    fn records_spread_round_robin_are_not_keyed() {
        let users = users();
        let keys: Vec<&str> = users.iter().map(String::as_str).collect();
        assert!(matches!(checked(None, &keys).verdict(), Keyed::Not { .. }));
    }
}
