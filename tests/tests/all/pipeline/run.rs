//! Running the example: without plugins, on an interval trigger stopped by SIGTERM, from
//! the latest offsets with a topic added later, on PostgreSQL and REST catalogs, with a
//! byte cap; and what `run --help` and the container files say of it.

use super::*;

#[test]
fn without_plugins_the_table_schema_dead_letters_misfits() {
    let mut s = Setup::new("schema");
    s.edit_example_config(|text| {
        let start = text.find("[[stages]]").unwrap();
        // (the stages and the lookup tables they read)
        let end = text.find("[sink]\n").unwrap();
        // And an unpartitioned table, for the writer without fanout.
        format!("{}{}", &text[..start], &text[end..])
            .replace("partition-by = [\"day(event_time)\"]", "partition-by = []")
    });
    s.produce_file("1");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    // Line 6 lacks user_id, which the table allows: only a plugin can require it.
    assert_eq!(rows(&shown).len(), 6);
    let files = data_files(&s.warehouse);
    assert!(
        !files.is_empty() && files.iter().all(|f| !f.contains("event_time_day=")),
        "{files:?}"
    );
    assert_eq!(
        reasons(dead_letters(&shown)),
        expected_reasons(&[
            ("6", "encode", "type_mismatch", "quantity"),
            ("7", "encode", "invalid_timestamp", "event_time"),
            ("8", "encode", "invalid_decimal", "price"),
            ("9", "encode", "malformed_json", ""),
        ])
    );
}

#[test]
fn interval_trigger_commits_only_new_data_and_stops_cleanly_on_sigterm() {
    let s = Setup::new("interval");
    s.produce_file("2");
    let running = s.start(
        &["run"],
        &[("SLUICE_TRIGGER", "interval"), ("SLUICE_INTERVAL", "1s")],
    );
    let first = running
        .progress(Duration::from_secs(60))
        .expect("a first batch");
    assert_eq!(first["input_rows"], 10);
    // Three intervals with no new data: no batch, no commit.
    assert!(
        running.progress(Duration::from_millis(3500)).is_none(),
        "a batch without new data"
    );
    s.produce_file("2");
    let second = running
        .progress(Duration::from_secs(60))
        .expect("a second batch");
    assert_eq!(
        (second["batch_id"].as_u64(), second["input_rows"].as_u64()),
        (Some(2), Some(10))
    );
    let (exit, stdout, log) = running.terminate();
    assert!(exit.success(), "SIGTERM exits 0: {exit:?}\n{log}");
    assert!(
        stdout.contains("2 batches: 20 records read, 10 rows written, 10 dead-lettered (stopped)"),
        "{stdout}"
    );
    let shown = s.show();
    assert_eq!(shown["snapshot_summary"]["sluice.batch-id"], "2");
    assert_eq!(rows(&shown).len(), 10);
}

#[test]
fn latest_start_then_a_topic_added_later_is_read_from_its_earliest_offset() {
    let mut s = Setup::new("latest");
    let other = format!("{}-more", s.topic);
    let one = format!("topics = [\"{}\"]\nstarting-offsets = \"latest\"", s.topic);
    let two = format!(
        "topics = [\"{}\", \"{other}\"]\nstarting-offsets = \"latest\"",
        s.topic
    );
    let set_topics = |topics: String| {
        move |text: String| {
            text.replace(
                "topics = [\"${KAFKA_TOPIC:-retail-clickstream-events}\"]",
                &topics,
            )
            .replace("starting-offsets = \"earliest\"\n", "")
        }
    };
    s.edit_example_config(set_topics(one));
    s.produce_file("1");
    // A brand-new pipeline starting at `latest` skips what is there: nothing to commit.
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches"),
        "{}",
        text(&out)
    );
    assert!(rows(&s.show()).is_empty());
    // The first start anchored `latest` (offset 10) in the table: the second resumes there.
    let out = s.run(&[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches"),
        "{}",
        text(&out)
    );
    // A pipeline running before records arrive reads them: starting at `latest` means
    // "from when the pipeline first starts".
    let running = s.start(
        &["run"],
        &[("SLUICE_TRIGGER", "interval"), ("SLUICE_INTERVAL", "500ms")],
    );
    running
        .wait_for(
            "resuming from the table's last commit",
            Duration::from_secs(60),
        )
        .expect("the run started at the anchor");
    s.produce_file("1");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Batch 0 is the anchor; batch 1 the first with records.
    while s.show()["snapshot_summary"]["sluice.batch-id"] != "1" {
        assert!(Instant::now() < deadline, "no commit");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (exit, _, log) = running.terminate();
    assert!(exit.success(), "{exit:?}\n{log}");
    let shown = s.show();
    assert_eq!(
        rows(&shown).len(),
        5,
        "only the records produced after the start"
    );
    let offsets = shown["snapshot_summary"]["sluice.offsets"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(offsets, format!("{{\"{}\":{{\"0\":20}}}}", s.topic));

    // A topic added to the pipeline later is read from its earliest offset, although the
    // pipeline once started at `latest`.
    s.topic = other.clone();
    s.produce_file("1");
    s.edit_example_config(set_topics(two));
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(rows(&shown).len(), 10, "{}", text(&out));
    let offsets: Value = serde_json::from_str(
        shown["snapshot_summary"]["sluice.offsets"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(offsets[&other]["0"], 10);
}

#[test]
fn the_same_pipeline_works_with_a_postgresql_catalog() {
    let pg = sluice_tests::postgres::Postgres::start();
    let mut s = Setup::new("postgres");
    let url = pg.url.clone();
    s.edit_example_config(|text| {
        text.replace(
            "type = \"sql\"\nname = \"sluice\"",
            &format!("type = \"sql\"\nname = \"sluice\"\nuri = \"{url}\""),
        )
    });
    s.produce_file("1");
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(rows(&shown).len(), 5);
    assert_eq!(dead_letters(&shown).len(), 5);
    assert_eq!(shown["snapshot_summary"]["sluice.batch-id"], "1");
    // The catalog is in PostgreSQL, not in a SQLite file in the warehouse.
    assert!(!s.warehouse.join("catalog.db").exists());
    // A second run resumes from the offsets in the PostgreSQL-cataloged table.
    let out = s.run(&[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 batches"),
        "{}",
        text(&out)
    );
}

#[test]
fn run_help_documents_every_section() {
    let err = cli::parse(["sluice", "run", "--help"]).unwrap_err();
    let help = err.render().to_string();
    for item in [
        "--config",
        "--available-now",
        "--check",
        "[pipeline]",
        "[source]",
        "[trigger]",
        "[runtime]",
        "[[stages]]",
        "[sink]",
        "[sink.catalog]",
        "[sink.expire-snapshots]",
        "every-commits",
        "[dead-letter]",
        "${VAR:-default}",
        "starting-offsets",
        "max-records",
        "max-bytes",
        "on-invalid",
        "partition-by",
        "ingestion-time-column",
        "[event-time]",
        "max-delay",
        "idle-timeout",
        "late-topic",
        "at-end",
        "[dedup]",
        "[[windows]]",
        "slide",
        "distinct-count",
        "on-window-close",
        "watch-interval",
        "samples",
        "allowed-digests",
        "max-failure-rate",
        "[admin]",
        "max-upload",
    ] {
        assert!(
            help.contains(item),
            "`sluice run --help` does not mention {item}:\n{help}"
        );
    }
}

/// The container files name commands and paths that exist: the compose producer's
/// arguments parse, and the image's default pipeline is in the repository.
#[test]
fn container_files_agree_with_the_code() {
    let compose = std::fs::read_to_string(repo_root().join("docker-compose.yml")).unwrap();
    let producer = &compose[compose.find("\n  producer:").expect("a producer service")..];
    let command = &producer[producer.find("command:").unwrap()..];
    let args: Vec<String> = command
        .lines()
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim_start()[2..].trim().trim_matches('"').to_string())
        .collect();
    assert_eq!(args[0], "produce");
    let invocation = cli::parse(std::iter::once("sluice".to_string()).chain(args)).unwrap();
    assert!(matches!(invocation.cli.command, Sub::Produce(_)));
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("/opt/sluice/examples/retail-clickstream/pipeline.toml"));
    assert!(dockerfile.contains("COPY examples/ /opt/sluice/examples/"));
    assert!(example_config().exists());
    for var in ["KAFKA_BOOTSTRAP", "SLUICE_WAREHOUSE"] {
        assert!(
            compose.contains(var)
                && std::fs::read_to_string(example_config())
                    .unwrap()
                    .contains(var)
        );
    }
}

#[test]
fn the_byte_cap_cuts_batches() {
    let s = Setup::new("bytes");
    s.produce_file("1");
    let sizes: Vec<usize> = std::fs::read_to_string(retail_events_file())
        .unwrap()
        .lines()
        .map(str::len)
        .collect();
    let out = s.run(&[("SLUICE_MAX_BYTES", "1KiB")]);
    assert!(out.status.success(), "{}", text(&out));
    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    // Expected cuts, computed from the line sizes: a batch closes once it holds ≥ 1024 bytes.
    let mut expected = Vec::new();
    let (mut n, mut bytes) = (0, 0);
    for size in sizes {
        n += 1;
        bytes += size;
        if bytes >= 1024 {
            expected.push(n);
            (n, bytes) = (0, 0);
        }
    }
    if n > 0 {
        expected.push(n);
    }
    let got: Vec<usize> = progress
        .iter()
        .map(|p| p["input_rows"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got, expected);
    assert!(got.len() > 1);
    assert_eq!(rows(&s.show()).len(), 5);
}

#[test]
fn the_same_pipeline_works_with_a_rest_catalog() {
    let mut s = Setup::new("rest");
    let warehouse = s.warehouse.clone();
    // A REST catalog server, sharing the warehouse folder.
    let server = pyiceberg::RestCatalog::start(&warehouse);
    let url = server.url.clone();
    s.edit_example_config(|text| {
        text.replace(
            "type = \"sql\"\nname = \"sluice\"",
            &format!("type = \"rest\"\nname = \"rest\"\nuri = \"{url}\""),
        )
    });
    s.produce_file("1");
    let out = s.run(&[]);
    let again = s.run(&[]);
    let shown = s.show();
    drop(server);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(rows(&shown).len(), 5);
    assert_eq!(dead_letters(&shown).len(), 5);
    assert_eq!(shown["snapshot_summary"]["sluice.batch-id"], "1");
    assert!(
        String::from_utf8_lossy(&again.stdout).starts_with("0 batches"),
        "{}",
        text(&again)
    );
    assert!(
        !warehouse.join("catalog.db").exists(),
        "no SQLite catalog of sluice's own"
    );
}
