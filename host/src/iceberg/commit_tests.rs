//! Tests of the commit protocol on a real (SQLite) catalog.

use super::*;

use crate::record::Offsets;

fn committed(mark: CommitMark) -> Landed {
    Landed::Committed { retries: 0, mark }
}

fn mark(pipeline: &str) -> CommitMark {
    CommitMark {
        pipeline: pipeline.into(),
        batch_id: 1,
        offsets: Offsets::default(),
    }
}

#[test]
fn a_commit_on_a_table_that_moved_is_refused_not_rebased() {
    let (dir, catalog, config) = crate::iceberg::test_table("moved");
    let mut stale = IcebergTable::open(&catalog, config.clone()).unwrap();
    let mut other = IcebergTable::open(&catalog, config).unwrap();
    let fence = Fence::Follows(Offsets::default());
    let landed = other.commit(vec![], &mark("q"), HashMap::new(), &fence);
    assert_eq!(landed.unwrap(), committed(mark("q")));

    // Against the snapshot it was checked on, which is no longer current: refused at
    // once, not applied on top of the newer snapshot.
    let error = stale
        .try_commit(vec![], mark("p").to_properties(), None)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::CatalogCommitConflicts, "{error}");
    assert!(!error.retryable());
    stale.refresh().unwrap();
    assert_eq!(stale.last_mark("p").unwrap(), None);

    // A commit reloads and checks the fence first: p's fence holds, so it lands.
    let landed = stale.commit(vec![], &mark("p"), HashMap::new(), &fence);
    assert_eq!(landed.unwrap(), committed(mark("p")));
    assert_eq!(stale.last_mark("p").unwrap(), Some(mark("p")));
    // The same batch again is recognised as landed, not committed twice.
    let again = other.commit(vec![], &mark("p"), HashMap::new(), &fence);
    assert_eq!(again.unwrap(), committed(mark("p")));
    let snapshots = other.table().metadata().snapshots().count();
    assert_eq!(snapshots, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn members_commits_put_their_partitions_state_shares_on_top_of_the_last() {
    use crate::checkpoint::STATE_SHARES;
    let (dir, catalog, config) = crate::iceberg::test_table("shares");
    let mut a = IcebergTable::open(&catalog, config.clone()).unwrap();
    let mut b = IcebergTable::open(&catalog, config).unwrap();
    let member = |table: &mut IcebergTable, run: &str, partitions: &[(i32, i64, i64)]| {
        let (mut start, mut end) = (Offsets::default(), Offsets::default());
        let mut shares = std::collections::BTreeMap::new();
        for &(p, from, to) in partitions {
            let tp = crate::record::TopicPartition {
                topic: "t".into(),
                partition: p,
            };
            shares.insert(tp.to_string(), format!("{run}-{to}.state"));
            start.set(tp.clone(), from);
            end.set(tp, to);
        }
        let planned = CommitMark {
            pipeline: "p".into(),
            batch_id: 1,
            offsets: end,
        };
        let extra = HashMap::from([
            (RUN.to_string(), run.to_string()),
            (
                STATE_SHARES.to_string(),
                serde_json::to_string(&shares).unwrap(),
            ),
        ]);
        table
            .commit(
                vec![],
                &planned,
                extra,
                &Fence::Owns {
                    start,
                    states: None,
                    claims: None,
                },
            )
            .unwrap();
    };
    member(&mut a, "a", &[(0, 0, 5), (1, 0, 7)]);
    member(&mut b, "b", &[(2, 0, 3)]);
    member(&mut a, "a", &[(1, 7, 9)]); // a was left partition 1 alone
    let last = a.last_mark_properties("p").unwrap().unwrap();
    let shares: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&last[STATE_SHARES]).unwrap();
    let expected = [
        ("t/0", "a-5.state"),
        ("t/1", "a-9.state"),
        ("t/2", "b-3.state"),
    ];
    let expected = expected.map(|(p, f)| (p.to_string(), f.to_string()));
    assert_eq!(shares, expected.into_iter().collect());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_members_commit_that_moved_no_offset_lands_its_state_anew() {
    use crate::checkpoint::STATE_SHARES;
    let (dir, catalog, config) = crate::iceberg::test_table("unmoved");
    let mut a = IcebergTable::open(&catalog, config).unwrap();
    let tp = crate::record::TopicPartition {
        topic: "t".into(),
        partition: 0,
    };
    let at = |n: i64| {
        let mut offsets = Offsets::default();
        offsets.set(tp.clone(), n);
        offsets
    };
    let commit = |a: &mut IcebergTable, batch_id: u64, from: i64, to: i64, state: &str| {
        let planned = CommitMark {
            pipeline: "p".into(),
            batch_id,
            offsets: at(to),
        };
        let shares = format!("{{\"t/0\":\"{state}\"}}");
        let extra = HashMap::from([
            (RUN.to_string(), "a".to_string()),
            (STATE_SHARES.to_string(), shares),
        ]);
        a.commit(
            vec![],
            &planned,
            extra,
            &Fence::Owns {
                start: at(from),
                states: None,
                claims: None,
            },
        )
        .unwrap()
    };
    // Lands as the table's batch `batch_id`, its state recorded.
    let lands_as = |a: &mut IcebergTable, batch_id: u64, state: &str| {
        let landed = commit(a, 2, 5, 5, state);
        assert!(matches!(&landed, Landed::Committed { mark, .. } if mark.batch_id == batch_id));
        let last = a.last_mark_properties("p").unwrap().unwrap();
        assert_eq!(last[STATE_SHARES], format!(r#"{{"t/0":"{state}"}}"#));
    };
    commit(&mut a, 1, 0, 5, "a-1.state");
    // A batch of no records (time moved on: windows closed) saves state too: it is a
    // commit of its own, not the last one found again.
    lands_as(&mut a, 2, "a-2.state");
    // The same plan again (replayed on another partition of it, reading nothing): the
    // same batch id and offsets, yet state files of its own: a commit of its own too.
    lands_as(&mut a, 3, "a-3.state");
    // The very same commit again (a retry): found landed (batch 3), not committed twice.
    lands_as(&mut a, 3, "a-3.state");
    let _ = std::fs::remove_dir_all(&dir);
}
