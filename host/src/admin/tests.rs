//! What the admin API's tests share.

use std::collections::BTreeMap;

use crate::event_time::StateSize;
use crate::pipeline::progress::{Durations, EventTimeProgress, Progress};
use crate::pipeline::stages::{StageCounts, StageProgress};

/// A batch's progress as the pipeline makes it, with a stage, dead letters and event time.
/// `batch_id` moves the wall clock and the watermark on by a minute per batch.
pub(super) fn progress(batch_id: u64) -> Progress {
    let minute = i64::try_from(batch_id).unwrap() * 60;
    Progress {
        pipeline: "clicks".into(),
        batch_id,
        commit_id: format!("clicks-{batch_id}"),
        table: "db.clicks".into(),
        committed_at: chrono::DateTime::from_timestamp(1_785_320_000 + minute, 250_000_000)
            .unwrap(),
        input_rows: 10,
        rows_written: 8,
        rows_dead_lettered: 2,
        dead_lettered_by_code: BTreeMap::from([("bad \"x\"\\ and\nmore".to_string(), 2)]),
        input_rows_per_second: 1.0,
        processed_rows_per_second: 10.0,
        files_written: 1,
        bytes_written: 1000,
        durations_ms: Durations {
            poll: 100,
            plugins: 500,
            encode: 50,
            dead_letter: 20,
            write: 200,
            state: 10,
            commit: 120,
            total: 1000,
        },
        start_offsets: "{}".into(),
        end_offsets: "{}".into(),
        lag: 42 - i64::try_from(batch_id).unwrap(),
        stages: BTreeMap::from([("rules".to_string(), stage())]),
        event_time: Some(event_time(batch_id)),
    }
}

fn stage() -> StageProgress {
    StageProgress {
        digest: "ab12".into(),
        plugin: "validator".into(),
        version: "1.0.0".into(),
        counts: StageCounts {
            events: 10,
            kept: 8,
            rejected: 2,
            failed: 0,
            rewritten: 1,
            calls: 1,
            micros: 250_000,
        },
        verdicts: BTreeMap::from([("rejected:invalid_price".to_string(), 2)]),
        micros_per_event: 25_000.0,
        swapped_in: false,
        swap_ms: None,
        shadow: None,
        rolled_back: None,
        swaps: 1,
        rollbacks: 0,
        refused: 0,
    }
}

fn event_time(batch_id: u64) -> EventTimeProgress {
    let minute = i64::try_from(batch_id).unwrap() * 60;
    EventTimeProgress {
        watermark: Some(crate::event_time::extract::format_micros(
            (1_785_319_500 + minute) * 1_000_000,
        )),
        rows_late: 1,
        rows_deduplicated: 2,
        windows_emitted: BTreeMap::from([("per_minute".to_string(), 3)]),
        state: BTreeMap::from([(
            "dedup".to_string(),
            StateSize {
                rows: 100 * batch_id,
                bytes: 6400,
            },
        )]),
        state_file_bytes: 4096,
    }
}
