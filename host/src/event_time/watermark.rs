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
//! A second input (a join's right side) follows another watermark instead of processing
//! time when every one of its partitions is idle, or it has none ([`WhenIdle::Follow`]):
//! as Flink leaves an idle input out of an operator's minimum, an idle side then stops
//! holding the other back, and it moves at the speed of the events' own time, not the
//! wall clock's (a backfill runs event time far faster).
//!
//! Everything is a function of the state, the batch's processing time and the time the run
//! started, which the batch's plan records, so a replayed batch sees the same watermark.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::units::{Micros, Millis};

/// What the watermark knows of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionClock {
    /// Newest event time seen; `None` for a partition assigned but not heard from yet (it
    /// holds the watermark back until it is idle).
    pub max_event: Option<Micros>,
    /// Processing time the partition was assigned or last had an event.
    #[serde(rename = "last_seen_ms")]
    pub last_seen: Millis,
}

/// The watermark state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    /// Per partition, keyed `topic/partition`.
    pub partitions: BTreeMap<String, PartitionClock>,
    /// The watermark reached; `None` before the first event.
    pub current: Option<Micros>,
}

/// How the watermark moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The maximum delay.
    pub delay: Micros,
    /// The idle timeout.
    pub idle: Millis,
    /// How far past processing time an event time may be.
    pub max_future: Micros,
    /// When this run of the pipeline started: no partition counts as idle for the time
    /// the pipeline was not running.
    pub session_start: Millis,
}

/// What the watermark does when every partition is idle, or none is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenIdle {
    /// Moves on with processing time from the highest partition watermark.
    Advance,
    /// Follows another watermark (the pipeline's, for a join's right side).
    Follow(Option<Micros>),
}

impl Watermark {
    /// The watermark at processing time `now`: what the state gives, never behind the
    /// watermark already reached.
    pub fn at(&self, now: Millis, clock: Clock) -> Option<Micros> {
        self.at_when_idle(now, clock, WhenIdle::Advance)
    }

    /// As [`Watermark::at`], doing `idle` when every partition is idle.
    pub fn at_when_idle(&self, now: Millis, clock: Clock, idle: WhenIdle) -> Option<Micros> {
        let seen = |p: &PartitionClock| p.last_seen.max(clock.session_start);
        let mut active = self
            .partitions
            .values()
            .filter(|p| now.since(seen(p)) < clock.idle)
            .map(|p| p.max_event)
            .peekable();
        let candidate = if active.peek().is_some() {
            // An active partition not heard from yet holds it back entirely.
            active
                .collect::<Option<Vec<Micros>>>()
                .and_then(|maxima| maxima.into_iter().min())
                .map(|min| min.saturating_sub(clock.delay))
        } else if let WhenIdle::Follow(leader) = idle {
            leader
        } else {
            // All idle: move on with processing time since the last one went idle.
            let highest = self.partitions.values().filter_map(|p| p.max_event).max();
            let idle_since = self.partitions.values().map(seen).max();
            highest.zip(idle_since).map(|(max, since)| {
                let idle_for = Millis(now.since(since).0 - clock.idle.0).max(Millis(0));
                max.saturating_sub(clock.delay)
                    .saturating_add(idle_for.as_micros())
            })
        };
        match (self.current, candidate) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Adds an assigned partition not known yet, as heard from at `now`.
    pub fn register(&mut self, partition: &str, now: Millis) {
        if !self.partitions.contains_key(partition) {
            self.partitions.insert(
                partition.to_string(),
                PartitionClock {
                    max_event: None,
                    last_seen: now,
                },
            );
        }
    }

    /// Records an event of `partition` with event time `event`, seen at `now`.
    pub fn observe(&mut self, partition: &str, event: Micros, now: Millis) {
        match self.partitions.get_mut(partition) {
            Some(clock) => {
                clock.max_event = Some(clock.max_event.map_or(event, |m| m.max(event)));
                clock.last_seen = now;
            }
            None => {
                self.partitions.insert(
                    partition.to_string(),
                    PartitionClock {
                        max_event: Some(event),
                        last_seen: now,
                    },
                );
            }
        }
    }

    /// Moves the watermark to `at(now)` (or `to`, if later) and returns it.
    pub fn advance(&mut self, now: Millis, clock: Clock, to: Option<Micros>) -> Option<Micros> {
        self.advance_when_idle(now, clock, to, WhenIdle::Advance)
    }

    /// As [`Watermark::advance`], doing `idle` when every partition is idle.
    pub fn advance_when_idle(
        &mut self,
        now: Millis,
        clock: Clock,
        to: Option<Micros>,
        idle: WhenIdle,
    ) -> Option<Micros> {
        let at = self.at_when_idle(now, clock, idle);
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

    /// `n` seconds of event time.
    fn s(n: i64) -> Micros {
        Micros(n * 1_000_000)
    }

    /// Processing time `n` milliseconds after 1970.
    fn ms(n: i64) -> Millis {
        Millis(n)
    }

    fn clock(idle_ms: i64) -> Clock {
        Clock {
            delay: s(10),
            idle: Millis(idle_ms),
            max_future: s(3600),
            session_start: Millis(0),
        }
    }

    #[test]
    fn lagging_partition_holds_the_watermark_back() {
        let c = clock(5_000);
        let mut w = Watermark::default();
        assert_eq!(w.at(ms(0), c), None);
        w.observe("t/0", s(1000), ms(0));
        w.observe("t/1", s(100), ms(0));
        // The minimum over partitions, not Spark's global maximum (990 s).
        assert_eq!(w.advance(ms(0), c, None), Some(s(90)));
        // Partition 1 goes idle (no event for 5 s): it stops holding back.
        w.observe("t/0", s(1001), ms(3_000));
        assert_eq!(w.at(ms(4_999), c), Some(s(90)));
        assert_eq!(w.at(ms(5_000), c), Some(s(991)));
        // Never backwards, even when a lagging partition comes back.
        w.advance(ms(5_000), c, None);
        w.observe("t/1", s(200), ms(5_000));
        assert_eq!(w.advance(ms(5_000), c, None), Some(s(991)));
    }

    #[test]
    fn a_partition_not_heard_from_holds_it_back_until_idle() {
        let c = clock(5_000);
        let mut w = Watermark::default();
        w.register("t/0", ms(0));
        w.register("t/1", ms(0));
        w.observe("t/0", s(1000), ms(1_000));
        assert_eq!(w.advance(ms(1_000), c, None), None);
        assert_eq!(w.at(ms(4_999), c), None);
        assert_eq!(w.at(ms(5_000), c), Some(s(990)));
        // Registering again changes nothing.
        w.register("t/0", ms(9_000));
        assert_eq!(w.partitions["t/0"].last_seen, ms(1_000));
    }

    #[test]
    fn all_idle_advances_with_processing_time_while_running() {
        let c = clock(3_000);
        let mut w = Watermark::default();
        w.observe("t/0", s(100), ms(1_000));
        w.observe("t/1", s(60), ms(2_000));
        assert_eq!(w.advance(ms(2_000), c, None), Some(s(50)));
        // Both idle from 5 000 ms (the last one seen at 2 000 plus 3 000).
        assert_eq!(w.at(ms(5_000), c), Some(s(90)));
        assert_eq!(
            w.at(ms(7_500), c),
            Some(s(92).saturating_add(Micros(500_000)))
        );
        // A restart at 100 000 ms: the time the pipeline was not running does not count.
        let restarted = Clock {
            session_start: ms(100_000),
            ..c
        };
        assert_eq!(w.at(ms(100_000), restarted), Some(s(50)));
        assert_eq!(w.at(ms(104_000), restarted), Some(s(91)));
        // A forced end (flush) wins when later.
        assert_eq!(w.advance(ms(5_000), c, Some(s(500))), Some(s(500)));
        assert_eq!(w.at(ms(5_000), c), Some(s(500)));
    }

    #[test]
    fn an_idle_follower_moves_with_its_leader_not_the_clock() {
        let c = clock(5_000);
        let follow = |leader: i64| WhenIdle::Follow(Some(s(leader)));
        // Never heard from, no partition at all: the leader's watermark at once.
        let mut w = Watermark::default();
        assert_eq!(w.at_when_idle(ms(0), c, follow(70)), Some(s(70)));
        // A partition assigned but silent holds it back until idle, then follows.
        w.register("r/0", ms(0));
        assert_eq!(w.at_when_idle(ms(4_999), c, follow(70)), None);
        assert_eq!(
            w.advance_when_idle(ms(5_000), c, None, follow(70)),
            Some(s(70))
        );
        // A backfill: the leader runs far ahead in a second; the follower keeps up.
        assert_eq!(w.at_when_idle(ms(6_000), c, follow(9_000)), Some(s(9_000)));
        // Active again: its own minimum, never behind what was reached.
        w.observe("r/0", s(100), ms(7_000));
        assert_eq!(
            w.advance_when_idle(ms(7_000), c, None, follow(9_000)),
            Some(s(90))
        );
        w.observe("r/0", s(200), ms(8_000));
        assert_eq!(w.at_when_idle(ms(8_000), c, follow(9_000)), Some(s(190)));
        // Idle once more: the leader, not processing time past the partition's own.
        assert_eq!(w.at_when_idle(ms(60_000), c, follow(300)), Some(s(300)));
        assert_eq!(w.at(ms(60_000), c), Some(s(190 + 47)));
    }
}
