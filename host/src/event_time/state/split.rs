//! One partition's share of a saved state, and shares put together again (issue 35: state
//! that moves with its partition between the processes of a group).
//!
//! Every entry of the state has a key: a dedup key, a window group's or a session's
//! group-by values, a join row's key values. When the records of one key all come from one
//! partition (a source keyed by it, see [`crate::event_time::keyed`], or a repartition
//! topic keyed by it), the partition an entry belongs to is a function of its key alone:
//! the producer's partitioner over [`partition_key`]. So a share needs no partition
//! written beside each entry: [`SavedState::retain`] keeps the entries whose key a
//! partition owns (and the watermark's clocks of the partitions it owns), and
//! [`SavedState::absorb`] puts shares of different partitions together.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::collections::btree_map::Entry;

use super::saved::SavedState;
use crate::event_time::join::{SavedJoin, SavedJoinRow};
use crate::event_time::watermark::Watermark;

/// Between the values of a key of several fields, as dedup keys join them.
pub const KEY_SEPARATOR: u8 = 0x1f;

/// The bytes a partitioner places a key by: one value's text as it is (what a producer
/// keyed by that field sends as the record's key), several values joined by
/// [`KEY_SEPARATOR`] (as a dedup key of several fields is), a missing value as nothing.
pub fn partition_key(values: &[Option<String>]) -> Cow<'_, [u8]> {
    match values {
        [one] => Cow::Borrowed(one.as_deref().unwrap_or_default().as_bytes()),
        many => {
            let mut key = Vec::new();
            for (i, value) in many.iter().enumerate() {
                if i > 0 {
                    key.push(KEY_SEPARATOR);
                }
                key.extend_from_slice(value.as_deref().unwrap_or_default().as_bytes());
            }
            Cow::Owned(key)
        }
    }
}

impl SavedState {
    /// Keeps the entries whose [`partition_key`] `keep` accepts (a dedup key's text is its
    /// partition key), and the watermark clocks of the partitions (`topic/partition`)
    /// `owns` accepts, the joins' right sides' included. The watermark reached stays: it
    /// was reached over the whole source.
    pub fn retain(&mut self, keep: &dyn Fn(&[u8]) -> bool, owns: &dyn Fn(&str) -> bool) {
        self.dedup.retain(|(key, _)| keep(key.as_bytes()));
        for groups in self.windows.values_mut() {
            groups.retain(|g| keep(&partition_key(&g.key)));
        }
        for join in self.joins.values_mut() {
            let kept = |row: &SavedJoinRow| keep(&partition_key(&row.key));
            join.left.retain(kept);
            join.right.retain(kept);
            join.right_watermark.partitions.retain(|p, _| owns(p));
        }
        self.watermark.partitions.retain(|p, _| owns(p));
    }

    /// Adds `other`'s entries: the share of other partitions (of other keys). The
    /// watermark reached is the lower of the two (no event is judged late that either
    /// share's process would have taken). Join rows keep their ids unless they meet ids
    /// this state holds, which are then renumbered after its last.
    pub fn absorb(&mut self, other: SavedState) {
        self.dedup.extend(other.dedup);
        for (name, groups) in other.windows {
            self.windows.entry(name).or_default().extend(groups);
        }
        for (name, join) in other.joins {
            match self.joins.entry(name) {
                Entry::Vacant(vacant) => {
                    vacant.insert(join);
                }
                Entry::Occupied(mut occupied) => absorb_join(occupied.get_mut(), join),
            }
        }
        absorb_watermark(&mut self.watermark, other.watermark);
    }
}

fn absorb_join(into: &mut SavedJoin, mut other: SavedJoin) {
    let ids: BTreeSet<u64> = into.left.iter().chain(&into.right).map(|r| r.id).collect();
    if other
        .left
        .iter()
        .chain(&other.right)
        .any(|r| ids.contains(&r.id))
    {
        let base = into.next_id;
        for row in other.left.iter_mut().chain(other.right.iter_mut()) {
            row.id += base;
        }
        other.next_id += base;
    }
    into.left.extend(other.left);
    into.right.extend(other.right);
    into.next_id = into.next_id.max(other.next_id);
    absorb_watermark(&mut into.right_watermark, other.right_watermark);
}

fn absorb_watermark(into: &mut Watermark, other: Watermark) {
    into.partitions.extend(other.partitions);
    into.current = match (into.current, other.current) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Micros;

    fn row(id: u64, user: &str) -> SavedJoinRow {
        SavedJoinRow {
            id,
            time: Micros(1),
            key: vec![Some(user.into())],
            values: vec![],
            matched: false,
        }
    }

    fn with_join(current: i64, next_id: u64, rows: Vec<SavedJoinRow>) -> SavedState {
        let mut state = SavedState::default();
        state.watermark.current = Some(Micros(current));
        state.joins.insert(
            "j".into(),
            SavedJoin {
                right_watermark: Watermark::default(),
                next_id,
                left: rows,
                right: vec![],
            },
        );
        state
    }

    #[test]
    fn shares_of_other_processes_keep_apart_their_join_rows_and_the_lower_watermark() {
        // Two processes numbered their rows alike: the second share's rows move past the first's.
        let mut state = with_join(20, 2, vec![row(0, "a"), row(1, "b")]);
        state.absorb(with_join(10, 1, vec![row(0, "c")]));
        let join = &state.joins["j"];
        let ids: Vec<(u64, String)> = join
            .left
            .iter()
            .map(|r| (r.id, r.key[0].clone().unwrap()))
            .collect();
        assert_eq!(ids, [(0, "a".into()), (1, "b".into()), (2, "c".into())]);
        assert_eq!(join.next_id, 3);
        assert_eq!(state.watermark.current, Some(Micros(10)));
        // Shares of one state (ids apart already) keep their ids.
        let mut state = with_join(20, 5, vec![row(0, "a")]);
        state.absorb(with_join(20, 5, vec![row(4, "c")]));
        assert_eq!(state.joins["j"].left[1].id, 4);
        assert_eq!(state.joins["j"].next_id, 5);
    }
}
