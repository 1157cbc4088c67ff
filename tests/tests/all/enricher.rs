//! The rewrite path: the enricher rewrites values, and a chain passes rewritten values on.

use serde_json::Value;
use sluice::plugin::Verdict;
use sluice::plugin::chain::{self, Fate};
use sluice_tests::{load, plugins, records, seed_events};

#[test]
fn enricher_rewrites_values() {
    let plugin = load(plugins::CLICKSTREAM_ENRICHER, &[]).unwrap();
    let records = records(&[
        r#"{"browser":"Google Chrome","device_type":"Phone","page_url":"https://shop.example/p/mug?ref=x","event_type":"add_to_cart","price":18.0}"#,
        r#"{"browser":"Safari"}"#,
        "[1,2]",
    ]);
    let verdicts = plugin
        .process_records(&records.iter().collect::<Vec<_>>())
        .unwrap();
    let Verdict::Rewrite(first) = &verdicts[0] else {
        panic!("{verdicts:?}")
    };
    let first: Value = serde_json::from_slice(first).unwrap();
    assert_eq!(first["browser"], "chrome");
    assert_eq!(first["device_type"], "mobile");
    assert_eq!(first["page_path"], "/p/mug");
    assert_eq!(first["funnel_step"], 4);
    assert_eq!(first["price"], 18.0);
    let Verdict::Rewrite(second) = &verdicts[1] else {
        panic!("{verdicts:?}")
    };
    assert_eq!(
        serde_json::from_slice::<Value>(second).unwrap(),
        serde_json::json!({"browser": "safari"})
    );
    assert!(
        matches!(&verdicts[2], Verdict::Reject(r) if r.code == "malformed_json"),
        "{verdicts:?}"
    );
}

#[test]
fn a_chain_validates_then_enriches() {
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap();
    let enricher = load(plugins::CLICKSTREAM_ENRICHER, &[]).unwrap();
    let mut values = seed_events();
    values.push(r#"{"event_id":"x","browser":"Chrome"}"#.to_string());
    let outcomes = chain::run(&[validator, enricher], records(&values), 2);
    assert_eq!(outcomes.len(), 6);
    let expected_browsers = ["chrome", "chrome", "safari", "firefox", "chrome"];
    for (outcome, browser) in outcomes.iter().zip(expected_browsers) {
        assert!(matches!(outcome.fate, Fate::Rewritten), "{outcome:?}");
        let value: Value =
            serde_json::from_slice(outcome.record.value.as_deref().unwrap()).unwrap();
        assert_eq!(value["browser"], browser);
        assert!(value["funnel_step"].is_u64());
    }
    // Rejected by the first stage: the enricher never saw it, and its value is untouched.
    match &outcomes[5].fate {
        Fate::Rejected {
            stage: 0,
            rejection,
        } => assert_eq!(rejection.code, "missing_required_field"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        outcomes[5].record.value.as_deref(),
        Some(values[5].as_bytes())
    );
}
