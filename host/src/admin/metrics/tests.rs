//! The metrics' cases: every family served with its type, values after batches, bounded
//! code labels, both text formats.

use std::collections::BTreeMap;

use super::partitions::MAX_PARTITION_LABELS;
use super::*;
use crate::admin::tests::progress;

/// Every family served, with its type: the list in the book's metrics chapter
/// (`docs/src/operations/metrics.md`).
const FAMILIES: [(&str, &str); 52] = [
    ("sluice_batches", "counter"),
    ("sluice_input_rows", "counter"),
    ("sluice_rows_written", "counter"),
    ("sluice_rows_dead_lettered", "counter"),
    ("sluice_dead_lettered", "counter"),
    ("sluice_dropped_fields", "counter"),
    ("sluice_files_written", "counter"),
    ("sluice_written_bytes", "counter"),
    ("sluice_commit_retries", "counter"),
    ("sluice_snapshots_expired", "counter"),
    ("sluice_snapshot_expiry_failures", "counter"),
    ("sluice_batches_fenced", "counter"),
    ("sluice_rebalances", "counter"),
    ("sluice_partitions", "gauge"),
    ("sluice_active", "gauge"),
    ("sluice_batch_duration_seconds", "histogram"),
    ("sluice_batch_phase_seconds", "counter"),
    ("sluice_last_batch_id", "gauge"),
    ("sluice_lag_records", "gauge"),
    ("sluice_last_commit_timestamp_seconds", "gauge"),
    ("sluice_plugin_events", "counter"),
    ("sluice_plugin_kept", "counter"),
    ("sluice_plugin_rejected", "counter"),
    ("sluice_plugin_failed", "counter"),
    ("sluice_plugin_rewritten", "counter"),
    ("sluice_plugin_calls", "counter"),
    ("sluice_plugin_stage_seconds", "counter"),
    ("sluice_plugin_verdicts", "counter"),
    ("sluice_plugin_swaps", "counter"),
    ("sluice_plugin_rollbacks", "counter"),
    ("sluice_plugin_refused", "counter"),
    ("sluice_rows_late", "counter"),
    ("sluice_rows_deduplicated", "counter"),
    ("sluice_watermark_seconds", "gauge"),
    ("sluice_windows_emitted", "counter"),
    ("sluice_state_rows", "gauge"),
    ("sluice_state_bytes", "gauge"),
    ("sluice_state_file_bytes", "gauge"),
    ("sluice_join_rows_evicted", "counter"),
    ("sluice_lookup_keys", "gauge"),
    ("sluice_lookup_bytes", "gauge"),
    ("sluice_lookup_skipped_records", "counter"),
    ("sluice_lookup_refresh_failures", "counter"),
    ("sluice_compactions", "counter"),
    ("sluice_compaction_files_rewritten", "counter"),
    ("sluice_compaction_bytes_rewritten", "counter"),
    ("sluice_compaction_files_written", "counter"),
    ("sluice_compaction_bytes_written", "counter"),
    ("sluice_compaction_conflicts", "counter"),
    ("sluice_compaction_abandoned", "counter"),
    ("sluice_compaction_failures", "counter"),
    ("sluice_partition_lag_records", "gauge"),
];

/// The families whose series are labelled by what a batch reports: they appear with
/// their first series.
const LABELLED_LATER: [&str; 18] = [
    "sluice_partition_lag_records",
    "sluice_dead_lettered",
    "sluice_dropped_fields",
    "sluice_plugin_events",
    "sluice_plugin_kept",
    "sluice_plugin_rejected",
    "sluice_plugin_failed",
    "sluice_plugin_rewritten",
    "sluice_plugin_calls",
    "sluice_plugin_stage_seconds",
    "sluice_plugin_verdicts",
    "sluice_windows_emitted",
    "sluice_state_rows",
    "sluice_state_bytes",
    "sluice_join_rows_evicted",
    "sluice_lookup_keys",
    "sluice_lookup_bytes",
    "sluice_lookup_skipped_records",
];

fn has(text: &str, line: &str) {
    assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
}

/// The families in `text` with their types; checks each has its `HELP`.
fn families(text: &str) -> Vec<(&str, &str)> {
    let typed: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    for (name, _) in &typed {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
    }
    typed
}

#[test]
fn every_family_is_there_before_the_first_batch() {
    let text = Metrics::new(["rules"]).render(Format::OpenMetrics).unwrap();
    let present: Vec<_> = FAMILIES
        .into_iter()
        .filter(|(name, _)| !LABELLED_LATER.contains(name))
        .collect();
    assert_eq!(families(&text), present, "{text}");
    has(&text, "sluice_batches_total 0");
    has(&text, "sluice_lag_records 0");
    has(&text, "sluice_last_commit_timestamp_seconds 0.0");
    has(&text, "sluice_batch_duration_seconds_count 0");
    has(
        &text,
        "sluice_batch_phase_seconds_total{phase=\"dead_letter\"} 0.0",
    );
    has(&text, "sluice_plugin_rollbacks_total{stage=\"rules\"} 0");
    has(&text, "# UNIT sluice_written_bytes bytes");
    has(&text, "# EOF");
}

#[test]
fn metrics_render_a_real_progress_with_event_time() {
    let metrics = Metrics::new(["rules"]);
    metrics.record(&progress(1));
    let mut second = progress(2);
    let rules = second.stages.get_mut("rules").unwrap();
    rules.rollbacks = 1;
    rules.digest = "cd34".into();
    metrics.record(&second);
    metrics.fenced();
    let text = metrics.render(Format::OpenMetrics).unwrap();
    assert_eq!(families(&text), FAMILIES, "{text}");
    has(&text, "sluice_batches_fenced_total 1");
    has(&text, "sluice_rebalances_total 2");
    has(&text, "sluice_partitions 2");
    has(&text, "# TYPE sluice_batches counter");
    has(&text, "# HELP sluice_batches Batches committed.");

    // Counters add up over the two batches; counts since the start are taken as they are.
    has(&text, "sluice_batches_total 2");
    has(&text, "sluice_input_rows_total 20");
    has(&text, "sluice_commit_retries_total 2");
    has(&text, "sluice_snapshots_expired_total 6");
    has(&text, "sluice_snapshot_expiry_failures_total 0");
    has(&text, "sluice_compaction_files_rewritten_total 80");
    has(&text, "sluice_compaction_conflicts_total 4");
    has(&text, "sluice_lookup_keys{lookup=\"profiles\"} 3");
    has(&text, "sluice_lookup_bytes{lookup=\"profiles\"} 120");
    has(&text, "sluice_lookup_refresh_failures_total 2");
    has(
        &text,
        "sluice_lookup_skipped_records_total{lookup=\"profiles\"} 2",
    );
    has(&text, "sluice_written_bytes_total 2000");
    has(&text, "sluice_rows_late_total 2");
    // Counts since the start: the last one, not the sum.
    has(
        &text,
        "sluice_join_rows_evicted_total{join=\"with_profiles\",side=\"right\"} 2",
    );
    has(
        &text,
        "sluice_join_rows_evicted_total{join=\"with_profiles\",side=\"left\"} 3",
    );
    has(
        &text,
        "sluice_windows_emitted_total{window=\"per_minute\"} 6",
    );
    has(
        &text,
        "sluice_batch_phase_seconds_total{phase=\"plugins\"} 1.0",
    );
    has(&text, "sluice_plugin_swaps_total{stage=\"rules\"} 1");
    has(&text, "sluice_plugin_rollbacks_total{stage=\"rules\"} 1");
    // Per version: each digest its own series.
    has(
        &text,
        "sluice_plugin_rejected_total{stage=\"rules\",digest=\"ab12\"} 2",
    );
    has(
        &text,
        "sluice_plugin_rejected_total{stage=\"rules\",digest=\"cd34\"} 2",
    );
    has(
        &text,
        "sluice_plugin_stage_seconds_total{stage=\"rules\",digest=\"ab12\"} 0.25",
    );
    has(
        &text,
        "sluice_plugin_verdicts_total{stage=\"rules\",digest=\"cd34\",verdict=\"rejected:invalid_price\"} 2",
    );
    // Label values are escaped.
    has(
        &text,
        r#"sluice_dead_lettered_total{code="bad \"x\"\\ and\nmore"} 4"#,
    );
    // Dropped fields, by name, add up over the batches.
    has(&text, "sluice_dropped_fields_total{field=\"utm_source\"} 6");
    // Gauges hold the last batch's value.
    has(&text, "sluice_last_batch_id 2");
    has(&text, "sluice_lag_records 40");
    has(
        &text,
        "sluice_partition_lag_records{partition=\"clicks/0\"} 0",
    );
    has(
        &text,
        "sluice_partition_lag_records{partition=\"clicks/2\"} 40",
    );
    has(&text, "sluice_state_rows{operator=\"dedup\"} 200");
    has(&text, "sluice_state_file_bytes 4096");
    has(&text, "sluice_watermark_seconds 1785319620.0");
    // Freshness: the wall-clock time of the last commit.
    has(&text, "sluice_last_commit_timestamp_seconds 1785320120.25");
    // The batch durations, a second each.
    has(&text, "sluice_batch_duration_seconds_count 2");
    has(&text, "sluice_batch_duration_seconds_sum 2.0");
    has(&text, "sluice_batch_duration_seconds_bucket{le=\"0.5\"} 0");
    has(&text, "sluice_batch_duration_seconds_bucket{le=\"1.0\"} 2");
}

#[test]
fn the_prometheus_text_format_names_a_counter_with_its_total() {
    let metrics = Metrics::new(["rules"]);
    metrics.record(&progress(1));
    let mut second = progress(2);
    second.stages.get_mut("rules").unwrap().rollbacks = 1;
    metrics.record(&second);
    let text = metrics.render(Format::Prometheus).unwrap();
    for (name, kind) in FAMILIES {
        let name = match kind {
            "counter" => format!("{name}_total"),
            _ => name.to_string(),
        };
        has(&text, &format!("# TYPE {name} {kind}"));
    }
    has(&text, "# TYPE sluice_batches_total counter");
    has(&text, "sluice_batches_total 2");
    has(&text, "sluice_plugin_rollbacks_total{stage=\"rules\"} 1");
    has(&text, "# TYPE sluice_batch_duration_seconds histogram");
    has(&text, "sluice_last_commit_timestamp_seconds 1785320120.25");
}

/// The value of every series of `family` in `text`, by its labels.
fn series<'a>(text: &'a str, family: &str) -> Vec<(&'a str, u64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
        .filter_map(|l| l.rsplit_once("} "))
        .map(|(labels, n)| (labels, n.parse().unwrap()))
        .collect()
}

#[test]
fn plugin_chosen_codes_get_at_most_a_bounded_number_of_series() {
    let metrics = Metrics::new(["rules"]);
    for batch in 0..10u64 {
        let mut p = progress(batch + 1);
        // 100 new codes a batch, 1000 in all, each seen twice, plus a failure kind.
        let codes: BTreeMap<String, u64> = (0..100)
            .map(|i| (format!("code_{}", batch * 100 + i), 2))
            .collect();
        p.dead_lettered_by_code = codes.clone();
        let rules = p.stages.get_mut("rules").unwrap();
        rules.verdicts = codes
            .iter()
            .map(|(c, n)| (format!("rejected:{c}"), *n))
            .collect();
        rules.verdicts.insert("failed:plugin_trapped".into(), 1);
        metrics.record(&p);
    }
    let text = metrics.render(Format::Prometheus).unwrap();
    let dead = series(&text, "sluice_dead_lettered_total");
    assert_eq!(dead.len(), MAX_CODE_LABELS + 1, "{dead:?}");
    assert_eq!(dead.iter().map(|(_, n)| n).sum::<u64>(), 2000);
    assert!(dead.contains(&("code=\"code_0\"", 2)), "{dead:?}");
    let other = (2000 - 2 * MAX_CODE_LABELS) as u64;
    assert!(dead.contains(&("code=\"other\"", other)), "{dead:?}");

    let verdicts = series(&text, "sluice_plugin_verdicts_total");
    // The bounded codes, `rejected:other`, and the failure kind.
    assert_eq!(verdicts.len(), MAX_CODE_LABELS + 2, "{verdicts:?}");
    assert_eq!(verdicts.iter().map(|(_, n)| n).sum::<u64>(), 2010);
    let labels = |v: &str| format!("stage=\"rules\",digest=\"ab12\",verdict=\"{v}\"");
    let rejected_other = labels("rejected:other");
    assert!(
        verdicts.contains(&(rejected_other.as_str(), other)),
        "{verdicts:?}"
    );
    let trapped = labels("failed:plugin_trapped");
    assert!(verdicts.contains(&(trapped.as_str(), 10)), "{verdicts:?}");
}

#[test]
fn partition_lag_has_a_bounded_series_per_partition_read() {
    let metrics = Metrics::new(["rules"]);
    let mut p = progress(1);
    let n = MAX_PARTITION_LABELS + 44;
    p.partitions = (0..n).map(|i| format!("clicks/{i:03}")).collect();
    p.lag_by_partition = (0..n).map(|i| (format!("clicks/{i:03}"), 2)).collect();
    metrics.record(&p);
    let text = metrics.render(Format::Prometheus).unwrap();
    let lag = series(&text, "sluice_partition_lag_records");
    assert_eq!(lag.len(), MAX_PARTITION_LABELS + 1, "{lag:?}");
    assert!(lag.contains(&("partition=\"clicks/000\"", 2)), "{lag:?}");
    assert!(lag.contains(&("partition=\"other\"", 88)), "{lag:?}");
    // The partitions move to another member but one: their series go.
    let mut p = progress(2);
    p.partitions = vec!["clicks/007".into()];
    p.lag_by_partition = BTreeMap::new();
    metrics.record(&p);
    let text = metrics.render(Format::Prometheus).unwrap();
    let lag = series(&text, "sluice_partition_lag_records");
    assert_eq!(lag, [("partition=\"clicks/007\"", 0)], "{text}");
}

#[test]
fn scrapers_get_the_format_they_ask_for() {
    let prometheus =
        "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    assert_eq!(Format::accepted(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(Format::accepted(Some("text/plain")), Format::Prometheus);
    assert_eq!(Format::accepted(None), Format::Prometheus);
}

/// The metric names in `text`: every `sluice_...` word.
fn named_metrics(text: &str) -> std::collections::BTreeSet<&str> {
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    text.match_indices("sluice_")
        .filter(|(at, _)| !text[..*at].ends_with(word))
        .map(|(at, _)| {
            let rest = &text[at..];
            &rest[..rest.find(|c| !word(c)).unwrap_or(rest.len())]
        })
        .collect()
}

#[test]
fn the_shipped_dashboard_and_alerts_name_only_metrics_the_binary_serves() {
    let metrics = Metrics::new(["rules"]);
    metrics.record(&progress(1));
    let text = metrics.render(Format::Prometheus).unwrap();
    let served: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let dashboard = std::fs::read_to_string(deploy.join("grafana/sluice.json")).unwrap();
    let alerts = std::fs::read_to_string(deploy.join("prometheus/alerts.yaml")).unwrap();
    for (file, body) in [("dashboard", &dashboard), ("alerts", &alerts)] {
        let named = named_metrics(body);
        assert!(named.len() >= 6, "{file}: {named:?}");
        let unknown: Vec<_> = named.iter().filter(|n| !served.contains(*n)).collect();
        assert!(
            unknown.is_empty(),
            "{file} names {unknown:?}, not served:\n{text}"
        );
    }
    // The dashboard is Grafana's JSON, each panel with a query.
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        let expr = panel["targets"][0]["expr"].as_str().unwrap_or_default();
        assert!(expr.contains("sluice_"), "{panel}");
    }
    // The alerts are Prometheus rule groups: the ones the deployment docs promise.
    let rules = &yaml_rust2::YamlLoader::load_from_str(&alerts).unwrap()[0]["groups"][0]["rules"];
    let names: Vec<&str> = rules
        .as_vec()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["expr"].as_str().is_some() && r["labels"]["severity"].as_str().is_some());
            r["alert"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        names,
        [
            "SluiceLagGrowing",
            "SluiceNoCommit",
            "SluiceBatchesFenced",
            "SluicePluginRolledBack",
            "SluiceDeadLetterRate",
            "SluiceLookupRefreshFailing"
        ]
    );
}
