//! The admin API's changes outlive the process and the log level: a version activated
//! through the API runs again after a restart (until it is rolled back), a rollback with
//! nothing to go back to is refused with 409, and every change is in the audit log under
//! `--log warn`. Plugins are built from source; the broker is tansu.

use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_tests::fixture::{Running, Setup};
use sluice_tests::{load, plugins, produce};

use crate::hot_swap::{CONFIG, digest_of, http, install};

const TOKEN: &str = "s3cret";

fn post(addr: &str, path: &str, body: &[u8]) -> (u16, String) {
    http(addr, "POST", path, Some(TOKEN), body, None)
}

/// Produces `n` valid generated events (creating the topic with two partitions).
fn events(s: &Setup, n: u64) {
    let n = n.to_string();
    let args = ["--partitions", "2", "--count", &n, "--invalid-share", "0"];
    produce(&s.broker.bootstrap, &s.topic, &args);
}

/// Follows the progress lines until a batch ran `digest` on the stage.
fn until_digest(running: &Running, progress: &mut Vec<Value>, digest: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        running.follow(progress, "sluice::progress", Duration::from_secs(60));
        if digest_of(progress.last().unwrap()) == digest {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no batch on {digest}: {progress:?}"
        );
    }
}

/// The audit lines of `log` about `call` that answered `status`.
fn audited(log: &str, call: &str, status: u16) -> bool {
    log.lines().any(|l| {
        l.contains("sluice::audit") && l.contains(call) && l.contains(&format!("status={status}"))
    })
}

#[test]
fn an_activated_version_outlives_a_restart_and_every_change_is_audited_at_warn() {
    let mut s = Setup::new("admin-state");
    let addr = format!("127.0.0.1:{}", sluice_tests::free_port());
    let state = s.warehouse.join("admin-state");
    s.write_config(
        "admin.toml",
        &format!(
            "{CONFIG}\n[admin]\nlisten = \"{addr}\"\ntoken = \"{TOKEN}\"\nstate-dir = {:?}\n",
            state.display().to_string()
        ),
    );
    install(plugins::KEEP_ALL, &s.warehouse.join("rules.wasm"));
    let keep_all = load(plugins::KEEP_ALL, &[]).unwrap().digest().to_string();
    let enricher = std::fs::read(plugins::CLICKSTREAM_ENRICHER).unwrap();
    events(&s, 20);

    // Logs at `warn`, but for the progress lines the test follows.
    let running = s.start(&["run", "--log", "warn,sluice::progress=info"], &[]);
    let mut progress = Vec::new();
    until_digest(&running, &mut progress, &keep_all);
    let (status, body) = post(&addr, "/stages/rules/rollback", b"");
    assert_eq!(status, 409, "nothing to roll back to: {body}");
    let (status, body) = post(&addr, "/stages/rules/modules", &enricher);
    assert_eq!(status, 201, "{body}");
    let uploaded: Value = serde_json::from_str(&body).unwrap();
    let digest = uploaded["digest"].as_str().unwrap().to_string();
    let activate = format!("{{\"digest\": \"{digest}\"}}");
    let (status, body) = post(&addr, "/stages/rules/activate", activate.as_bytes());
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["persisted"],
        true
    );
    events(&s, 20);
    until_digest(&running, &mut progress, &digest);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert!(!log.contains("admin API listening"), "logs at warn: {log}");
    assert!(audited(&log, "/stages/rules/rollback", 409), "{log}");
    assert!(audited(&log, "/stages/rules/modules", 201), "{log}");
    assert!(audited(&log, "/stages/rules/activate", 202), "{log}");

    // Restarted, the stage runs the activated version again, from the first batch.
    events(&s, 20);
    let running = s.start(&["run"], &[]);
    let said = running.follow(
        &mut progress,
        "the stage runs the version activated through the admin API",
        Duration::from_secs(60),
    );
    assert!(said.contains(&digest) && said.contains(&keep_all), "{said}");
    running.follow(&mut progress, "sluice::progress", Duration::from_secs(60));
    assert_eq!(digest_of(progress.last().unwrap()), digest);
    let (_, stages) = http(&addr, "GET", "/stages", None, b"", None);
    let stages: Value = serde_json::from_str(&stages).unwrap();
    assert_eq!(stages["stages"][0]["activation"]["digest"], digest.as_str());

    // Rolled back to the file's version, which a restart then runs.
    let (status, body) = post(&addr, "/stages/rules/rollback", b"");
    assert_eq!(status, 202, "{body}");
    events(&s, 20);
    until_digest(&running, &mut progress, &keep_all);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert!(
        log.contains("the activation") && log.contains("no longer runs"),
        "{log}"
    );
    let running = s.start(&["run"], &[]);
    let said = running.follow(
        &mut progress,
        "the stage runs its file's version",
        Duration::from_secs(60),
    );
    assert!(said.contains(&keep_all), "{said}");
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    let record = std::fs::read_to_string(state.join("swap/activations.json")).unwrap();
    assert!(!record.contains("rules"), "{record}");
}
