//! Where a producer puts a keyed record: the two placements Kafka's clients use, computed
//! by librdkafka's own partitioner functions (the ones its producers call).
//!
//! - **murmur2**, Kafka's Java client (`Utils.murmur2(key) & 0x7fffffff` modulo the
//!   partition count), and librdkafka with `partitioner = murmur2` or `murmur2_random`;
//! - **crc32**, librdkafka's default (`consistent_random`, and `consistent`): CRC-32 of the
//!   key modulo the partition count. Clients built on librdkafka (Python's and Go's
//!   confluent-kafka, rdkafka in Rust, `sluice produce`) use it unless told otherwise.
//!
//! A topic whose records were all placed by one of them from a field of the event holds
//! every record of one value of that field in one partition: state keyed by that field can
//! be split by partition (issue 35's co-partitioned input).
#![allow(unsafe_code)]

use std::fmt;

use rdkafka::bindings as rd;

/// How a producer chose a keyed record's partition (in configuration: `"murmur2"` or
/// `"crc32"`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Partitioner {
    /// Kafka's Java client's default; librdkafka's `murmur2` and `murmur2_random`.
    Murmur2,
    /// librdkafka's default (`consistent_random`) and `consistent`.
    Crc32,
}

impl Partitioner {
    /// Both, in the order they are tried.
    pub const ALL: [Partitioner; 2] = [Partitioner::Murmur2, Partitioner::Crc32];

    /// The partition it gives `key` among `partitions` (at least 1): always the same for
    /// the same key and count. `None` for a count below 1.
    pub fn partition(self, key: &[u8], partitions: i32) -> Option<i32> {
        if partitions < 1 {
            return None;
        }
        let f = match self {
            Partitioner::Murmur2 => rd::rd_kafka_msg_partitioner_murmur2,
            Partitioner::Crc32 => rd::rd_kafka_msg_partitioner_consistent,
        };
        // SAFETY: both functions only hash `key` (`keylen` bytes, valid for the call) and
        // take it modulo `partitions` (checked above); neither reads the topic handle or
        // the opaque pointers (librdkafka's rdkafka_msg.c), so null is fine for them.
        let partition = unsafe {
            f(
                std::ptr::null(),
                key.as_ptr().cast(),
                key.len(),
                partitions,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        Some(partition)
    }

    /// Its name as librdkafka's `partitioner` property spells it (`murmur2`, `consistent`).
    pub fn property(self) -> &'static str {
        match self {
            Partitioner::Murmur2 => "murmur2",
            Partitioner::Crc32 => "consistent",
        }
    }
}

impl fmt::Display for Partitioner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Partitioner::Murmur2 => "murmur2",
            Partitioner::Crc32 => "crc32",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes Kafka's own tests give for `Utils.murmur2` (Java ints); the partition
    /// among `i32::MAX` partitions is the hash with its sign bit cleared.
    #[test]
    fn murmur2_places_keys_as_kafkas_java_client_does() {
        let java: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, hash) in java {
            let expected = (hash & 0x7fff_ffff) % i32::MAX;
            assert_eq!(
                Partitioner::Murmur2.partition(key, i32::MAX),
                Some(expected),
                "{}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn crc32_places_keys_as_librdkafkas_default_does() {
        // CRC-32 of "123456789" is 0xCBF43926, taken modulo the count as unsigned.
        let crc = 0xCBF4_3926_u32;
        assert_eq!(
            Partitioner::Crc32.partition(b"123456789", i32::MAX),
            Some((crc % i32::MAX as u32) as i32)
        );
        assert_eq!(
            Partitioner::Crc32.partition(b"123456789", 12),
            Some((crc % 12) as i32)
        );
    }

    #[test]
    fn a_key_always_lands_in_one_partition_of_the_count() {
        for partitioner in Partitioner::ALL {
            for key in ["user_1", "user_2", "", "é"] {
                let p = partitioner.partition(key.as_bytes(), 7).unwrap();
                assert!((0..7).contains(&p), "{partitioner} {key}: {p}");
                assert_eq!(partitioner.partition(key.as_bytes(), 7), Some(p));
                assert_eq!(partitioner.partition(key.as_bytes(), 1), Some(0));
            }
            assert_eq!(partitioner.partition(b"k", 0), None);
        }
    }
}
