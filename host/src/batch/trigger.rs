//! The trigger loop: when batches run. `available-now` reads up to the end offsets seen at
//! start, in capped batches, then ends; `interval` starts a batch every `interval` until
//! stopped, and a batch cut short by a cap is followed at once by the next, until caught up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{TriggerConfig, TriggerMode};
use crate::record::Offsets;

/// What the trigger drives: the pipeline, or a stand-in in tests.
pub trait Batches {
    /// What a batch can fail with.
    type Error;

    /// The source's end offsets now.
    fn end_offsets(&mut self) -> Result<Offsets, Self::Error>;

    /// Whether every partition's position has reached `ends`.
    fn reached(&self, ends: &Offsets) -> bool;

    /// Runs one batch towards `ends`. Returns `false` when stopped while reading (the batch
    /// is then abandoned whole).
    fn batch(&mut self, ends: &Offsets, stop: &AtomicBool) -> Result<bool, Self::Error>;

    /// Runs a batch without records if one is due: the watermark, moving on while input
    /// is idle, closes a window; or, with `flush`, any window is open.
    fn tick(&mut self, flush: bool) -> Result<(), Self::Error>;

    /// Called while waiting for the next interval (every 100 ms at most), and once per
    /// trigger when the batches leave no time to wait: time for the source's
    /// housekeeping, such as answering its consumer group, and for looks at the catalog.
    fn idle(&mut self) {}

    /// Commits what was processed and held back (the commit cadence): called when the
    /// run ends, at the end of the input or on a stop.
    fn settle(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Runs batches as `trigger` says until it ends (`available-now`) or `stop` is raised.
/// `flush_at_end` closes every open window when an `available-now` run has read
/// everything. Returns whether a stop ended the run.
pub fn drive<B: Batches>(
    trigger: &TriggerConfig,
    flush_at_end: bool,
    batches: &mut B,
    stop: &AtomicBool,
) -> Result<bool, B::Error> {
    let stopped = match trigger.mode {
        TriggerMode::AvailableNow => available_now(flush_at_end, batches, stop),
        TriggerMode::Interval => interval(trigger, batches, stop),
    }?;
    batches.settle()?;
    Ok(stopped)
}

fn available_now<B: Batches>(
    flush_at_end: bool,
    batches: &mut B,
    stop: &AtomicBool,
) -> Result<bool, B::Error> {
    let ends = batches.end_offsets()?;
    tracing::info!(ends = %ends, "available-now: reading up to these end offsets");
    while !batches.reached(&ends) {
        if stop.load(Ordering::Relaxed) || !batches.batch(&ends, stop)? {
            return Ok(true);
        }
    }
    if flush_at_end {
        batches.tick(true)?;
    }
    Ok(false)
}

/// How often a following trigger asks whether records arrived while it waits.
const POLL: Duration = Duration::from_millis(100);

fn interval<B: Batches>(
    trigger: &TriggerConfig,
    batches: &mut B,
    stop: &AtomicBool,
) -> Result<bool, B::Error> {
    let every = trigger.interval;
    let stopped = || stop.load(Ordering::Relaxed);
    let mut next_tick = Instant::now();
    loop {
        let mut waited = false;
        let mut arrival = Arrival::default();
        while let Some(wait) = next_tick.checked_duration_since(Instant::now()) {
            if stopped() {
                return Ok(true);
            }
            batches.idle();
            waited = true;
            if trigger.follows && arrival.settled(batches)? {
                // Start now; the next interval counts from here.
                next_tick = Instant::now();
                break;
            }
            std::thread::sleep(wait.min(POLL));
        }
        if !waited {
            // Behind the interval (the brokers' answer alone can take longer): the idle
            // work still runs once per trigger.
            batches.idle();
        }
        if stopped() {
            return Ok(true);
        }
        next_tick = (next_tick + every).max(Instant::now());
        let ends = batches.end_offsets()?;
        while !batches.reached(&ends) {
            if !batches.batch(&ends, stop)? || stopped() {
                break;
            }
        }
        if stopped() {
            return Ok(true);
        }
        batches.tick(false)?;
    }
}

/// What a following trigger saw of its input while waiting: the end offsets of the last
/// look, when records were waiting.
#[derive(Default)]
struct Arrival {
    waiting: Option<Offsets>,
}

impl Arrival {
    /// Whether records are waiting and no more arrived since the last look (the stage
    /// before sends a batch's records in a burst: one batch takes the burst whole).
    fn settled<B: Batches>(&mut self, batches: &mut B) -> Result<bool, B::Error> {
        let ends = batches.end_offsets()?;
        if batches.reached(&ends) {
            self.waiting = None;
            return Ok(false);
        }
        let settled = self.waiting.as_ref() == Some(&ends);
        self.waiting = Some(ends);
        Ok(settled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TopicPartition;

    /// A source of `end` records on one partition, read `cap` at a time.
    struct Fake {
        end: i64,
        cap: i64,
        at: i64,
        log: Vec<String>,
        stop_after: Option<usize>,
        /// How long the brokers take to give their end offsets.
        slow: Duration,
        idles: usize,
        /// Records arriving later: from this instant on, the end is this.
        later: Option<(Instant, i64)>,
        /// Raised by the first batch.
        batched: std::sync::Arc<AtomicBool>,
    }

    impl Batches for Fake {
        type Error = ();

        fn end_offsets(&mut self) -> Result<Offsets, ()> {
            std::thread::sleep(self.slow);
            if let Some((at, end)) = self.later
                && Instant::now() >= at
            {
                self.end = end;
            }
            let mut o = Offsets::default();
            let tp = TopicPartition {
                topic: "t".into(),
                partition: 0,
            };
            o.set(tp, self.end);
            Ok(o)
        }

        fn reached(&self, ends: &Offsets) -> bool {
            ends.0.values().all(|&e| self.at >= e)
        }

        fn batch(&mut self, ends: &Offsets, _: &AtomicBool) -> Result<bool, ()> {
            let end = *ends.0.values().next().unwrap();
            self.at = (self.at + self.cap).min(end);
            self.log.push(format!("batch to {}", self.at));
            self.batched.store(true, Ordering::Relaxed);
            Ok(self.stop_after.is_none_or(|n| self.log.len() < n))
        }

        fn tick(&mut self, flush: bool) -> Result<(), ()> {
            self.log.push(format!("tick flush={flush}"));
            Ok(())
        }

        fn idle(&mut self) {
            self.idles += 1;
        }
    }

    fn fake(end: i64, cap: i64) -> Fake {
        Fake {
            end,
            cap,
            at: 0,
            log: Vec::new(),
            stop_after: None,
            slow: Duration::ZERO,
            idles: 0,
            later: None,
            batched: Default::default(),
        }
    }

    /// Drives `f` on an interval trigger of `every` until it is stopped after `run`.
    fn every_for(every: Duration, run: Duration, f: &mut Fake) {
        let trigger = TriggerConfig {
            mode: TriggerMode::Interval,
            interval: every,
            ..TriggerConfig::default()
        };
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(run);
                stop.store(true, Ordering::Relaxed);
            });
            assert_eq!(drive(&trigger, false, f, &stop), Ok(true));
        });
    }

    #[test]
    fn available_now_reads_in_capped_batches_then_flushes() {
        let trigger = TriggerConfig {
            mode: TriggerMode::AvailableNow,
            ..TriggerConfig::default()
        };
        let mut f = fake(10, 4);
        let stop = AtomicBool::new(false);
        assert_eq!(drive(&trigger, true, &mut f, &stop), Ok(false));
        assert_eq!(
            f.log,
            ["batch to 4", "batch to 8", "batch to 10", "tick flush=true"]
        );
        let mut f = fake(10, 4);
        f.stop_after = Some(2);
        assert_eq!(drive(&trigger, true, &mut f, &stop), Ok(true));
        assert_eq!(f.log, ["batch to 4", "batch to 8"]);
    }

    #[test]
    fn interval_catches_up_then_ticks_until_stopped() {
        let mut f = fake(5, 2);
        every_for(Duration::from_millis(10), Duration::from_millis(50), &mut f);
        assert_eq!(f.log[..3], ["batch to 2", "batch to 4", "batch to 5"]);
        assert!(
            f.log[3..].iter().all(|l| l == "tick flush=false"),
            "{:?}",
            f.log
        );
        assert!(f.log.len() > 3, "ticks follow while idle: {:?}", f.log);
    }

    #[test]
    fn idle_work_runs_once_per_trigger_when_the_batches_leave_no_wait() {
        let mut f = fake(0, 1);
        f.slow = Duration::from_millis(10);
        every_for(Duration::from_millis(5), Duration::from_millis(100), &mut f);
        let triggers = f.log.len();
        assert!(triggers >= 3, "{:?}", f.log);
        assert!(
            f.idles >= triggers,
            "{} idles for {triggers} triggers",
            f.idles
        );
    }

    /// Records arriving 200 ms into an hour's interval: a following trigger (a stage
    /// reading a repartition topic) takes them at once; another waits for the hour.
    #[test]
    fn a_following_trigger_starts_a_batch_once_records_arrive() {
        for follows in [true, false] {
            let trigger = TriggerConfig {
                mode: TriggerMode::Interval,
                interval: Duration::from_secs(3600),
                follows,
                ..TriggerConfig::default()
            };
            let mut f = fake(0, 10);
            f.later = Some((Instant::now() + Duration::from_millis(200), 3));
            let batched = f.batched.clone();
            let stop = AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let until = Instant::now() + Duration::from_secs(if follows { 30 } else { 1 });
                    while !batched.load(Ordering::Relaxed) && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    stop.store(true, Ordering::Relaxed);
                });
                assert_eq!(drive(&trigger, false, &mut f, &stop), Ok(true));
            });
            let expected: &[&str] = if follows {
                &["tick flush=false", "batch to 3", "tick flush=false"]
            } else {
                &["tick flush=false"]
            };
            assert_eq!(f.log, expected, "follows: {follows}");
        }
    }
}
