//! Unit tests of the fences.

use super::*;
use crate::record::TopicPartition;

fn offsets(pairs: &[(i32, i64)]) -> Offsets {
    let mut o = Offsets::default();
    for &(p, n) in pairs {
        o.set(
            TopicPartition {
                topic: "t".into(),
                partition: p,
            },
            n,
        );
    }
    o
}

fn mark(batch_id: u64, pairs: &[(i32, i64)]) -> CommitMark {
    CommitMark {
        pipeline: "p".into(),
        batch_id,
        offsets: offsets(pairs),
    }
}

#[test]
fn a_batch_follows_the_commit_it_was_read_after() {
    let fence = Fence::Follows(offsets(&[(0, 5), (1, 7)]));
    let ours = mark(3, &[(0, 9), (1, 7)]);
    assert_eq!(
        fence.check(&ours, Some(&mark(2, &[(0, 5), (1, 7)]))),
        Ok(())
    );
    // Another process committed partition 0 meanwhile.
    let moved = fence.check(&ours, Some(&mark(3, &[(0, 8), (1, 7)])));
    assert!(
        matches!(&moved, Err(Fenced::Moved { partition: Some(p), expected: Some(5), found: Some(8), .. }) if p == "t/0"),
        "{moved:?}"
    );
    // The same offsets but another batch in between (a batch without records).
    let moved = fence.check(&ours, Some(&mark(3, &[(0, 5), (1, 7)])));
    assert!(matches!(
        moved,
        Err(Fenced::Moved {
            partition: None,
            ..
        })
    ));
    // A brand-new pipeline: nothing recorded yet.
    let first = Fence::Follows(offsets(&[(0, 0)]));
    assert_eq!(first.check(&mark(1, &[(0, 4)]), None), Ok(()));
    assert!(
        first
            .check(&mark(1, &[(0, 4)]), Some(&mark(1, &[(0, 4)])))
            .is_err()
    );
}

#[test]
fn a_group_member_owns_its_partitions_and_commits_the_merged_offsets() {
    // This member owns partition 1; another one committed partition 0 meanwhile.
    let fence = Fence::Owns {
        start: offsets(&[(1, 7)]),
        states: None,
        claims: None,
    };
    let planned = mark(3, &[(1, 9)]);
    let last = mark(5, &[(0, 40), (1, 7)]);
    assert_eq!(fence.check(&planned, Some(&last)), Ok(()));
    assert_eq!(
        fence.mark(&planned, Some(&last)),
        mark(6, &[(0, 40), (1, 9)])
    );
    // Someone else committed partition 1: fenced.
    let taken = mark(6, &[(0, 40), (1, 8)]);
    assert!(matches!(
        fence.check(&planned, Some(&taken)),
        Err(Fenced::Moved {
            partition: Some(_),
            ..
        })
    ));
    // The first commit of the pipeline.
    assert_eq!(fence.mark(&planned, None), mark(1, &[(1, 9)]));
    // The other fences commit the mark as planned.
    let follows = Fence::Follows(offsets(&[(1, 7)]));
    assert_eq!(follows.mark(&planned, Some(&last)), planned);
}

#[test]
fn a_member_is_fenced_off_partitions_whose_state_another_committed() {
    let states = |pairs: &[(&str, Option<&str>)]| {
        pairs
            .iter()
            .map(|&(p, f)| (p.to_string(), f.map(str::to_string)))
            .collect()
    };
    let fence = Fence::Owns {
        start: offsets(&[(1, 7)]),
        states: Some(states(&[("t/1", Some("a-3.state")), ("t/2", None)])),
        claims: Some(states(&[("t/1", None), ("t/2", Some("b@1"))])),
    };
    let recorded = r#"{"t/0":"b-4.state","t/1":"a-3.state"}"#;
    let claimed = r#"{"t/2":"b@1"}"#;
    assert_eq!(fence.check_states(Some(recorded), Some(claimed)), Ok(()));
    // Another member committed partition 1 without reading further (its offsets
    // stand): its state file is another.
    let taken = r#"{"t/1":"b-5.state"}"#;
    assert_eq!(
        fence.check_states(Some(taken), Some(claimed)),
        Err(Fenced::StateMoved {
            partition: "t/1".into(),
            expected: Some("a-3.state".into()),
            found: Some("b-5.state".into()),
        })
    );
    // A partition this member started empty that another member gave state meanwhile.
    let given = r#"{"t/1":"a-3.state","t/2":"b-5.state"}"#;
    assert!(fence.check_states(Some(given), Some(claimed)).is_err());
    // Another member claimed partition 1 since (its state file stands).
    assert_eq!(
        fence.check_states(Some(recorded), Some(r#"{"t/1":"c@7","t/2":"b@1"}"#)),
        Err(Fenced::Claimed {
            partition: "t/1".into()
        })
    );
    // No states expected: nothing checked.
    let plain = Fence::Owns {
        start: offsets(&[(1, 7)]),
        states: None,
        claims: None,
    };
    assert_eq!(plain.check_states(Some(taken), None), Ok(()));
}

#[test]
fn a_window_table_takes_each_batch_once() {
    assert_eq!(
        Fence::NotHeld.check(&mark(3, &[]), Some(&mark(2, &[]))),
        Ok(())
    );
    assert_eq!(Fence::NotHeld.check(&mark(3, &[]), None), Ok(()));
    assert_eq!(
        Fence::NotHeld.check(&mark(3, &[]), Some(&mark(3, &[]))),
        Err(Fenced::Held)
    );
}

#[test]
fn a_keyed_batch_lands_once_and_not_over_a_partition_that_moved_on() {
    let keyed = |key: &str, partitions: &[(&str, i64, i64)]| Fence::Keyed {
        key: key.into(),
        partitions: partitions
            .iter()
            .map(|&(p, from, to)| (p.to_string(), (from, to)))
            .collect(),
        bases: BTreeMap::new(),
    };
    let first = keyed("k1", &[("t/0", 0, 5), ("t/1", 0, 3)]);
    let recorded = first.batch_keys().unwrap();
    assert!(first.keyed_landed(Some(&recorded)));
    assert_eq!(first.keyed(Some(&recorded)), Ok(true), "held: replayed");
    assert_eq!(first.keyed(None), Ok(false));
    // The next batch of partition 0, and a batch of partition 1 from where it stood.
    assert_eq!(
        keyed("k2", &[("t/0", 5, 9)]).keyed(Some(&recorded)),
        Ok(false)
    );
    assert!(!keyed("k2", &[("t/0", 5, 9)]).keyed_landed(Some(&recorded)));
    // A member that read partition 1 from 0 while another went past it: moved on.
    let zombie = keyed("k3", &[("t/1", 0, 2)]);
    assert!(matches!(
        zombie.keyed(Some(&recorded)),
        Err(Fenced::Moved { partition: Some(p), expected: Some(0), found: Some(3), .. }) if p == "t/1"
    ));
    assert_eq!(Fence::NotHeld.keyed(Some(&recorded)), Ok(false));
    assert_eq!(
        zombie.fenced_by(Some(&recorded)),
        Some(("t/1".into(), "k1".into(), "k1@3".into()))
    );
    assert_eq!(first.fenced_by(Some(&recorded)), None, "its own entries");
    assert_eq!(
        keyed("k2", &[("t/0", 5, 9)]).fenced_by(Some(&recorded)),
        None
    );
    assert_eq!(first.batch_range().unwrap(), r#"{"t/0":[0,5],"t/1":[0,3]}"#);
}

#[test]
fn a_keyed_batch_from_a_state_another_batch_built_on_first_is_fenced_off() {
    // Each reads nothing of t/0 (at 7): only the state they built on tells them apart.
    let keyed = |key: &str, base: u64| Fence::Keyed {
        key: key.into(),
        partitions: BTreeMap::from([("t/0".to_string(), (7, 7))]),
        bases: BTreeMap::from([("t/0".to_string(), base)]),
    };
    let first = keyed("k1", 4);
    let recorded = first.batch_keys().unwrap();
    assert_eq!(recorded, r#"{"t/0":"k1@7@4"}"#);
    assert_eq!(
        first.keyed(Some(&recorded)),
        Ok(true),
        "a replay lands once"
    );
    // A sibling from the same state (a frozen member's), and one from an older state.
    for base in [4, 3] {
        let sibling = keyed("k2", base);
        assert!(matches!(
            sibling.keyed(Some(&recorded)),
            Err(Fenced::SameState { partition: p, offset: 7 }) if p == "t/0"
        ));
        assert_eq!(
            sibling.fenced_by(Some(&recorded)),
            Some(("t/0".into(), "k1".into(), "k1@7@4".into()))
        );
    }
    // The next batch builds on the state the first saved (batch 5's file).
    assert_eq!(keyed("k3", 5).keyed(Some(&recorded)), Ok(false));
    assert_eq!(keyed("k3", 5).fenced_by(Some(&recorded)), None);
    // Entries of older versions record no state: offsets alone fence.
    assert_eq!(keyed("k2", 4).keyed(Some(r#"{"t/0":"k1@7"}"#)), Ok(false));
    assert_eq!(
        BatchEntry::parse("k1@7@4"),
        Some(BatchEntry {
            key: "k1".into(),
            end: 7,
            base: Some(4)
        })
    );
    assert_eq!(BatchEntry::parse("k1@7").and_then(|e| e.base), None);
    assert_eq!(BatchEntry::parse("k1@x"), None);
}
