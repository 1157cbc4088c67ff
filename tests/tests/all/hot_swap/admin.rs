//! Swaps through the admin API: uploads, activation, rollback, reports, and the token.

use super::*;

#[test]
fn the_admin_api_swaps_rolls_back_reports_and_wants_its_token() {
    let mut s = Setup::new("admin");
    let port = sluice_tests::free_port();
    let addr = format!("127.0.0.1:{port}");
    s.write_config(
        "admin.toml",
        &format!(
            "{CONFIG}\n[admin]\nlisten = \"{addr}\"\ntoken = \"${{SLUICE_ADMIN_TOKEN}}\"\nmax-upload = \"4MiB\"\n"
        ),
    );
    s.extra_env
        .push(("SLUICE_ADMIN_TOKEN".into(), "s3cret".into()));
    install(plugins::KEEP_ALL, &s.warehouse.join("rules.wasm"));
    let keep_all = load(plugins::KEEP_ALL, &[]).unwrap().digest().to_string();
    let enricher = std::fs::read(plugins::CLICKSTREAM_ENRICHER).unwrap();

    let producer = load_continuously(&s, 10000);
    let running = s.start(&["run"], &[]);
    let mut progress = Vec::new();
    running.follow(&mut progress, "sluice::progress", Duration::from_secs(60));

    assert_eq!(
        http(&addr, "GET", "/healthz", None, b"", None),
        (200, "ok\n".into())
    );
    // Changes need the token.
    let upload = "/stages/rules/modules";
    assert_eq!(http(&addr, "POST", upload, None, &enricher, None).0, 401);
    assert_eq!(
        http(&addr, "POST", upload, Some("guess"), &enricher, None).0,
        401
    );
    assert_eq!(
        http(&addr, "POST", "/stages/rules/rollback", None, b"", None).0,
        401
    );
    // Uploads are size-limited, checked at once, and refused with the reason.
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), b"", Some(5 << 20));
    assert_eq!(status, 413, "{body}");
    let fail_init = std::fs::read(plugins::FAIL_INIT).unwrap();
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), &fail_init, None);
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("deliberately refusing to start"), "{body}");
    assert_eq!(
        http(
            &addr,
            "POST",
            "/stages/nope/modules",
            Some("s3cret"),
            &enricher,
            None
        )
        .0,
        404
    );
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), &enricher, None);
    assert_eq!(status, 201, "{body}");
    let uploaded: Value = serde_json::from_str(&body).unwrap();
    let digest = uploaded["digest"].as_str().unwrap().to_string();
    let (_, listed) = http(&addr, "GET", "/stages", None, b"", None);
    assert!(listed.contains(&digest), "the upload waits: {listed}");

    // Activate it: the next batch runs on it.
    let activate = format!("{{\"digest\": \"{digest}\"}}");
    let (status, body) = http(
        &addr,
        "POST",
        "/stages/rules/activate",
        Some("s3cret"),
        activate.as_bytes(),
        None,
    );
    assert_eq!(status, 202, "{body}");
    let first_on_new = batch_after(&running, &mut progress, "activated a new plugin version");
    assert_eq!(digest_of(&first_on_new), digest);

    // Roll back: the next batch runs on keep-all again.
    let (status, body) = http(
        &addr,
        "POST",
        "/stages/rules/rollback",
        Some("s3cret"),
        b"",
        None,
    );
    assert_eq!(status, 202, "{body}");
    let last = &batch_after(
        &running,
        &mut progress,
        "rolled back to the previous plugin version",
    );
    assert_eq!(digest_of(last), keep_all);
    assert!(
        last["stages"]["rules"]["rolled_back"]
            .as_str()
            .unwrap()
            .contains("admin API")
    );

    // Shadow mode through the API: an upload runs beside the stage without judging.
    let validator = std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap();
    let (status, body) = http(&addr, "POST", upload, Some("s3cret"), &validator, None);
    assert_eq!(status, 201, "{body}");
    let uploaded: Value = serde_json::from_str(&body).unwrap();
    let shadow = uploaded["digest"].as_str().unwrap().to_string();
    let request = format!("{{\"digest\": \"{shadow}\"}}");
    let (status, body) = http(
        &addr,
        "POST",
        "/stages/rules/shadow",
        Some("s3cret"),
        request.as_bytes(),
        None,
    );
    assert_eq!(status, 202, "{body}");
    let last = &batch_after(&running, &mut progress, "running a shadow version");
    assert_eq!(last["stages"]["rules"]["shadow"]["digest"], shadow.as_str());
    assert_eq!(digest_of(last), keep_all, "the shadow does not judge");

    // What the pipeline did, for people and for Prometheus.
    let (status, listed) = http(&addr, "GET", "/stages", None, b"", None);
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["stages"][0]["active"]["digest"], keep_all.as_str());
    let (status, metrics) = http(&addr, "GET", "/metrics", None, b"", None);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("# TYPE sluice_batches_total counter"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "sluice_plugin_events_total{{stage=\"rules\",digest=\"{digest}\"}}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_plugin_rollbacks_total{stage=\"rules\"} 1"),
        "{metrics}"
    );
    let committed = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_last_commit_timestamp_seconds "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_default();
    assert!(committed > 1.7e9, "the last commit's time: {metrics}");
    // A series per partition read, for the lag.
    let lag_of = format!("sluice_partition_lag_records{{partition=\"{}/", s.topic);
    let partitions = metrics.lines().filter(|l| l.starts_with(&lag_of)).count();
    assert_eq!(partitions, 2, "{metrics}");
    for family in [
        "sluice_plugin_calls_total",
        "sluice_plugin_stage_seconds_total",
    ] {
        assert!(
            metrics.contains(&format!("{family}{{stage=\"rules\"")),
            "{metrics}"
        );
    }
    let (status, recent) = http(&addr, "GET", "/status", None, b"", None);
    assert_eq!(status, 200);
    let recent: Value = serde_json::from_str(&recent).unwrap();
    assert!(!recent["recent"].as_array().unwrap().is_empty());

    let produced = producer.join().unwrap().delivered + 1;
    wait_until_committed(&running, &mut progress, produced);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");
    // Through a swap, a rollback and a shadow, every record was committed exactly once.
    let shown = s.show();
    let ids: std::collections::BTreeSet<&str> = shown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(shown["rows"].as_array().unwrap().len() as u64, produced);
    assert_eq!(ids.len() as u64, produced);
    assert!(shown["dead_letters"].as_array().unwrap().is_empty());
    // Every change and every refusal is in the audit log.
    let audit: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sluice::audit"))
        .collect();
    assert!(
        audit
            .iter()
            .filter(|l| l.contains("no valid token"))
            .count()
            >= 3,
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|l| l.contains("/stages/rules/activate") && l.contains("202")),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|l| l.contains("/stages/rules/rollback") && l.contains("202")),
        "{audit:?}"
    );
}
