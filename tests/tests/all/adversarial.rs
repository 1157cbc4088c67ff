//! Plugins that misbehave are contained: each gets the right typed error, naming the
//! plugin, the limit and the events, and the host goes on serving a well-behaved plugin.

use std::time::Duration;

use sluice::plugin::chain::{self, Fate};
use sluice::plugin::config::{Grants, Limits};
use sluice::plugin::{Failure, Plugin, PluginError, Verdict};
use sluice::record::Record;
use sluice::units::ByteSize;
use sluice_tests::{load, load_with, plugins, records, runtime, seed_events};

fn misbehave(mode: &str, extra: &[(&str, &str)], limits: Limits) -> Result<Plugin, PluginError> {
    let mut params = vec![("mode", mode)];
    params.extend_from_slice(extra);
    load_with(plugins::MISBEHAVE, &params, limits, Grants::default())
}

fn refs(records: &[Record]) -> Vec<&Record> {
    records.iter().collect()
}

/// Runs `mode` over three events and returns the call's failure, after checking the
/// error names the plugin and the events.
fn failure_of(mode: &str, extra: &[(&str, &str)], limits: Limits) -> Failure {
    let plugin = misbehave(mode, extra, limits).expect("loads");
    let records = records(&["{}", "{}", "{}"]);
    let error = plugin
        .process_records(&refs(&records))
        .expect_err("the call fails");
    let PluginError::Call {
        plugin: name,
        failure,
        events,
    } = error
    else {
        panic!("not a call error: {error}")
    };
    assert_eq!(name, "misbehave");
    assert_eq!(events.count, 3);
    assert_eq!(events.first.as_deref(), Some("clicks/0@0"));
    assert_eq!(events.last.as_deref(), Some("clicks/0@2"));
    assert_host_still_serves();
    failure
}

/// A well-behaved plugin on the same runtime still judges the tutorial's events.
pub(crate) fn assert_host_still_serves() {
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap();
    let records = records(&seed_events());
    let verdicts = validator.process_records(&refs(&records)).unwrap();
    assert_eq!(verdicts, vec![Verdict::Keep; 5]);
}

#[test]
fn infinite_loop_hits_the_call_timeout() {
    let limits = Limits {
        call_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let failure = failure_of("spin", &[], limits);
    assert_eq!(
        failure,
        Failure::Deadline {
            limit: Duration::from_millis(200)
        }
    );
    assert_eq!(failure.limit(), Some("call-timeout"));
}

#[test]
fn memory_bomb_hits_the_memory_limit() {
    let limits = Limits {
        memory: ByteSize::mib(16),
        ..Limits::default()
    };
    let failure = failure_of("memory-bomb", &[], limits);
    assert_eq!(
        failure,
        Failure::Memory {
            limit: ByteSize::mib(16)
        }
    );
    assert_eq!(failure.limit(), Some("memory"));
}

/// A plugin that catches its failed allocation and returns an error (as a JavaScript
/// engine does) hit the memory limit all the same (issue 18); a refusal an instance got
/// over does not make a later error of that instance a memory failure.
#[test]
fn an_out_of_memory_error_returned_by_the_plugin_is_the_memory_limit() {
    let limits = Limits {
        memory: ByteSize::mib(16),
        ..Limits::default()
    };
    let plugin = misbehave("reserve", &[], limits).expect("loads");
    let call = |value: &str| plugin.process_records(&refs(&records(&[value])));
    assert_eq!(call("4096").unwrap(), [Verdict::Keep]);

    let error = call("67108864").expect_err("64 MiB do not fit in 16");
    let failure = error.failure().expect("a call error");
    assert_eq!(
        failure,
        &Failure::Memory {
            limit: ByteSize::mib(16)
        }
    );
    assert_eq!(failure.code(), "plugin_memory_exceeded");

    // The growth is refused, the plugin goes on without it, the instance is kept.
    assert_eq!(call("67108864?").unwrap(), [Verdict::Keep]);
    let error = call("fail").expect_err("the plugin fails the chunk");
    assert_eq!(
        error.failure(),
        Some(&Failure::Plugin {
            message: "deliberate failure after the reservations".into()
        })
    );
}

#[test]
fn deep_recursion_hits_the_stack_limit() {
    let failure = failure_of("recursion", &[], Limits::default());
    assert!(
        matches!(failure, Failure::StackOverflow { .. }),
        "{failure}"
    );
    assert_eq!(failure.limit(), Some("max-stack"));
}

#[test]
fn a_panic_traps_with_its_message() {
    let failure = failure_of("trap", &[], Limits::default());
    let Failure::Trap { message } = &failure else {
        panic!("{failure}")
    };
    assert!(message.contains("deliberate trap at offset 0"), "{message}");
    assert_eq!(failure.limit(), None);
}

#[test]
fn huge_output_hits_the_output_limit() {
    let limits = Limits {
        max_output: ByteSize::kib(256),
        ..Limits::default()
    };
    let failure = failure_of("huge-output", &[("bytes", "131072")], limits);
    assert_eq!(
        failure,
        Failure::OutputTooLarge {
            bytes: 3 * 131072,
            limit: ByteSize::kib(256)
        }
    );
}

#[test]
fn wrong_result_count_is_a_broken_contract() {
    let failure = failure_of("wrong-count", &[], Limits::default());
    assert_eq!(
        failure,
        Failure::BadAnswer {
            reason: "answered 2 actions for 3 events".into()
        }
    );
    let failure = failure_of("bad-index", &[], Limits::default());
    assert!(
        matches!(&failure, Failure::BadAnswer { reason } if reason.contains("rewrite for event 0")),
        "{failure}"
    );
}

#[test]
fn a_chunk_error_from_the_plugin_is_reported() {
    let failure = failure_of("process-error", &[], Limits::default());
    assert_eq!(
        failure,
        Failure::Plugin {
            message: "deliberate failure of the whole chunk".into()
        }
    );
}

#[test]
fn failing_init_refuses_the_plugin_at_load() {
    let error = misbehave("fail-init", &[], Limits::default()).unwrap_err();
    let PluginError::Init { plugin, message } = &error else {
        panic!("{error}")
    };
    assert_eq!(plugin, "misbehave");
    assert!(
        message.contains("deliberately refusing to start"),
        "{message}"
    );

    let limits = Limits {
        call_timeout: Duration::from_millis(100),
        ..Limits::default()
    };
    let error = misbehave("spin-init", &[], limits).unwrap_err();
    assert!(
        matches!(&error, PluginError::Init { message, .. } if message.contains("call-timeout")),
        "{error}"
    );
    assert_host_still_serves();
}

/// A patch whose value is not JSON breaks the contract: the whole chunk fails, naming the
/// event and the field, and nothing of it reaches the table.
#[test]
fn a_patch_that_is_not_json_fails_the_chunk() {
    let plugin = misbehave("bad-patch", &[], Limits::default()).unwrap();
    let error = plugin
        .process_records(&refs(&records(&["{}", "{}"])))
        .unwrap_err();
    assert!(
        matches!(error.failure(), Some(Failure::BadAnswer { reason })
            if reason.contains("event 0: the value of patched field `tier` is not JSON")),
        "{error}"
    );
    assert_host_still_serves();
}

#[test]
fn only_the_events_that_trap_fail() {
    let plugin = misbehave("trap", &[("trap-offset", "5")], Limits::default()).unwrap();
    let outcomes = chain::run(std::slice::from_ref(&plugin), records(&["{}"; 16]), 16);
    for (i, outcome) in outcomes.iter().enumerate() {
        match (&outcome.fate, i) {
            (Fate::Failed { stage: 0, error }, 5) => {
                assert!(
                    error.to_string().contains("1 event (clicks/0@5)"),
                    "{error}"
                );
                assert!(matches!(error.failure(), Some(Failure::Trap { .. })));
            }
            (Fate::Kept, i) if i != 5 => {}
            (fate, i) => panic!("event {i}: {fate:?}"),
        }
    }
    // The plugin itself recovers: a fresh instance replaces the one that trapped.
    let ok = records(&["{}"; 3]);
    assert_eq!(
        plugin.process_records(&refs(&ok)).unwrap(),
        vec![Verdict::Keep; 3]
    );
}

/// A loopback port that accepts connections, for a plugin to try: a refusal then comes
/// from the sandbox, not from a closed port. `assert_untouched` checks that nothing
/// connected.
struct Listening(std::net::TcpListener);

impl Listening {
    fn new() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Listening(listener)
    }

    fn port(&self) -> String {
        self.0.local_addr().unwrap().port().to_string()
    }

    fn assert_untouched(&self) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("the plugin reached the listening port: {other:?}"),
        }
    }
}

#[test]
fn the_sandbox_grants_nothing_by_default() {
    let listening = Listening::new();
    let port = listening.port();
    let plugin = misbehave("probe", &[("probe-port", &port)], Limits::default()).unwrap();
    let records = records(&["{}"]);
    let verdicts = plugin.process_records(&refs(&records)).unwrap();
    let Verdict::Reject(report) = &verdicts[0] else {
        panic!("{verdicts:?}")
    };
    let message = &report.message;
    assert!(message.contains("env=0 "), "{message}");
    assert!(message.contains("dir=Err("), "{message}");
    assert!(message.contains("passwd=Err("), "{message}");
    assert!(message.contains("clock=0 "), "{message}");
    assert!(message.contains("net=Err("), "{message}");
    listening.assert_untouched();
}

#[test]
fn grants_open_exactly_what_they_name() {
    let dir = std::env::temp_dir().join(format!("sluice-grant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("reference.csv"), "a,b\n").unwrap();
    let grants = Grants {
        clocks: true,
        env: [("PROBE_DIR".to_string(), dir.display().to_string())].into(),
        read_only_dirs: vec![dir.clone()],
        ..Grants::default()
    };
    let listening = Listening::new();
    let port = listening.port();
    let plugin = load_with(
        plugins::MISBEHAVE,
        &[("mode", "probe"), ("probe-port", &port)],
        Limits::default(),
        grants,
    )
    .unwrap();
    let records = records(&["{}"]);
    let verdicts = plugin.process_records(&refs(&records)).unwrap();
    let Verdict::Reject(report) = &verdicts[0] else {
        panic!("{verdicts:?}")
    };
    let message = &report.message;
    assert!(message.contains("env=1 "), "{message}");
    assert!(
        message.contains("dir=Ok(1)"),
        "the granted folder is readable: {message}"
    );
    assert!(message.contains("passwd=Err("), "{message}");
    assert!(
        message.contains("net=Err("),
        "no grant opens the network: {message}"
    );
    listening.assert_untouched();
    let clock: u64 = message
        .split("clock=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(clock > 1_600_000_000, "{message}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn one_plugin_serves_several_threads() {
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap();
    let mut values = seed_events();
    values.push("{}".into());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let validator = validator.clone();
                let values = values.clone();
                s.spawn(move || {
                    for _ in 0..20 {
                        let records = records(&values);
                        let verdicts = validator.process_records(&refs(&records)).unwrap();
                        assert_eq!(verdicts[..5], vec![Verdict::Keep; 5][..]);
                        assert!(matches!(&verdicts[5], Verdict::Reject(r) if r.code == "missing_required_field"));
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// With `[runtime] enforce-call-timeout = false` the engine compiles no deadline checks:
/// plugins judge exactly as with them, and the other limits still hold.
#[test]
fn without_enforced_call_timeouts_plugins_judge_the_same_and_other_limits_hold() {
    use sluice::generate::{Generator, GeneratorConfig};
    use sluice::plugin::Runtime;
    use sluice::plugin::config::RuntimeConfig;
    use std::path::Path;

    let unchecked = Runtime::new(RuntimeConfig {
        enforce_call_timeout: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let values: Vec<String> = Generator::new(GeneratorConfig::default())
        .take(300)
        .map(|e| e.value)
        .collect();
    let records = records(&values);
    let validator = |runtime: &Runtime| {
        runtime
            .load_file(
                "validator",
                Path::new(plugins::CLICKSTREAM_VALIDATOR),
                Vec::new(),
                Limits::default(),
                Grants::default(),
            )
            .unwrap()
            .process_records(&refs(&records))
            .unwrap()
    };
    let verdicts = validator(&unchecked);
    assert_eq!(verdicts, validator(runtime()));
    assert!(verdicts.iter().any(|v| matches!(v, Verdict::Reject(_))));

    let bomb = unchecked
        .load_file(
            "misbehave",
            Path::new(plugins::MISBEHAVE),
            vec![("mode".into(), "memory-bomb".into())],
            Limits {
                memory: ByteSize::mib(16),
                ..Limits::default()
            },
            Grants::default(),
        )
        .unwrap();
    let error = bomb.process_records(&refs(&records[..3])).unwrap_err();
    assert!(
        matches!(
            error,
            PluginError::Call {
                failure: Failure::Memory { .. },
                ..
            }
        ),
        "{error}"
    );
}

/// A plugin that sleeps waits in a blocking host call, where epoch deadlines do not fire;
/// it is held to its call timeout all the same: without the `clocks` grant its sleeps
/// return at once, with it each lasts at most the call timeout.
#[test]
fn a_sleeping_plugin_is_held_to_its_call_timeout() {
    let timeout = Duration::from_millis(500);
    let limits = Limits {
        call_timeout: timeout,
        ..Limits::default()
    };
    let clocks = Grants {
        clocks: true,
        ..Grants::default()
    };
    for grants in [Grants::default(), clocks] {
        let granted = grants.clocks;
        let plugin = load_with(
            plugins::MISBEHAVE,
            &[("mode", "sleep")],
            limits.clone(),
            grants,
        )
        .unwrap();
        let records = records(&["{}"]);
        let started = std::time::Instant::now();
        let error = plugin.process_records(&refs(&records)).unwrap_err();
        let elapsed = started.elapsed();
        let PluginError::Call { failure, .. } = error else {
            panic!("{error}")
        };
        assert_eq!(
            failure,
            Failure::Deadline { limit: timeout },
            "clocks {granted}"
        );
        assert!(
            elapsed < 2 * timeout + Duration::from_millis(100),
            "clocks {granted}: {elapsed:?}"
        );
    }
    assert_host_still_serves();
}

/// The number a plugin draws from `wasi:random` (through std's hash seeds).
fn drawn(grants: Grants) -> String {
    let plugin = load_with(
        plugins::MISBEHAVE,
        &[("mode", "random")],
        Limits::default(),
        grants,
    )
    .unwrap();
    let verdicts = plugin.process_records(&refs(&records(&["{}"]))).unwrap();
    let Verdict::Reject(report) = &verdicts[0] else {
        panic!("{verdicts:?}")
    };
    report.message.clone()
}

/// Without the `random` grant, randomness is seeded from the module: a fresh instance draws
/// the same numbers, so a replayed batch gets the same answers. With it, it is real.
#[test]
fn randomness_is_deterministic_unless_granted() {
    assert_eq!(drawn(Grants::default()), drawn(Grants::default()));
    let random = || Grants {
        random: true,
        ..Grants::default()
    };
    assert_ne!(drawn(random()), drawn(random()));
}
