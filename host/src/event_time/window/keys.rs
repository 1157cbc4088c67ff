//! Group-by keys: the values a window groups by (and a join keys on), packed in one
//! allocation, and the hashes of keys and of distinct values.

use serde::Serialize;

use crate::event_time::shard::hash_bytes;

/// The group-by values of a row (`None`: missing or null).
pub type GroupKey = Vec<Option<String>>;

/// Group-by values packed in one allocation: per value, 0 for none, or 1, the length of
/// its text (4 bytes, little-endian) and the text. Compared and hashed as bytes; saved
/// like a [`GroupKey`].
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackedKey(Box<[u8]>);

impl PackedKey {
    /// Packs group-by values.
    pub fn pack<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> Self {
        let mut bytes = Vec::new();
        for value in values {
            match value {
                None => bytes.push(0),
                Some(text) => {
                    bytes.push(1);
                    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
                    bytes.extend_from_slice(&len.to_le_bytes());
                    bytes.extend_from_slice(&text.as_bytes()[..len as usize]);
                }
            }
        }
        PackedKey(bytes.into_boxed_slice())
    }

    /// Packs a [`GroupKey`].
    pub fn of(key: &GroupKey) -> Self {
        Self::pack(key.iter().map(Option::as_deref))
    }

    /// The packed bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The values, in order.
    pub fn values(&self) -> impl Iterator<Item = Option<&str>> {
        let mut rest = &self.0[..];
        std::iter::from_fn(move || {
            let (&tag, after) = rest.split_first()?;
            if tag == 0 {
                rest = after;
                return Some(None);
            }
            let (len, after) = after.split_at_checked(4)?;
            let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (text, after) = after.split_at_checked(len)?;
            rest = after;
            // Packed from `str`s, cut at their length: always UTF-8.
            Some(Some(std::str::from_utf8(text).unwrap_or_default()))
        })
    }

    /// The values, unpacked.
    pub fn unpack(&self) -> GroupKey {
        self.values().map(|v| v.map(String::from)).collect()
    }
}

impl Serialize for PackedKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        // Binary formats need the length first.
        let mut seq = serializer.serialize_seq(Some(self.values().count()))?;
        for value in self.values() {
            seq.serialize_element(&value)?;
        }
        seq.end()
    }
}

/// The hash of group-by values, in the process (see [`super::shard`]).
pub fn key_hash(key: &PackedKey) -> u64 {
    hash_bytes(key.as_bytes())
}

/// FNV-1a, 64 bits, with a final mix: stable across runs and builds, so saved state stays
/// valid.
pub fn stable_hash(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}
