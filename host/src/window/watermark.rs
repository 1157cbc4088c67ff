//! The watermark: per source partition, the newest event time seen minus the maximum
//! delay; over the pipeline, the minimum over partitions that are not idle.
//!
//! Spark keeps one global maximum, so a fast partition can push the watermark past a
//! lagging one and its events are dropped as late. Here a lagging partition holds the
//! watermark back for as long as it sends events. A partition silent for `idle-timeout`
//! (processing time) stops holding it back; when every partition is idle, the watermark
//! moves on with processing time from the highest partition watermark, so the last
//! windows close even when input stops.
//!
//! Everything is a function of the state and the batch's processing time (`now_ms`), which
//! the batch's plan records, so a replayed batch sees the same watermark.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the watermark knows of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionClock {
    /// Newest event time seen, microseconds since 1970.
    pub max_event: i64,
    /// Processing time of the last batch that had an event of it, milliseconds since 1970.
    pub last_seen_ms: i64,
}

/// The watermark state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    /// Per partition, keyed `topic/partition`.
    pub partitions: BTreeMap<String, PartitionClock>,
    /// The watermark reached, microseconds since 1970; `None` before the first event.
    pub current: Option<i64>,
}

impl Watermark {
    /// The watermark at processing time `now_ms`: what the state gives, never behind the
    /// watermark already reached.
    pub fn at(&self, now_ms: i64, delay_micros: i64, idle_ms: i64) -> Option<i64> {
        let active = self
            .partitions
            .values()
            .filter(|p| now_ms - p.last_seen_ms < idle_ms)
            .map(|p| p.max_event)
            .min();
        let candidate = match active {
            Some(min) => Some(min.saturating_sub(delay_micros)),
            None => {
                // All idle: move on with processing time since the last one went idle.
                let highest = self.partitions.values().map(|p| p.max_event).max();
                let idle_since = self.partitions.values().map(|p| p.last_seen_ms).max();
                highest.zip(idle_since).map(|(max, since)| {
                    let idle_for = (now_ms - since - idle_ms).max(0);
                    max.saturating_sub(delay_micros)
                        .saturating_add(idle_for.saturating_mul(1000))
                })
            }
        };
        match (self.current, candidate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Records an event of `partition` seen at `now_ms`.
    pub fn observe(&mut self, partition: &str, event_micros: i64, now_ms: i64) {
        match self.partitions.get_mut(partition) {
            Some(clock) => {
                clock.max_event = clock.max_event.max(event_micros);
                clock.last_seen_ms = now_ms;
            }
            None => {
                self.partitions.insert(
                    partition.to_string(),
                    PartitionClock {
                        max_event: event_micros,
                        last_seen_ms: now_ms,
                    },
                );
            }
        }
    }

    /// Moves the watermark to `at(now_ms)` (or `to`, if later) and returns it.
    pub fn advance(
        &mut self,
        now_ms: i64,
        delay_micros: i64,
        idle_ms: i64,
        to: Option<i64>,
    ) -> Option<i64> {
        let at = self.at(now_ms, delay_micros, idle_ms);
        self.current = match (at, to) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000; // a second in microseconds

    #[test]
    fn lagging_partition_holds_the_watermark_back() {
        let mut w = Watermark::default();
        assert_eq!(w.at(0, 10 * S, 5_000), None);
        w.observe("t/0", 1000 * S, 0);
        w.observe("t/1", 100 * S, 0);
        // The minimum over partitions, not Spark's global maximum (990 s).
        assert_eq!(w.advance(0, 10 * S, 5_000, None), Some(90 * S));
        // Partition 1 goes idle (no event for 5 s): it stops holding back.
        w.observe("t/0", 1001 * S, 3_000);
        assert_eq!(w.at(4_999, 10 * S, 5_000), Some(90 * S));
        assert_eq!(w.at(5_000, 10 * S, 5_000), Some(991 * S));
        // Never backwards, even when a lagging partition comes back.
        w.advance(5_000, 10 * S, 5_000, None);
        w.observe("t/1", 200 * S, 5_000);
        assert_eq!(w.advance(5_000, 10 * S, 5_000, None), Some(991 * S));
    }

    #[test]
    fn all_idle_advances_with_processing_time() {
        let mut w = Watermark::default();
        w.observe("t/0", 100 * S, 1_000);
        w.observe("t/1", 60 * S, 2_000);
        assert_eq!(w.advance(2_000, 10 * S, 3_000, None), Some(50 * S));
        // Both idle from 5 000 ms (the last one seen at 2 000 plus 3 000).
        assert_eq!(w.at(5_000, 10 * S, 3_000), Some(90 * S));
        assert_eq!(w.at(7_500, 10 * S, 3_000), Some(92 * S + S / 2));
        // A forced end (flush) wins when later.
        assert_eq!(
            w.advance(5_000, 10 * S, 3_000, Some(500 * S)),
            Some(500 * S)
        );
        assert_eq!(w.at(5_000, 10 * S, 3_000), Some(500 * S));
    }
}
