//! The rewrite and patch paths: the enrichers rewrite or patch values, and a chain passes
//! rewritten values on, and patched ones applied.

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

/// A runtime whose batch tables give user `u1` a tier and country, and the enricher loaded
/// on it, granted them.
fn retail_enricher() -> (sluice::plugin::Runtime, sluice::plugin::Plugin) {
    with_profiles(std::path::Path::new(plugins::RETAIL_ENRICHER), &[], true)
}

/// A runtime whose batch tables give user `u1` of `profiles` a tier and country (`products`
/// is empty), and the plugin at `path` loaded on it with `params`, granted both tables or
/// (`granted` false) neither.
pub(crate) fn with_profiles(
    path: &std::path::Path,
    params: &[(&str, &str)],
    granted: bool,
) -> (sluice::plugin::Runtime, sluice::plugin::Plugin) {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use sluice::lookup::{Lookups, Table, Version};
    use sluice::plugin::config::{Grants, Limits, RuntimeConfig};
    let runtime = sluice::plugin::Runtime::new(RuntimeConfig::default()).unwrap();
    let table = |entries: &[(&str, &str)]| {
        let mut t = Table::new(Version::File {
            digest: "test".into(),
        });
        for (k, v) in entries {
            t.insert(k.as_bytes(), v.as_bytes());
        }
        Arc::new(t)
    };
    runtime.lookups().set(Lookups::new(BTreeMap::from([
        (
            "profiles".to_string(),
            table(&[("u1", r#"{"tier":"gold","country":"DE"}"#)]),
        ),
        ("products".to_string(), table(&[])),
    ])));
    let grants = Grants {
        lookups: if granted {
            vec!["profiles".into(), "products".into()]
        } else {
            Vec::new()
        },
        ..Grants::default()
    };
    let params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let plugin = runtime
        .load_file("enrich", path, params, Limits::default(), grants)
        .unwrap();
    (runtime, plugin)
}

/// The enricher patches: a later stage sees the value with the patch applied, while the
/// last stage's patch stays beside the value (for the encoder) until it is settled.
#[test]
fn a_patch_reaches_a_later_stage_applied_and_the_last_one_stays_beside_the_value() {
    let (_runtime, enricher) = retail_enricher();
    let normaliser = load(plugins::CLICKSTREAM_ENRICHER, &[]).unwrap();
    let values = [
        r#"{"user_id":"u1","browser":"Safari"}"#,
        r#"{"user_id":"u9"}"#,
    ];

    // The old-version guest rewrites a value to its length: the patched value's.
    let measure = load(plugins::OLD_VERSION, &[]).unwrap();
    let outcomes = chain::run(&[enricher.clone(), measure], records(&values), 8);
    let applied = br#"{"user_id":"u1","browser":"Safari","tier":"gold","country":"DE"}"#;
    assert_eq!(
        outcomes[0].record.value.as_deref().unwrap(),
        format!("{{\"old-version\":{}}}", applied.len()).as_bytes(),
        "the later stage saw the value with the patch applied"
    );

    let stages = [normaliser, enricher];
    let (outcomes, runs) = chain::run_counted(&stages, records(&values), 8);
    assert_eq!(runs[1].rewritten, 1, "one event patched");
    let (stage, patch) = outcomes[0].patch.clone().expect("a pending patch");
    assert_eq!(stage, 1);
    assert_eq!(
        patch.fields().collect::<Vec<_>>(),
        vec![("tier", &br#""gold""#[..]), ("country", &br#""DE""#[..])]
    );
    let unapplied: Value =
        serde_json::from_slice(outcomes[0].record.value.as_deref().unwrap()).unwrap();
    assert!(unapplied.get("tier").is_none(), "{unapplied}");
    assert!(outcomes[1].patch.is_none(), "no profile, no patch");
    let settled = outcomes[0].clone().settle(&stages);
    let settled: Value = serde_json::from_slice(settled.record.value.as_deref().unwrap()).unwrap();
    assert_eq!(settled["tier"], "gold");
    assert_eq!(settled["browser"], "safari");
}
