//! What a commit records about the lookup tables: the [`Version`] of each table a batch
//! saw, so that a replayed batch reads exactly the reference data the first attempt read
//! (see [`crate::lookup`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which state of its source a lookup table holds: what a batch used, recorded in the
/// batch's plan and commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Version {
    /// A compacted topic read up to (not including) these offsets, per partition.
    Topic {
        /// The next offset of every partition.
        #[serde(with = "partition_keys")]
        offsets: BTreeMap<i32, i64>,
    },
    /// An Iceberg table at this snapshot; `None` when the table had no snapshot.
    Snapshot {
        /// The snapshot id.
        id: Option<i64>,
    },
    /// A file (`sluice try --lookup NAME=FILE.jsonl`), named by the sha256 of its bytes.
    File {
        /// The file's digest, in hex.
        digest: String,
    },
}

/// Snapshot summary key: the version of every lookup table the batch saw, JSON (see
/// [`Lookups::versions`]).
pub const LOOKUPS: &str = "sluice.lookups";

/// Partition numbers as JSON object keys, read back as text: serde cannot read integer
/// keys inside an internally tagged enum such as [`Version`].
mod partition_keys {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error};

    pub fn serialize<S: Serializer>(map: &BTreeMap<i32, i64>, s: S) -> Result<S::Ok, S::Error> {
        let text: BTreeMap<String, i64> = map.iter().map(|(p, o)| (p.to_string(), *o)).collect();
        text.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<i32, i64>, D::Error> {
        let text = BTreeMap::<String, i64>::deserialize(d)?;
        let parsed = text
            .into_iter()
            .map(|(p, o)| Ok((p.parse().map_err(D::Error::custom)?, o)));
        parsed.collect()
    }
}
