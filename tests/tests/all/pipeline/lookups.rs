//! The retail example's lookup tables: enrichment from them, and their refresh between
//! batches.

use super::*;

/// The retail example's enrich stage: a customer's tier and country from the `profiles`
/// lookup table, a product's list price from `products` (both fed from their topics), the
/// tables' versions in the commit; an event whose customer the table lacks keeps those
/// columns empty, and nothing is dead-lettered for it.
#[test]
fn the_retail_example_enriches_events_from_its_lookup_tables() {
    let s = Setup::new("enrich");
    feed_lookups(&s);
    s.produce(&["--count", "1000", "--invalid-share", "0"]);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let shown = s.show();
    let rows = shown["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1000, "{}", text(&out));
    let (mut with, mut without) = (0, 0);
    for row in rows {
        let user: u32 = row["user_id"].as_str().unwrap()[5..].parse().unwrap();
        if user < 25_000 {
            assert!(
                row["tier"].is_string() && row["country"].is_string(),
                "{row}"
            );
            with += 1;
        } else {
            assert!(row["tier"].is_null() && row["country"].is_null(), "{row}");
            without += 1;
        }
        assert_eq!(
            row["product_id"].is_null(),
            row["list_price"].is_null(),
            "{row}"
        );
    }
    assert!(with > 0 && without > 0, "{with} enriched, {without} not");
    assert!(dead_letters(&shown).is_empty(), "{shown}");
    let versions: Value = serde_json::from_str(
        shown["snapshot_summary"]["sluice.lookups"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(versions["profiles"]["offsets"]["0"], 25_000, "{versions}");
    assert_eq!(versions["products"]["offsets"]["0"], 4, "{versions}");
}

/// Feeds the retail example's lookup tables: profiles of half the generated events' 50 000
/// users (user_0 to user_24999), and the four products.
pub(crate) fn feed_lookups(s: &Setup) {
    s.ensure_side_topics();
    let produce_to = |topic: &str, shape: &str, count: &str| {
        let args = ["--shape", shape, "--count", count, "--invalid-share", "0"];
        sluice_tests::produce(&s.broker.bootstrap, topic, &args);
    };
    produce_to(&s.side_topic("customers"), "customers", "25000");
    produce_to(&s.side_topic("products"), "products", "4");
}

/// The lookup tables are refreshed while the pipeline runs: events read after new customer
/// profiles arrived in the topic are enriched from them, events read before keep what the
/// table held then, and the last commit records the topic read to its end.
#[test]
fn a_running_pipeline_refreshes_its_lookup_tables_between_batches() {
    use crate::hot_swap::wait_until_committed;

    let s = Setup::new("refresh");
    s.ensure_side_topics();
    let customers = s.side_topic("customers");
    let produce_to = |topic: &str, shape: &str, count: &str| {
        let args = ["--shape", shape, "--count", count, "--invalid-share", "0"];
        sluice_tests::produce(&s.broker.bootstrap, topic, &args);
    };
    produce_to(&customers, "customers", "25000");
    produce_to(&s.side_topic("products"), "products", "4");
    s.produce(&["--count", "500", "--invalid-share", "0", "--seed", "1"]);
    let running = s.start(&["run"], &[("SLUICE_INTERVAL", "300ms")]);
    let mut progress = Vec::new();
    wait_until_committed(&running, &mut progress, 500);

    // Profiles of the other 25 000 users (the first 25 000 again, unchanged), then events.
    let between = chrono_now_micros();
    produce_to(&customers, "customers", "50000");
    s.produce(&["--count", "500", "--invalid-share", "0", "--seed", "2"]);
    wait_until_committed(&running, &mut progress, 1000);
    let (status, _, log) = running.terminate();
    assert!(status.success(), "{log}");

    let shown = s.show();
    let (mut before, mut after) = (0, 0);
    for row in rows(&shown) {
        let user: u32 = row["user_id"].as_str().unwrap()[5..].parse().unwrap();
        let read_after = parse_rfc3339_micros(row["ingestion_time"].as_str().unwrap()) > between;
        if user < 25_000 {
            assert!(row["tier"].is_string(), "{row}");
        } else if read_after {
            assert!(row["tier"].is_string(), "refreshed: {row}");
            after += 1;
        } else {
            assert!(row["tier"].is_null(), "before the refresh: {row}");
            before += 1;
        }
    }
    assert!(before > 0 && after > 0, "{before} before, {after} after");
    let versions: Value = serde_json::from_str(
        shown["snapshot_summary"]["sluice.lookups"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(versions["profiles"]["offsets"]["0"], 75_000, "{versions}");
}
