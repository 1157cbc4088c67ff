//! An `s3://` warehouse on a local S3-compatible server (moto), read back by pyiceberg
//! through the same endpoint.

use serde_json::Value;
use sluice_tests::fixture::{Setup, progress_lines, text};
use sluice_tests::pyiceberg::{self, CatalogAt};
use sluice_tests::s3::{ACCESS_KEY, REGION, S3Server};

use crate::event_time::{analytics_config, events_file};

/// The analytics example with its warehouse in `s3://lake/wh` on `server` and its catalog in
/// a SQLite file at `catalog`; the credentials and region come from the AWS environment.
fn on_s3(name: &str, server: &S3Server) -> (Setup, String) {
    let mut s = Setup::new(name);
    std::fs::create_dir_all(&s.warehouse).unwrap();
    let catalog = format!("sqlite:{}/catalog.db", s.warehouse.display());
    let endpoint = server.endpoint.clone();
    let example = std::fs::read_to_string(analytics_config()).unwrap();
    let text = example
        .replace(
            "warehouse = \"${SLUICE_WAREHOUSE:-../../warehouse}\"",
            "warehouse = \"s3://lake/wh\"",
        )
        .replace(
            "\n[dead-letter]",
            &format!(
                "\n[sink.catalog]\nuri = \"{catalog}\"\n\n[sink.s3]\nendpoint = \"{endpoint}\"\n\
                 path-style = true\n\n[dead-letter]"
            ),
        );
    assert!(text.contains("s3://lake/wh") && text.contains("[sink.s3]"));
    s.write_config("pipeline.toml", &text);
    s.extra_env.extend(
        [
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.0),
            ("AWS_SECRET_ACCESS_KEY", ACCESS_KEY.1),
            ("AWS_REGION", REGION),
            (
                "SLUICE_ANALYTICS_TOPIC",
                &format!("{name}-analytics") as &str,
            ),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    (s, catalog)
}

fn event_ids(rows: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| r["event_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn an_s3_warehouse_holds_the_table_its_windows_and_the_event_time_state() {
    let server = S3Server::start();
    server.create_bucket("lake");
    let (s, catalog) = on_s3("s3", &server);
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);

    let out = s.run(&[("SLUICE_MAX_RECORDS", "4"), ("SLUICE_AT_END", "flush")]);
    assert!(out.status.success(), "{}", text(&out));
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(progress.len(), 4, "{}", text(&out));

    // Everything is in the bucket: data, metadata, and the state of every batch.
    let keys = server.keys("lake", "wh/");
    let count = |part: &str, suffix: &str| {
        keys.iter()
            .filter(|k| k.contains(part) && k.ends_with(suffix))
            .count()
    };
    assert!(
        count("analytics/clickstream_events/data/", ".parquet") > 0,
        "{keys:?}"
    );
    assert!(count("analytics/clickstream_events/metadata/", ".metadata.json") > 0);
    assert!(
        count("analytics/event_type_counts/data/", ".parquet") > 0,
        "{keys:?}"
    );
    assert!(
        count(
            "analytics/_sluice-state/clickstream_events/clickstream-analytics/",
            ".json"
        ) > 0,
        "{keys:?}"
    );
    // ... and nothing but the pipeline file and the catalog database is local.
    let mut local: Vec<String> = std::fs::read_dir(&s.warehouse)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    local.sort();
    assert_eq!(local, ["catalog.db", "pipeline.toml"]);

    // sluice reads it back, and so does pyiceberg through the same endpoint.
    let shown = s.show();
    let expected = ["e1", "e2", "e3", "e5", "e6", "e7"];
    assert_eq!(event_ids(shown["rows"].as_array().unwrap()), expected);
    let endpoint = server.endpoint.as_str();
    let read = pyiceberg::read_table_with(
        CatalogAt::Sql {
            uri: &catalog,
            name: "sluice",
        },
        "analytics.clickstream_events",
        &[
            ("s3.endpoint", endpoint),
            ("s3.access-key-id", ACCESS_KEY.0),
            ("s3.secret-access-key", ACCESS_KEY.1),
            ("s3.region", REGION),
        ],
    );
    assert_eq!(event_ids(&read), expected);

    // A second run restores the state from the bucket and reads nothing again.
    let again = s.run(&[]);
    assert!(
        String::from_utf8_lossy(&again.stdout).starts_with("0 batches"),
        "{}",
        text(&again)
    );
}

#[test]
fn sluice_maintain_expires_and_deletes_orphans_in_an_s3_warehouse() {
    let server = S3Server::start();
    server.create_bucket("lake");
    let (s, _) = on_s3("s3-maintain", &server);
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let out = s.run(&[("SLUICE_MAX_RECORDS", "2")]);
    assert!(out.status.success(), "{}", text(&out));
    let before = s.show();
    let orphan = "wh/analytics/clickstream_events/data/orphan-from-a-crash.parquet";
    server.put("lake", orphan, "PAR1");
    let manifest_lists = |keys: &[String]| {
        keys.iter()
            .filter(|k| k.contains("clickstream_events/metadata/snap-"))
            .count()
    };
    let lists_before = manifest_lists(&server.keys("lake", "wh/"));

    let maintain = |orphans_older_than: &str| {
        let out = s.maintain(orphans_older_than);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Younger than the grace period: kept.
    let said = maintain("1h");
    assert!(
        said.contains("analytics.clickstream_events: deleted 0 orphan files"),
        "{said}"
    );
    assert!(server.keys("lake", "wh/").iter().any(|k| k == orphan));
    let said = maintain("0s");
    let keys = server.keys("lake", "wh/");
    assert!(!keys.iter().any(|k| k == orphan), "{said}");
    assert!(said.contains(&format!("s3://lake/{orphan}")), "{said}");
    // The manifest lists of the expired snapshots went with them.
    assert!(manifest_lists(&keys) < lists_before, "{said}\n{keys:?}");
    // The rows, and the checkpoint: the next run reads nothing again.
    let after = s.show();
    assert_eq!(
        event_ids(after["rows"].as_array().unwrap()),
        event_ids(before["rows"].as_array().unwrap())
    );
    let again = s.run(&[]);
    assert!(
        String::from_utf8_lossy(&again.stdout).starts_with("0 batches"),
        "{}",
        text(&again)
    );
}

#[test]
fn wrong_s3_credentials_fail_clearly_without_echoing_the_secret() {
    let server = S3Server::start();
    server.create_bucket("lake");
    let (mut s, _) = on_s3("s3-denied", &server);
    // moto accepts any key, but not a bucket that does not exist.
    s.edit_config(|t| t.replace("s3://lake/wh", "s3://missing-bucket/wh"));
    s.extra_env.push((
        "AWS_SECRET_ACCESS_KEY".into(),
        "very-secret-value-42".into(),
    ));
    let mut command = s.command(&["run", "--available-now"]);
    let out = command.env("SLUICE_MAX_RECORDS", "4").output().unwrap();
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("missing-bucket"), "{all}");
    assert!(!all.contains("very-secret-value-42"), "{all}");
}
