//! What the benchmarks measure of a process: CPU time and peak resident memory, from the
//! kernel (`/proc` and `getrusage`).

use std::process::Command;
use std::time::Duration;

/// User and system CPU time of a running process so far (`/proc/PID/stat`).
pub fn cpu_of(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (in parentheses) start at the 3rd (state), so
    // utime (the 14th) is index 11 and stime index 12.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Duration::from_secs_f64((ticks(11) + ticks(12)) / clock_ticks())
}

/// Clock ticks per second (`getconf CLK_TCK`).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The peak resident memory of a running process so far, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmHWM:")
}

/// The resident memory of a running process now, in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS:")
}

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// User and system CPU time of this process's children that have ended and been waited
/// for: the difference across one child's `wait` is that child's whole CPU time.
#[allow(unsafe_code)]
pub fn ended_children_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_CHILDREN is a valid `who`.
    let usage = unsafe {
        assert_eq!(
            libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()),
            0
        );
        usage.assume_init()
    };
    let of = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    of(usage.ru_utime) + of(usage.ru_stime)
}

/// Waits for `child` to end; its exit status and its peak resident memory in KiB (the
/// kernel's `ru_maxrss` of that child alone, from `wait4`).
#[allow(unsafe_code)]
pub fn wait_peak_rss(child: std::process::Child) -> (std::process::ExitStatus, u64) {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 waits for the child `pid` (ours, not yet waited for) and fills the
    // status and the struct it is given.
    let usage = unsafe {
        assert_eq!(libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()), pid);
        usage.assume_init()
    };
    std::mem::forget(child); // waited for above
    (
        std::process::ExitStatus::from_raw(status),
        usage.ru_maxrss as u64,
    )
}
