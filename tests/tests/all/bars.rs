//! Progress bars for long command-line work: drawn on a terminal with text logs (util-linux's
//! `script` gives the command a pseudo-terminal), never when standard error is piped, never
//! in JSON logs.

use std::process::{Command, Stdio};

use sluice_tests::broker::Broker;
use sluice_tests::fixture::{Setup, sluice_binary, text};

use crate::hardening::produce_valid;

/// `sluice ARGS…` on a pseudo-terminal (util-linux's `script`): what the terminal showed.
fn on_a_terminal(args: &[&str]) -> String {
    let mut command = Command::new(sluice_binary());
    command.args(args).env_remove("RUST_LOG");
    command_on_a_terminal(command)
}

/// `command` (its program, arguments, environment and directory) run on a pseudo-terminal:
/// what the terminal showed.
fn command_on_a_terminal(command: Command) -> String {
    let line = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| format!("'{}'", a.to_str().unwrap()))
        .collect::<Vec<_>>()
        .join(" ");
    let mut script = Command::new("script");
    script
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => script.env(key, value),
            None => script.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        script.current_dir(dir);
    }
    let out = script.output().expect("util-linux's script");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A progress bar on a terminal with text logs; none in JSON logs, none when standard error
/// is not a terminal.
#[test]
fn a_progress_bar_only_on_a_terminal_with_text_logs() {
    let broker = Broker::start();
    let produce = |log_format: &str| {
        let args = [
            "--log-format",
            log_format,
            "produce",
            "--bootstrap-servers",
            &broker.bootstrap,
            "--topic",
            "bars",
            "--create-topic",
            "--count",
            "3000",
            "--rate",
            "2000",
        ];
        args.map(str::to_string)
    };
    let args = produce("text");
    let shown = on_a_terminal(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        shown.contains("events sent") && shown.contains("/3,000"),
        "{shown}"
    );
    let args = produce("json");
    let json = on_a_terminal(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!json.contains("events sent"), "{json}");
    assert!(json.contains("\"delivered\":3000"), "{json}");
    let piped = Command::new(sluice_binary())
        .args(produce("text"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(piped.status.success());
    let logs = String::from_utf8_lossy(&piped.stderr).into_owned();
    assert!(!logs.contains("events sent"), "{logs}");
    assert!(logs.contains("delivered=3000"), "{logs}");
}

/// `sluice plugin test` on a large samples file draws its bar on a terminal, and the same
/// run piped draws none.
#[test]
fn plugin_test_shows_a_bar_on_a_terminal() {
    let samples = std::fs::read_to_string(
        sluice_tests::repo_root().join("udfs/clickstream-validator/samples.jsonl"),
    )
    .unwrap();
    let big = std::env::temp_dir().join(format!("sluice-bar-samples-{}", std::process::id()));
    std::fs::write(&big, samples.repeat(2000)).unwrap();
    let plugin = sluice_tests::plugins::CLICKSTREAM_VALIDATOR;
    let args = ["plugin", "test", plugin, "--samples", big.to_str().unwrap()];
    let shown = on_a_terminal(&args);
    let piped = Command::new(sluice_binary()).args(args).output().unwrap();
    let _ = std::fs::remove_file(&big);
    assert!(
        shown.contains("samples") && shown.contains("/12,000"),
        "{shown}"
    );
    assert!(
        shown.contains("12000 samples, 12000 as expected"),
        "{shown}"
    );
    let logs = String::from_utf8_lossy(&piped.stderr);
    assert!(
        piped.status.success() && !logs.contains("/12,000"),
        "{logs}"
    );
}

/// `sluice maintain` says which step it is at on a terminal, and nothing of it when piped.
#[test]
fn maintain_shows_its_step_on_a_terminal() {
    let s = Setup::new("maintain-bar");
    produce_valid(&s, 10, 1);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = command_on_a_terminal(s.command(&["maintain"]));
    assert!(shown.contains("expiring snapshots"), "{shown}");
    let piped = s.command(&["maintain"]).output().unwrap();
    assert!(piped.status.success(), "{}", text(&piped));
    assert!(
        !text(&piped).contains("expiring snapshots"),
        "{}",
        text(&piped)
    );
}

/// A plugin compiled on a terminal (an empty compile cache) shows a spinner while it
/// compiles; the same compile piped shows none.
#[test]
fn a_plugin_compile_shows_a_spinner_on_a_terminal() {
    let plugin = sluice_tests::plugins::CLICKSTREAM_VALIDATOR;
    let samples = sluice_tests::repo_root().join("udfs/clickstream-validator/samples.jsonl");
    let compile = |cache: &str| {
        let cache = std::env::temp_dir().join(format!("sluice-bar-{cache}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let mut command = Command::new(sluice_binary());
        command
            .args(["plugin", "test", plugin, "--samples"])
            .arg(&samples)
            .env("XDG_CACHE_HOME", &cache)
            .env_remove("RUST_LOG");
        (command, cache)
    };
    let (command, cache) = compile("terminal");
    let shown = command_on_a_terminal(command);
    let _ = std::fs::remove_dir_all(cache);
    assert!(shown.contains("compiling plugin"), "{shown}");
    let (mut command, cache) = compile("piped");
    let piped = command.stdin(Stdio::null()).output().unwrap();
    let _ = std::fs::remove_dir_all(cache);
    assert!(piped.status.success(), "{}", text(&piped));
    assert!(
        !text(&piped).contains("compiling plugin"),
        "{}",
        text(&piped)
    );
}
