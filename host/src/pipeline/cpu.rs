//! CPU time, for the progress line's CPU per phase (`cpu_us`): the kernel's CPU clocks of
//! the whole process (every thread, librdkafka's included) and of the calling thread. Each
//! read is one `clock_gettime`, taken a few times per batch and per thread, never per
//! record.

use std::time::Duration;

use rustix::time::{ClockId, clock_gettime};

/// CPU time the process has used so far, all threads together.
pub(super) fn process() -> Duration {
    of(ClockId::ProcessCPUTime)
}

/// CPU time the calling thread has used so far.
pub(super) fn thread() -> Duration {
    of(ClockId::ThreadCPUTime)
}

fn of(clock: ClockId) -> Duration {
    let t = clock_gettime(clock);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// CPU time spent on `work` by the calling thread, with its result.
pub(super) fn on_thread<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let before = thread();
    let out = work();
    (out, thread().saturating_sub(before))
}

/// CPU time spent by the whole process while `work` ran, with its result.
pub(super) fn in_process<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let before = process();
    let out = work();
    (out, process().saturating_sub(before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_shows_on_the_thread_and_process_clocks_and_sleep_does_not() {
        // Spins until this thread's own clock says 20 ms (however busy the machine is),
        // with a wall-clock cap in case the clock does not move.
        let spin = || {
            let (start, wall) = (thread(), std::time::Instant::now());
            while thread().saturating_sub(start) < Duration::from_millis(20)
                && wall.elapsed() < Duration::from_secs(10)
            {
                std::hint::black_box(0u64);
            }
        };
        let (_, busy) = on_thread(spin);
        assert!(busy >= Duration::from_millis(20), "{busy:?}");
        let (_, idle) = on_thread(|| std::thread::sleep(Duration::from_millis(30)));
        assert!(idle < busy, "sleeping cost {idle:?}");
        let (_, all) = in_process(spin);
        assert!(all >= Duration::from_millis(20), "{all:?}");
    }
}
