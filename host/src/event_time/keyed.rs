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

use std::fmt;

use crate::kafka::partitioner::Partitioner;

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
        self.checked += 1;
        for (i, &at) in expected.iter().enumerate() {
            if at == partition {
                self.fits[i] += 1;
            } else if self.first_misplaced[i].is_none() {
                self.first_misplaced[i] = Some(Misplaced {
                    key: String::from_utf8_lossy(key).into_owned(),
                    partition,
                    expected,
                });
            }
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
    fn records_spread_round_robin_are_not_keyed() {
        let users = users();
        let keys: Vec<&str> = users.iter().map(String::as_str).collect();
        assert!(matches!(checked(None, &keys).verdict(), Keyed::Not { .. }));
    }
}
