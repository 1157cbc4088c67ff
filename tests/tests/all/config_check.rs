//! `sluice run --check` refuses what `sluice run` cannot do (exit 78, naming the key), and
//! `run` refuses it too instead of panicking or retrying: a zero bucket count, invalid or
//! repeated topic names, a table that would leave the warehouse, an empty bootstrap list, a
//! lookup topic that does not exist.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sluice_tests::fixture::{Setup, ended_within, sluice_binary, text};

/// A pipeline that `run --check` passes: no stages, a table to create, a dead-letter topic.
const BASE: &str = r#"
[pipeline]
name = "checked"

[source]
bootstrap-servers = "127.0.0.1:9"
topics = ["events"]

[sink]
warehouse = "warehouse"
namespace = "tutorial"
table = "events"
columns = [{ name = "event_id", type = "string" }, { name = "event_time", type = "timestamptz" }]
partition-by = ["day(event_time)"]

[dead-letter]
topic = "${CHECK_DEAD_LETTER:-dead-letter}"
"#;

/// `sluice run --check` on `text`, written to a file of a fresh folder, with `env`.
fn check(name: &str, text: &str, env: &[(&str, &str)]) -> Output {
    let dir =
        std::env::temp_dir().join(format!("sluice-config-check-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(sluice_binary())
        .args(["run", "--check", "--config", file.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn run_check_refuses_what_run_cannot_do_naming_the_key() {
    let out = check("base", BASE, &[]);
    assert!(out.status.success(), "{}", text(&out));
    for (name, from, to, key) in [
        (
            "bucket0",
            "[\"day(event_time)\"]",
            "[\"bucket[0](event_id)\"]",
            "sink.partition-by[0]",
        ),
        (
            "truncate0",
            "[\"day(event_time)\"]",
            "[\"day(event_time)\", \"truncate[0](event_id)\"]",
            "sink.partition-by[1]",
        ),
        (
            "dlq-empty",
            "${CHECK_DEAD_LETTER:-dead-letter}",
            "",
            "dead-letter.topic",
        ),
        (
            "dlq-dotdot",
            "${CHECK_DEAD_LETTER:-dead-letter}",
            "..",
            "dead-letter.topic",
        ),
        (
            "topic-chars",
            "[\"events\"]",
            "[\"events\", \"bad topic\"]",
            "source.topics[1]",
        ),
        (
            "topic-twice",
            "[\"events\"]",
            "[\"events\", \"events\"]",
            "source.topics[1]",
        ),
        (
            "table-escape",
            "table = \"events\"",
            "table = \"../../x\"",
            "sink.table",
        ),
        (
            "table-dotdot",
            "table = \"events\"",
            "table = \"..\"",
            "sink.table",
        ),
        (
            "table-backslash",
            "table = \"events\"",
            "table = 'a\\b'",
            "sink.table",
        ),
        (
            "namespace-escape",
            "namespace = \"tutorial\"",
            "namespace = \"../..\"",
            "sink.namespace",
        ),
        (
            "namespace-slash",
            "namespace = \"tutorial\"",
            "namespace = \"/\"",
            "sink.namespace",
        ),
        (
            "namespace-empty-level",
            "namespace = \"tutorial\"",
            "namespace = \"a..b\"",
            "sink.namespace",
        ),
        (
            "no-bootstrap",
            "\"127.0.0.1:9\"",
            "\"\"",
            "source.bootstrap-servers",
        ),
    ] {
        assert!(BASE.contains(from), "{name}");
        let out = check(name, &BASE.replacen(from, to, 1), &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{name}: {}", text(&out));
        assert!(stderr.contains(key), "{name}: the key is named: {stderr}");
    }
    // A name from the environment is refused without being echoed, whatever it holds.
    let out = check("dlq-env", BASE, &[("CHECK_DEAD_LETTER", "s3cr3t\t\"\\")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{}", text(&out));
    assert!(stderr.contains("dead-letter.topic"), "{stderr}");
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
}

/// A zero bucket count used to pass the check, create the table, then panic dividing by
/// zero on the first write (exit 101): now `run` refuses the file before touching anything.
#[test]
fn run_refuses_a_zero_bucket_count_instead_of_panicking() {
    let mut s = Setup::new("bucket-zero");
    s.edit_example_config(|c| {
        c.replace(
            "partition-by = [\"day(event_time)\"]",
            "partition-by = [\"day(event_time)\", \"bucket[0](event_id)\"]",
        )
    });
    s.produce_file("1");
    let out = s.run(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{}", text(&out));
    assert!(stderr.contains("sink.partition-by[1]"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !s.warehouse.join("tutorial").exists(),
        "no table was created"
    );
}

/// A lookup topic that does not exist stops the run at once, as a missing source topic
/// does, instead of being retried as a transient fault for the whole fault budget.
#[test]
fn a_missing_lookup_topic_fails_at_once() {
    let mut s = Setup::new("lookup-missing");
    s.edit_example_config(|c| {
        c.replace(
            "topic = \"${SLUICE_PRODUCTS_TOPIC:-retail-products}\"",
            "topic = \"lookup-missing-products\"",
        )
    });
    s.produce_file("1");
    let child = s
        .command(&["run", "--available-now"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, took) = ended_within(child, Duration::from_secs(90))
        .unwrap_or_else(|out| panic!("still retrying after 90 s: {}", text(&out)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr.contains("lookup `products`: topic `lookup-missing-products` does not exist"),
        "{stderr}"
    );
    assert!(!stderr.contains("transient fault"), "not retried: {stderr}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
