//! An event-time pipeline shared by two processes: one active, one standby, elected
//! through Kafka's group protocol. Kill -9 the active one in the middle of the stream: the
//! standby takes over from the table, and the window table equals an uninterrupted run's.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::fixture::{Running, Setup, progress_lines};
use sluice_tests::postgres::Postgres;

use super::event_time::analytics_config;

/// The analytics example (enricher, dedup, 1-minute counts per event type) on a topic of
/// its own.
fn analytics(name: &str) -> Setup {
    let mut s = Setup::new(name);
    s.config = analytics_config();
    s.extra_env
        .push(("SLUICE_ANALYTICS_TOPIC".into(), format!("{name}-analytics")));
    s
}

/// 3 000 analytics events (five minutes of event time) over six partitions, 2% invalid,
/// none late: which windows close and what they hold does not depend on how batches are
/// cut. `rate`: events per second (0: as fast as possible).
fn produce(s: &Setup, rate: &str) -> u64 {
    let summary = s.produce(&[
        "--shape",
        "analytics",
        "--partitions",
        "6",
        "--count",
        "3000",
        "--invalid-share",
        "0.02",
        "--rate",
        rate,
    ]);
    summary.valid
}

/// Small batches, so the active process is killed in the middle of the stream.
const SMALL: [(&str, &str); 3] = [
    ("SLUICE_TRIGGER", "interval"),
    ("SLUICE_INTERVAL", "1s"),
    ("SLUICE_MAX_RECORDS", "200"),
];

/// Which of two running processes commits batches now (the other stands by). Lines logged
/// so far are skipped.
fn the_active_one(both: &[Running; 2]) -> usize {
    for p in both {
        p.wait_for(
            "(nothing: skips what is logged)",
            Duration::from_millis(200),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for (i, p) in both.iter().enumerate() {
            if let Some(batch) = p.progress(Duration::from_millis(300)) {
                assert_eq!(batch["role"], "active", "{batch}");
                return i;
            }
        }
    }
    panic!("neither process commits");
}

/// The closed windows: (start, event type, count, distinct users, max funnel step).
fn windows(s: &Setup) -> BTreeSet<(String, String, i64, i64, i64)> {
    let shown = s.show_window("event-type-counts");
    let n = |v: &Value| match v {
        Value::Number(n) => n.as_f64().unwrap() as i64,
        Value::String(t) => t.parse::<f64>().unwrap() as i64,
        other => panic!("not a number: {other}"),
    };
    shown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["window_start"].as_str().unwrap().to_string(),
                r["event_type"].as_str().unwrap().to_string(),
                n(&r["count"]),
                n(&r["users"]),
                n(&r["max_funnel_step"]),
            )
        })
        .collect()
}

fn rows(s: &Setup) -> usize {
    s.show()["rows"].as_array().map_or(0, Vec::len)
}

#[test]
fn the_standby_takes_over_from_a_killed_active_process() {
    standby_takes_over("standby", |_| {});
}

#[test]
fn the_standby_takes_over_on_a_postgresql_catalog() {
    let pg = Postgres::start();
    standby_takes_over("standby-postgres", |s| {
        s.edit_config(|text| {
            format!(
                "{text}\n[sink.catalog]\ntype = \"sql\"\nname = \"sluice\"\nuri = \"{}\"\n",
                pg.url
            )
        })
    });
}

/// Both processes expire snapshots after every commit, keeping one: the standby still
/// takes over from the mark, and the windows are an uninterrupted run's.
#[test]
fn the_standby_takes_over_from_a_process_that_expired_snapshots() {
    let log = standby_takes_over("standby-expire", |s| {
        s.edit_config(|text| {
            format!(
                "{text}\n[sink.expire-snapshots]\nolder-than = \"0s\"\nretain-last = 1\nevery-commits = 1\n"
            )
        })
    });
    let expired: u64 = progress_lines(&log)
        .iter()
        .map(|p| p["snapshots_expired"].as_u64().unwrap())
        .sum();
    assert!(expired > 0, "{log}");
    assert!(!log.contains("cannot expire snapshots"), "{log}");
}

/// An active and a standby process on the analytics pipeline (`catalog` edits its
/// configuration: where its catalog is, say); the active one is killed while events keep
/// coming.
/// Returns the log of the process that took over.
fn standby_takes_over(name: &str, catalog: impl FnOnce(&mut Setup)) -> String {
    let reference = analytics(&format!("{name}-reference"));
    let valid = produce(&reference, "0");
    let out = reference.run(&SMALL[2..]);
    assert!(
        out.status.success(),
        "{}",
        sluice_tests::fixture::text(&out)
    );
    let want = windows(&reference);
    assert!(want.len() >= 6, "windows closed: {want:?}");

    let mut s = analytics(name);
    catalog(&mut s);
    s.edit_config(|text| {
        text.replace(
            "starting-offsets = \"earliest\"",
            "starting-offsets = \"earliest\"\nmode = \"group\"\nproperties = { \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"500\" }",
        )
    });
    let log = std::thread::scope(|scope| {
        // Events keep coming for 30 s, while the active process dies.
        let producer = scope.spawn(|| produce(&s, "100"));
        std::thread::sleep(Duration::from_secs(2));
        let log = kill_the_active_process(&s, valid);
        assert_eq!(producer.join().unwrap(), valid);
        log
    });
    assert_eq!(windows(&s), want, "the windows of an uninterrupted run");
    log
}

/// Starts two processes, kills the active one in the middle of the stream, measures the
/// failover, and waits for every event. Returns the log of the process that took over.
///
/// Which one is active is read from their logs once both run: on a Kafka broker the
/// election is sticky (the first process stays active), but on tansu 0.6 a process that
/// joins sometimes takes the election over (one handover, fenced like any other).
fn kill_the_active_process(s: &Setup, valid: u64) -> String {
    let first = s.start(&["run"], &SMALL);
    let batch = first.progress(Duration::from_secs(90)).expect("a batch");
    assert_eq!(batch["role"], "active", "{batch}");
    // The events' six partitions and the profiles topic the example joins them with.
    assert_eq!(batch["partitions"].as_array().unwrap().len(), 7, "{batch}");
    let second = s.start(&["run"], &SMALL);
    assert!(
        second
            .wait_for("standby: waiting", Duration::from_secs(60))
            .is_some()
    );
    std::thread::sleep(Duration::from_secs(10));
    let both = [first, second];
    let active = the_active_one(&both);
    let [first, second] = both;
    let (active, standby) = if active == 0 {
        (first, second)
    } else {
        (second, first)
    };
    let (_, _, log) = active.kill();
    let killed = Instant::now();
    assert!(rows(s) < valid as usize, "killed mid-stream:\n{log}");
    assert!(
        standby
            .wait_for("active: this process", Duration::from_secs(60))
            .is_some()
    );
    eprintln!("elected after {:?}", killed.elapsed());
    let took_over = standby
        .progress(Duration::from_secs(120))
        .expect("the standby commits");
    let failover = killed.elapsed();
    assert_eq!(took_over["role"], "active", "{took_over}");
    eprintln!(
        "failover (kill -9 of the active process → first batch committed by the standby): {failover:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    while rows(s) < valid as usize && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    let (status, _, log) = standby.terminate();
    assert!(status.success(), "{log}");
    let shown = s.show();
    let rows = shown["rows"].as_array().unwrap();
    let ids: BTreeSet<&str> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        (rows.len(), ids.len()),
        (valid as usize, valid as usize),
        "every valid event once:\n{log}"
    );
    log
}
