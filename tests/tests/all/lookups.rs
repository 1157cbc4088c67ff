//! Lookups from plugins: a real Wasm plugin (the `lookup-probe` test guest, built with the
//! SDK) reads the tables of the batch through the `lookup` import, within its grants.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice::lookup::{Lookups, Table, Version};
use sluice::plugin::config::{Grants, Limits, RuntimeConfig};
use sluice::plugin::{Plugin, PluginError, Runtime, Verdict};
use sluice_tests::{plugins, records};

/// A runtime of its own: its lookup tables are not shared with other tests.
fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn probe(
    runtime: &Runtime,
    params: &[(&str, &str)],
    granted: &[&str],
) -> Result<Plugin, PluginError> {
    let grants = Grants {
        lookups: granted.iter().map(|t| t.to_string()).collect(),
        ..Grants::default()
    };
    let params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let path = Path::new(plugins::LOOKUP_PROBE);
    runtime.load_file("probe", path, params, Limits::default(), grants)
}

fn profiles(tier: &str) -> Lookups {
    let mut t = Table::new(Version::File {
        digest: tier.into(),
    });
    t.insert(b"u1", format!("{{\"tier\":\"{tier}\"}}").as_bytes());
    t.insert(b"u2", b"{\"tier\":\"silver\"}");
    Lookups::new(BTreeMap::from([("profiles".into(), Arc::new(t))]))
}

/// The verdicts of `plugin` on events asking for `keys` of `table`, as JSON (rewrites) or
/// `code: message` (rejections).
fn ask(plugin: &Plugin, table: &str, keys: &[&str]) -> Vec<Value> {
    let event = json!({ "table": table, "keys": keys }).to_string();
    let records = records(&[event]);
    let verdicts = plugin.process_records(&records.iter().collect::<Vec<_>>());
    verdicts
        .unwrap()
        .into_iter()
        .map(|v| match v {
            Verdict::Rewrite(value) => serde_json::from_slice(&value).unwrap(),
            Verdict::Reject(r) => Value::String(format!("{}: {}", r.code, r.message)),
            Verdict::Keep => Value::Null,
            Verdict::Patch(p) => panic!("the probe never patches: {p:?}"),
        })
        .collect()
}

#[test]
fn a_plugin_reads_granted_tables_singly_and_in_one_call() {
    let runtime = runtime();
    runtime.lookups().set(profiles("gold"));
    for mode in ["single", "many"] {
        let plugin = probe(&runtime, &[("mode", mode)], &["profiles"]).unwrap();
        let answer = ask(&plugin, "profiles", &["u2", "nobody", "u1"]);
        assert_eq!(
            answer,
            vec![json!({"values": [{"tier": "silver"}, null, {"tier": "gold"}]})],
            "{mode}"
        );
    }
}

#[test]
fn each_call_reads_the_tables_set_before_it() {
    let runtime = runtime();
    let plugin = probe(&runtime, &[], &["profiles"]).unwrap();
    runtime.lookups().set(profiles("gold"));
    assert_eq!(
        ask(&plugin, "profiles", &["u1"]),
        vec![json!({"values": [{"tier": "gold"}]})]
    );
    runtime.lookups().set(profiles("platinum"));
    assert_eq!(
        ask(&plugin, "profiles", &["u1"]),
        vec![json!({"values": [{"tier": "platinum"}]})]
    );
}

#[test]
fn tables_not_granted_or_not_loaded_answer_an_error_naming_table_and_stage() {
    let runtime = runtime();
    runtime.lookups().set(profiles("gold"));
    for mode in ["single", "many"] {
        let plugin = probe(&runtime, &[("mode", mode)], &["products"]).unwrap();
        let [Value::String(denied)] = &ask(&plugin, "profiles", &["u1"])[..] else {
            panic!("not a rejection")
        };
        assert!(
            denied.starts_with(
                "lookup_failed: not_granted: stage `probe` is not granted lookup table `profiles`"
            ),
            "{mode}: {denied}"
        );
        let [Value::String(unknown)] = &ask(&plugin, "products", &["p1"])[..] else {
            panic!("not a rejection")
        };
        assert!(
            unknown.starts_with("lookup_failed: unknown_table: stage `probe` is granted lookup table `products`, but"),
            "{mode}: {unknown}"
        );
    }
}

#[test]
fn lookups_in_init_are_unavailable_not_a_trap() {
    let runtime = runtime();
    runtime.lookups().set(profiles("gold"));
    let error = probe(&runtime, &[("init-table", "profiles")], &["profiles"]).unwrap_err();
    let PluginError::Init { message, .. } = &error else {
        panic!("{error}")
    };
    assert!(
        message
            .starts_with("unavailable: stage `probe` looked up table `profiles` outside `process`"),
        "{message}"
    );
}
