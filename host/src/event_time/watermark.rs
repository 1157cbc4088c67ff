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
//! Partitions count from the moment they are assigned: one that has sent nothing yet holds
//! the watermark back until it is idle. Time while the pipeline was not running does not
//! make a partition idle.
//!
//! Everything is a function of the state, the batch's processing time and the time the run
//! started, which the batch's plan records, so a replayed batch sees the same watermark.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the watermark knows of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionClock {
    /// Newest event time seen, microseconds since 1970; `None` for a partition assigned
    /// but not heard from yet (it holds the watermark back until it is idle).
    pub max_event: Option<i64>,
    /// Processing time the partition was assigned or last had an event, milliseconds
    /// since 1970.
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

/// How the watermark moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The maximum delay, microseconds.
    pub delay_micros: i64,
    /// The idle timeout, milliseconds.
    pub idle_ms: i64,
    /// When this run of the pipeline started, milliseconds since 1970: no partition counts
    /// as idle for the time the pipeline was not running.
    pub session_start_ms: i64,
}

impl Watermark {
    /// The watermark at processing time `now_ms`: what the state gives, never behind the
    /// watermark already reached.
    pub fn at(&self, now_ms: i64, clock: Clock) -> Option<i64> {
        let seen = |p: &PartitionClock| p.last_seen_ms.max(clock.session_start_ms);
        let mut active = self
            .partitions
            .values()
            .filter(|p| now_ms - seen(p) < clock.idle_ms)
            .map(|p| p.max_event)
            .peekable();
        let candidate = if active.peek().is_some() {
            // An active partition not heard from yet holds it back entirely.
            active
                .collect::<Option<Vec<i64>>>()
                .and_then(|maxima| maxima.into_iter().min())
                .map(|min| min.saturating_sub(clock.delay_micros))
        } else {
            // All idle: move on with processing time since the last one went idle.
            let highest = self.partitions.values().filter_map(|p| p.max_event).max();
            let idle_since = self.partitions.values().map(seen).max();
            highest.zip(idle_since).map(|(max, since)| {
                let idle_for = (now_ms - since - clock.idle_ms).max(0);
                max.saturating_sub(clock.delay_micros)
                    .saturating_add(idle_for.saturating_mul(1000))
            })
        };
        match (self.current, candidate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Adds an assigned partition not known yet, as heard from at `now_ms`.
    pub fn register(&mut self, partition: &str, now_ms: i64) {
        if !self.partitions.contains_key(partition) {
            self.partitions.insert(
                partition.to_string(),
                PartitionClock {
                    max_event: None,
                    last_seen_ms: now_ms,
                },
            );
        }
    }

    /// Records an event of `partition` seen at `now_ms`.
    pub fn observe(&mut self, partition: &str, event_micros: i64, now_ms: i64) {
        match self.partitions.get_mut(partition) {
            Some(clock) => {
                clock.max_event = Some(
                    clock
                        .max_event
                        .map_or(event_micros, |m| m.max(event_micros)),
                );
                clock.last_seen_ms = now_ms;
            }
            None => {
                self.partitions.insert(
                    partition.to_string(),
                    PartitionClock {
                        max_event: Some(event_micros),
                        last_seen_ms: now_ms,
                    },
                );
            }
        }
    }

    /// Moves the watermark to `at(now_ms)` (or `to`, if later) and returns it.
    pub fn advance(&mut self, now_ms: i64, clock: Clock, to: Option<i64>) -> Option<i64> {
        let at = self.at(now_ms, clock);
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

    fn clock(idle_ms: i64) -> Clock {
        Clock {
            delay_micros: 10 * S,
            idle_ms,
            session_start_ms: 0,
        }
    }

    #[test]
    fn lagging_partition_holds_the_watermark_back() {
        let c = clock(5_000);
        let mut w = Watermark::default();
        assert_eq!(w.at(0, c), None);
        w.observe("t/0", 1000 * S, 0);
        w.observe("t/1", 100 * S, 0);
        // The minimum over partitions, not Spark's global maximum (990 s).
        assert_eq!(w.advance(0, c, None), Some(90 * S));
        // Partition 1 goes idle (no event for 5 s): it stops holding back.
        w.observe("t/0", 1001 * S, 3_000);
        assert_eq!(w.at(4_999, c), Some(90 * S));
        assert_eq!(w.at(5_000, c), Some(991 * S));
        // Never backwards, even when a lagging partition comes back.
        w.advance(5_000, c, None);
        w.observe("t/1", 200 * S, 5_000);
        assert_eq!(w.advance(5_000, c, None), Some(991 * S));
    }

    #[test]
    fn a_partition_not_heard_from_holds_it_back_until_idle() {
        let c = clock(5_000);
        let mut w = Watermark::default();
        w.register("t/0", 0);
        w.register("t/1", 0);
        w.observe("t/0", 1000 * S, 1_000);
        assert_eq!(w.advance(1_000, c, None), None);
        assert_eq!(w.at(4_999, c), None);
        assert_eq!(w.at(5_000, c), Some(990 * S));
        // Registering again changes nothing.
        w.register("t/0", 9_000);
        assert_eq!(w.partitions["t/0"].last_seen_ms, 1_000);
    }

    #[test]
    fn all_idle_advances_with_processing_time_while_running() {
        let c = clock(3_000);
        let mut w = Watermark::default();
        w.observe("t/0", 100 * S, 1_000);
        w.observe("t/1", 60 * S, 2_000);
        assert_eq!(w.advance(2_000, c, None), Some(50 * S));
        // Both idle from 5 000 ms (the last one seen at 2 000 plus 3 000).
        assert_eq!(w.at(5_000, c), Some(90 * S));
        assert_eq!(w.at(7_500, c), Some(92 * S + S / 2));
        // A restart at 100 000 ms: the time the pipeline was not running does not count.
        let restarted = Clock {
            session_start_ms: 100_000,
            ..c
        };
        assert_eq!(w.at(100_000, restarted), Some(50 * S));
        assert_eq!(w.at(104_000, restarted), Some(91 * S));
        // A forced end (flush) wins when later.
        assert_eq!(w.advance(5_000, c, Some(500 * S)), Some(500 * S));
        assert_eq!(w.at(5_000, c), Some(500 * S));
    }
}
