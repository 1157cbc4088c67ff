//! Every rule of the clickstream validator, accepted and rejected, through the real Wasm
//! runtime. Expected verdicts are written out by hand from the rules of the retail tutorial.
//! The same table is checked against the Rust plugin here and the JavaScript one in `js.rs`:
//! the `check_*` functions take the plugin's path. The Rust plugin is also built against the
//! `0.1` contract (`udfs/compat/`, the SDK's `wit-0-1` feature): a plugin of the previous
//! minor version loads and gives the same verdicts.

use serde_json::{Value, json};
use sluice::plugin::{Plugin, PluginError, Verdict};
use sluice_tests::{load, plugins, records, seed_events};

fn page_view() -> Value {
    json!({
        "event_id": "evt_1", "event_time": "2026-01-09T12:00:00Z", "user_id": "user_1",
        "session_id": "sess_1", "event_type": "page_view", "page_url": "/",
        "device_type": "desktop", "browser": "chrome", "traffic_source": "direct"
    })
}

/// `page_view()` with fields set (`Value::Null` sets JSON null) or removed (`None`).
fn event(changes: &[(&str, Option<Value>)]) -> String {
    let mut v = page_view();
    let map = v.as_object_mut().unwrap();
    for (k, change) in changes {
        match change {
            Some(value) => map.insert(k.to_string(), value.clone()),
            None => map.remove(*k),
        };
    }
    v.to_string()
}

fn set(k: &'static str, v: Value) -> (&'static str, Option<Value>) {
    (k, Some(v))
}

fn unset(k: &'static str) -> (&'static str, Option<Value>) {
    (k, None)
}

/// Loads the validator at `path` (with `params`) and runs it over `values` in one chunk.
fn judge(path: &str, values: &[String], params: &[(&str, &str)]) -> Vec<Verdict> {
    judge_with(&load(path, params).expect("validator loads"), values)
}

/// Runs a loaded validator over `values` in one chunk.
fn judge_with(plugin: &Plugin, values: &[String]) -> Vec<Verdict> {
    let records = records(values);
    plugin
        .process_records(&records.iter().collect::<Vec<_>>())
        .expect("validator runs")
}

fn accepted() -> Vec<String> {
    let mut events = seed_events();
    let typed = [
        ("search", vec![set("search_query", json!("trail mug"))]),
        ("product_view", vec![set("product_id", json!("P1"))]),
        (
            "add_to_cart",
            vec![
                set("product_id", json!("P1")),
                set("cart_id", json!("c1")),
                set("quantity", json!(2)),
            ],
        ),
        (
            "remove_from_cart",
            vec![
                set("product_id", json!("P1")),
                set("cart_id", json!("c1")),
                set("quantity", json!(1)),
            ],
        ),
        ("checkout_start", vec![set("cart_id", json!("c1"))]),
        ("purchase", vec![set("order_id", json!("o1"))]),
    ];
    for (event_type, mut fields) in typed {
        fields.push(set("event_type", json!(event_type)));
        events.push(event(&fields));
    }
    events.extend([
        event(&[set("unknown_field", json!({"nested": [1, 2]}))]),
        event(&[
            set("referrer_url", Value::Null),
            set("product_name", json!("Mug")),
        ]),
        event(&[set("price", json!(0))]),
        event(&[set("price", json!("18.00"))]),
        event(&[set("price", json!(99999999.99))]),
        event(&[set("price", json!(18))]),
        event(&[set("quantity", json!(2147483647))]),
        event(&[set("event_time", json!("2026-01-09T12:00:00.123+05:30"))]),
        event(&[set("event_time", json!("2024-02-29T23:59:59-08:00"))]),
    ]);
    events
}

#[test]
fn valid_events_are_kept() {
    check_valid_events_are_kept(&load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap());
}

pub(crate) fn check_valid_events_are_kept(plugin: &Plugin) {
    let events = accepted();
    let verdicts = judge_with(plugin, &events);
    assert_eq!(verdicts.len(), events.len());
    for (event, verdict) in events.iter().zip(verdicts) {
        assert_eq!(verdict, Verdict::Keep, "{event}");
    }
}

const REQUIRED: [&str; 9] = [
    "event_id",
    "event_time",
    "user_id",
    "session_id",
    "event_type",
    "page_url",
    "device_type",
    "browser",
    "traffic_source",
];

fn rejected() -> Vec<(String, &'static str, Option<&'static str>)> {
    let mut cases = Vec::new();
    for field in REQUIRED {
        cases.push((
            event(&[unset(field)]),
            "missing_required_field",
            Some(field),
        ));
        cases.push((
            event(&[set(field, Value::Null)]),
            "missing_required_field",
            Some(field),
        ));
        cases.push((
            event(&[set(field, json!("   "))]),
            "blank_required_field",
            Some(field),
        ));
    }
    let needs = |event_type: &str, fields: &[(&'static str, Value)], missing: &'static str| {
        let mut changes: Vec<_> = fields
            .iter()
            .filter(|(k, _)| *k != missing)
            .map(|(k, v)| set(k, v.clone()))
            .collect();
        changes.push(set("event_type", json!(event_type)));
        (event(&changes), "missing_event_type_field", Some(missing))
    };
    let cart = [
        ("product_id", json!("P1")),
        ("cart_id", json!("c1")),
        ("quantity", json!(1)),
    ];
    cases.extend([
        needs("search", &[("search_query", json!("mug"))], "search_query"),
        needs("product_view", &[("product_id", json!("P1"))], "product_id"),
        needs("add_to_cart", &cart, "product_id"),
        needs("add_to_cart", &cart, "cart_id"),
        needs("add_to_cart", &cart, "quantity"),
        needs("remove_from_cart", &cart, "cart_id"),
        needs("checkout_start", &[("cart_id", json!("c1"))], "cart_id"),
        needs("purchase", &[("order_id", json!("o1"))], "order_id"),
        (
            event(&[
                set("event_type", json!("search")),
                set("search_query", json!(" ")),
            ]),
            "missing_event_type_field",
            Some("search_query"),
        ),
        (
            event(&[set("event_time", json!("yesterday"))]),
            "invalid_event_time",
            Some("event_time"),
        ),
        (
            event(&[set("event_time", json!("2026-02-30T00:00:00Z"))]),
            "invalid_event_time",
            Some("event_time"),
        ),
        (
            event(&[set("event_time", json!("2026-01-09 12:00"))]),
            "invalid_event_time",
            Some("event_time"),
        ),
        (
            event(&[set("event_type", json!("click"))]),
            "invalid_event_type",
            Some("event_type"),
        ),
        (
            event(&[set("quantity", json!("several"))]),
            "invalid_quantity",
            Some("quantity"),
        ),
        (
            event(&[set("quantity", json!(0))]),
            "invalid_quantity",
            Some("quantity"),
        ),
        (
            event(&[set("quantity", json!(-3))]),
            "invalid_quantity",
            Some("quantity"),
        ),
        (
            event(&[set("quantity", json!(1.5))]),
            "invalid_quantity",
            Some("quantity"),
        ),
        (
            event(&[set("quantity", json!(2147483648u64))]),
            "invalid_quantity",
            Some("quantity"),
        ),
        (
            event(&[set("price", json!(-1))]),
            "invalid_price",
            Some("price"),
        ),
        (
            event(&[set("price", json!(1.234))]),
            "invalid_price",
            Some("price"),
        ),
        (
            event(&[set("price", json!(100000000))]),
            "invalid_price",
            Some("price"),
        ),
        (
            event(&[set("price", json!("cheap"))]),
            "invalid_price",
            Some("price"),
        ),
        (
            event(&[set("user_id", json!(123))]),
            "invalid_field_type",
            Some("user_id"),
        ),
        (
            event(&[set("page_url", json!(["/"]))]),
            "invalid_field_type",
            Some("page_url"),
        ),
        (
            r#"{"event_id": "evt_1", "event_time": "#.to_string(),
            "malformed_json",
            None,
        ),
        ("[1, 2]".to_string(), "malformed_json", None),
        ("not json".to_string(), "malformed_json", None),
    ]);
    cases
}

#[test]
fn each_violation_has_its_code_and_field() {
    check_each_violation_has_its_code_and_field(
        &load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap(),
    );
}

pub(crate) fn check_each_violation_has_its_code_and_field(plugin: &Plugin) {
    let cases = rejected();
    let values: Vec<String> = cases.iter().map(|(v, _, _)| v.clone()).collect();
    let verdicts = judge_with(plugin, &values);
    assert_eq!(verdicts.len(), cases.len());
    for ((value, code, field), verdict) in cases.iter().zip(verdicts) {
        let Verdict::Reject(rejection) = verdict else {
            panic!("{value} was not rejected: {verdict:?}");
        };
        assert_eq!(rejection.code, *code, "{value}: {rejection:?}");
        assert_eq!(rejection.field.as_deref(), *field, "{value}: {rejection:?}");
        assert!(!rejection.message.is_empty());
    }
}

/// The validator built against `sluice:plugin@0.1.1` loads on this host (which speaks a
/// later minor version) and gives every verdict of the table.
#[test]
fn the_validator_built_against_the_previous_minor_version_gives_the_same_verdicts() {
    let path = plugins::CLICKSTREAM_VALIDATOR_0_1;
    let guest = std::fs::read(path).unwrap();
    let exported = b"sluice:plugin/processor@0.1.1";
    assert!(
        guest.windows(exported.len()).any(|w| w == exported),
        "{path} does not export {}",
        String::from_utf8_lossy(exported)
    );
    assert_ne!(sluice::plugin::WIT_VERSION, "0.1.1");
    let plugin = load(path, &[]).unwrap();
    check_valid_events_are_kept(&plugin);
    check_each_violation_has_its_code_and_field(&plugin);
    check_a_null_value_is_rejected(&plugin);
    check_allowed_event_types_can_be_overridden(path);
    check_unknown_parameters_refuse_the_plugin_at_load(path);
}

#[test]
fn a_null_value_is_rejected() {
    check_a_null_value_is_rejected(&load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap());
}

pub(crate) fn check_a_null_value_is_rejected(plugin: &Plugin) {
    // The plugin names itself, and its identity is the sha256 of its bytes.
    assert_eq!(
        plugin.declared(),
        ("clickstream-validator".to_string(), "0.1.0".to_string())
    );
    assert_eq!(plugin.digest().len(), 64);
    let mut records = records(&[event(&[])]);
    records[0].value = None;
    let verdicts = plugin.process_records(&[&records[0]]).unwrap();
    assert!(
        matches!(&verdicts[0], Verdict::Reject(r) if r.code == "null_value"),
        "{verdicts:?}"
    );
}

#[test]
fn allowed_event_types_can_be_overridden() {
    check_allowed_event_types_can_be_overridden(plugins::CLICKSTREAM_VALIDATOR);
}

pub(crate) fn check_allowed_event_types_can_be_overridden(path: &str) {
    let values = [
        event(&[]),
        event(&[set("event_type", json!("wishlist_add"))]),
    ];
    let verdicts = judge(
        path,
        &values,
        &[("allowed-event-types", "wishlist_add, search")],
    );
    assert!(
        matches!(&verdicts[0], Verdict::Reject(r) if r.code == "invalid_event_type"),
        "{verdicts:?}"
    );
    assert_eq!(verdicts[1], Verdict::Keep);
}

#[test]
fn unknown_parameters_refuse_the_plugin_at_load() {
    check_unknown_parameters_refuse_the_plugin_at_load(plugins::CLICKSTREAM_VALIDATOR);
}

pub(crate) fn check_unknown_parameters_refuse_the_plugin_at_load(path: &str) {
    let error = load(path, &[("allowed-event-type", "search")]).unwrap_err();
    assert!(matches!(error, PluginError::Init { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("unknown parameter `allowed-event-type`"),
        "{error}"
    );
}

/// The plugin and the same rules compiled natively give the same verdicts on generated
/// events and on thousands of damaged copies of them (cut, with JSON's own characters put
/// in, with escapes and white space). This covers the SDK's JSON fast path inside
/// WebAssembly, where it scans with Wasm SIMD instead of the host's SSE2.
#[test]
fn plugin_and_native_rules_agree_on_damaged_events() {
    use sluice::generate::{Generator, GeneratorConfig, SplitMix64};

    let originals: Vec<String> = Generator::new(GeneratorConfig::default())
        .take(500)
        .map(|e| e.value)
        .collect();
    let pieces = [
        "\"", "\\", "{", "}", "[", "]", ",", ":", "0", "-", ".", "e", " ", "\t", "\\u00e9", "\\/",
        "\\\"", "null", "é", "\u{1}", "1.005", "\"\"",
    ];
    let mut random = SplitMix64(0x2545_f491_4f6c_dd1d);
    let mut next = |bound: usize| random.below(bound as u64) as usize;
    let mut values = originals.clone();
    for original in &originals {
        for _ in 0..8 {
            let mut text = original.clone();
            let mut at = next(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match next(3) {
                0 => text.truncate(at),
                1 => text.insert_str(at, pieces[next(pieces.len())]),
                _ => {
                    let mut end = (at + 1).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(at..end, pieces[next(pieces.len())]);
                }
            }
            values.push(text);
        }
    }

    let verdicts = judge(plugins::CLICKSTREAM_VALIDATOR, &values, &[]);
    let rules = clickstream_validator::Rules::default();
    let (mut kept, mut rejected) = (0, 0);
    for (value, verdict) in values.iter().zip(&verdicts) {
        let native = rules.check(&sluice_guest::Event::new(value.as_bytes()));
        match (verdict, native) {
            (Verdict::Keep, Ok(())) => kept += 1,
            (Verdict::Reject(wasm), Err(native)) => {
                assert_eq!(
                    (wasm.code.as_str(), wasm.field.as_deref()),
                    (native.code(), native.field()),
                    "{value}"
                );
                rejected += 1;
            }
            (wasm, native) => panic!("{value}: Wasm says {wasm:?}, native {native:?}"),
        }
    }
    assert!(
        kept > 500 && rejected > 1000,
        "{kept} kept, {rejected} rejected"
    );
}

/// The plugin (contract `0.2.2`) reads the host's one reading of the event's fields, not
/// the text again: its verdict follows spans that point `event_type` at another field's
/// value, and the true spans give the true verdict.
#[test]
fn the_validator_reads_the_hosts_reading_of_the_fields() {
    let plugin = load(plugins::CLICKSTREAM_VALIDATOR, &[]).expect("validator loads");
    assert!(plugin.scans(), "the validator asks for the host's reading");
    let mut records = records(&[event(&[])]);
    sluice::encode::index_fields(&mut records);
    let judge = |records: &[sluice::record::Record]| {
        plugin
            .process_records(&records.iter().collect::<Vec<_>>())
            .expect("validator runs")
    };
    assert_eq!(judge(&records), [Verdict::Keep]);
    let record = &mut records[0];
    let value = record.value.clone().expect("a value");
    let text = std::str::from_utf8(&value).unwrap();
    let mut spans = record.field_spans().expect("the host read it").to_vec();
    let field = |spans: &[u32], name: &str| {
        spans
            .chunks(4)
            .position(|s| &text[s[0] as usize..(s[0] + s[1]) as usize] == name)
            .expect("the field is there")
            * 4
    };
    let (event_type, device_type) = (field(&spans, "event_type"), field(&spans, "device_type"));
    spans[event_type + 2] = spans[device_type + 2];
    spans[event_type + 3] = spans[device_type + 3];
    let count = spans.len() as u32 / 4;
    record.spans = Some(sluice::record::FieldSpans::new(
        std::sync::Arc::new(spans),
        0,
        count,
        &value,
    ));
    match &judge(&records)[..] {
        [Verdict::Reject(r)] => assert_eq!(r.code, "invalid_event_type", "{r:?}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
}
