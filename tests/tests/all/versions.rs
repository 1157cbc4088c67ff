//! Contract versions: plugins built against earlier compatible versions of
//! `sluice:plugin` load and run, and one built against a later minor version is refused
//! at load with a message naming the versions the host speaks.

use sluice::plugin::config::{Grants, Limits};
use sluice::plugin::{PluginError, Verdict, WIT_VERSION};
use sluice::record::Record;
use sluice_tests::{load, plugins, records, runtime};

use crate::adversarial::assert_host_still_serves;

fn refs(records: &[Record]) -> Vec<&Record> {
    records.iter().collect()
}

/// Checks that the component at `path` names each of `interfaces` (imports or exports).
fn assert_uses(path: &str, interfaces: &[&str]) {
    let guest = std::fs::read(path).unwrap();
    for name in interfaces {
        assert!(
            guest.windows(name.len()).any(|w| w == name.as_bytes()),
            "{path} does not use {name}"
        );
    }
}

/// A plugin built against `sluice:plugin@0.1.0` (before lookups were added) loads unchanged
/// on this host and runs: its imports (`host@0.1.0`) and its export (`processor@0.1.0`)
/// match the host's compatible `0.1.x`.
#[test]
fn a_plugin_built_against_an_earlier_compatible_version_loads_and_runs() {
    assert_uses(
        plugins::OLD_VERSION,
        &["sluice:plugin/processor@0.1.0", "sluice:plugin/host@0.1.0"],
    );
    assert_ne!(WIT_VERSION, "0.1.0", "the host speaks a later version");
    let plugin = load(plugins::OLD_VERSION, &[]).unwrap();
    assert_eq!(plugin.declared(), ("old-version".into(), "0.1.0".into()));
    let verdicts = plugin
        .process_records(&refs(&records(&["{}", "{\"a\":1}"])))
        .unwrap();
    assert_eq!(
        verdicts,
        vec![
            Verdict::Rewrite(b"{\"old-version\":2}".to_vec()),
            Verdict::Rewrite(b"{\"old-version\":7}".to_vec())
        ]
    );
}

/// A plugin built against `sluice:plugin@0.2.0` (before `lookup-fields`) loads unchanged
/// on this host, its imports (`lookup@0.2.0`, `host@0.2.0`) are answered and its patches
/// applied.
#[test]
fn a_plugin_built_against_0_2_0_loads_and_its_imports_are_answered() {
    assert_uses(
        plugins::V0_2_0,
        &[
            "sluice:plugin/processor@0.2.0",
            "sluice:plugin/lookup@0.2.0",
        ],
    );
    assert_ne!(WIT_VERSION, "0.2.0", "the host speaks a later version");
    let plugin = load(plugins::V0_2_0, &[]).unwrap();
    assert_eq!(plugin.declared(), ("v0-2-0".into(), "0.2.0".into()));
    let verdicts = plugin
        .process_records(&refs(&records(&["{}", "{\"a\":1}"])))
        .unwrap();
    let applied: Vec<String> = verdicts
        .iter()
        .zip(["{}", "{\"a\":1}"])
        .map(|(v, value)| match v {
            Verdict::Patch(p) => {
                String::from_utf8(p.apply(Some(value.as_bytes())).unwrap()).unwrap()
            }
            other => panic!("not a patch: {other:?}"),
        })
        .collect();
    assert_eq!(
        applied,
        [
            r#"{"length":2,"lookup":"not_granted"}"#,
            r#"{"a":1,"length":7,"lookup":"not_granted"}"#
        ]
    );
}

#[test]
fn another_wit_version_is_refused_at_load() {
    let error = load(plugins::FUTURE_VERSION, &[]).unwrap_err();
    assert!(
        matches!(error, PluginError::Incompatible { version, .. } if version == WIT_VERSION),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("sluice:plugin/processor@{WIT_VERSION}")),
        "{error}"
    );
    // The guest is refused for its version alone: it exports the processor of the next
    // minor version (its build.rs derives its WIT from wit/plugin.wit, bumping the version).
    let minor: u32 = WIT_VERSION.split('.').nth(1).unwrap().parse().unwrap();
    let exported = format!("sluice:plugin/processor@0.{}.0", minor + 1);
    let guest = std::fs::read(plugins::FUTURE_VERSION).unwrap();
    assert!(
        guest
            .windows(exported.len())
            .any(|w| w == exported.as_bytes()),
        "{} does not export {exported}",
        plugins::FUTURE_VERSION
    );
    assert!(
        error.to_string().contains("sluice:plugin@0.1 too"),
        "{error}"
    );

    let not_wasm = runtime().load(
        "junk",
        b"\0asm but not really",
        vec![],
        Limits::default(),
        Grants::default(),
    );
    assert!(
        matches!(not_wasm, Err(PluginError::Compile { .. })),
        "{not_wasm:?}"
    );
    assert_host_still_serves();
}
