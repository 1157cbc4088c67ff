//! Plugins written in JavaScript (`udfs/js/`), componentized from source by `build.rs` with
//! the pinned componentize-js: the clickstream validator's rules in JavaScript give the
//! verdicts of the Rust plugin on the same table (the `check_*` functions of `validator.rs`).

use sluice::plugin::{Failure, Plugin, PluginError, Verdict};
use sluice_tests::{load, plugins, records};

use crate::validator;

/// The JavaScript validator's component; `None`, after saying why, when `build.rs` could not
/// build it because npm or its registry was unreachable. In CI (`CI` set) that fails the test.
pub(crate) fn js_validator() -> Option<&'static str> {
    built(plugins::CLICKSTREAM_VALIDATOR_JS)
}

/// A JavaScript component's path, as `build.rs` gives it; `None`, after saying why, when it
/// could not be built here (failing the test in CI, `CI` set).
fn built(component: Result<&'static str, &'static str>) -> Option<&'static str> {
    match component {
        Ok(path) => Some(path),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("{why}; CI must build and test the JavaScript plugins")
        }
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// The table of `validator.rs` on one instance of the plugin (compiling the 12 MB
/// component is most of a JavaScript test's time): the valid events, each violation, a
/// null value.
#[test]
fn js_validator_gives_the_verdicts_of_the_table() {
    let Some(path) = js_validator() else { return };
    let plugin = load(path, &[]).expect("the JavaScript validator loads");
    // Its world leaves out `scan`: `JSON.parse` has no use for the host's reading, so the
    // host does not make one for it.
    assert!(!plugin.scans(), "a JavaScript plugin does not import scan");
    validator::check_valid_events_are_kept(&plugin);
    validator::check_each_violation_has_its_code_and_field(&plugin);
    validator::check_a_null_value_is_rejected(&plugin);
}

#[test]
fn js_validator_takes_allowed_event_types() {
    if let Some(path) = js_validator() {
        validator::check_allowed_event_types_can_be_overridden(path);
    }
}

#[test]
fn js_validator_refuses_unknown_parameters_at_load() {
    if let Some(path) = js_validator() {
        validator::check_unknown_parameters_refuse_the_plugin_at_load(path);
    }
}

/// The JavaScript test guest (`udfs/js/test-guest`) in `mode`, or `None` as for
/// [`js_validator`].
fn js_test_guest(mode: &str) -> Option<Result<Plugin, PluginError>> {
    built(plugins::JS_TEST_GUEST).map(|path| load(path, &[("mode", mode)]))
}

/// What the helper makes of an author's answers: `rewrite(value)` (a value written as
/// JSON), `reject(code, message, field)`, and the `Rejection` that `event.json()` throws.
#[test]
fn js_helper_turns_answers_into_verdicts() {
    let Some(plugin) = js_test_guest("rewrite") else {
        return;
    };
    let plugin = plugin.expect("the test guest loads");
    let verdicts = plugin
        .process_records(
            &records(&[r#"{"n": 1}"#, r#"{"m": 2}"#, "not json"])
                .iter()
                .collect::<Vec<_>>(),
        )
        .unwrap();
    assert_eq!(verdicts[0], Verdict::Rewrite(br#"{"n":2}"#.to_vec()));
    let Verdict::Reject(wrong) = &verdicts[1] else {
        panic!("{verdicts:?}")
    };
    assert_eq!(
        (
            wrong.code.as_str(),
            wrong.field.as_deref(),
            wrong.message.as_str()
        ),
        ("not_a_count", Some("n"), "n must be a number")
    );
    let Verdict::Reject(malformed) = &verdicts[2] else {
        panic!("{verdicts:?}")
    };
    assert_eq!(
        (malformed.code.as_str(), malformed.field.as_deref()),
        ("malformed_json", None)
    );
    assert!(
        malformed.message.starts_with("malformed JSON value: "),
        "{malformed:?}"
    );
}

/// An exception other than a rejection fails the whole chunk (the host then isolates the
/// event), with a message that names the event and the exception.
#[test]
fn a_js_exception_fails_the_chunk_naming_the_event() {
    let Some(plugin) = js_test_guest("throw") else {
        return;
    };
    let plugin = plugin.expect("the test guest loads");
    let error = plugin
        .process_records(&records(&["1", r#""boom""#, "2"]).iter().collect::<Vec<_>>())
        .unwrap_err();
    let Some(Failure::Plugin { message }) = error.failure() else {
        panic!("{error}")
    };
    assert_eq!(
        message,
        "event 1 (offset 1): TypeError: boom is not an event"
    );
    // The instance is not broken: the next chunk is judged.
    let verdicts = plugin
        .process_records(&records(&["3"]).iter().collect::<Vec<_>>())
        .unwrap();
    assert_eq!(verdicts, [Verdict::Keep]);
}

/// `init` throwing refuses the plugin at load, with its message.
#[test]
fn a_js_init_error_refuses_the_plugin() {
    let Some(result) = js_test_guest("sideways") else {
        return;
    };
    let error = result.unwrap_err();
    assert!(matches!(error, PluginError::Init { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("unknown mode sideways; modes: keep, parse, rewrite, patch, throw"),
        "{error}"
    );
}

/// `patch(fields)` answers a patch: the fields' JSON texts, in the order given.
#[test]
fn a_js_patch_is_a_patch_verdict() {
    let Some(plugin) = js_test_guest("patch") else {
        return;
    };
    let plugin = plugin.expect("the test guest loads");
    let verdicts = plugin
        .process_records(&records(&[r#"{"n": 3}"#, "{}"]).iter().collect::<Vec<_>>())
        .unwrap();
    let Verdict::Patch(patch) = &verdicts[0] else {
        panic!("{verdicts:?}")
    };
    assert_eq!(
        patch.fields().collect::<Vec<_>>(),
        [("doubled", &b"6"[..]), ("source", &br#""js""#[..])]
    );
    assert!(matches!(&verdicts[1], Verdict::Reject(r) if r.code == "not_a_count"));
}

/// A JavaScript enrichment (`udfs/js/test-enricher`) reads a lookup table: announced ahead
/// and read by the host (`enrich`: `prefetch` and `lookupFields`) or whole values, one call
/// per event (`lookup`): the same verdicts; a table not granted rejects with
/// `lookup_failed`.
#[test]
fn a_js_enrichment_reads_lookup_tables_and_patches() {
    let Some(path) = built(plugins::JS_TEST_ENRICHER) else {
        return;
    };
    let path = std::path::Path::new(path);
    let values = [r#"{"user":"u1"}"#, r#"{"user":"u9"}"#, "not json"];
    for mode in ["enrich", "lookup"] {
        let (_runtime, plugin) = crate::enricher::with_profiles(path, &[("mode", mode)], true);
        let verdicts = plugin
            .process_records(&records(&values).iter().collect::<Vec<_>>())
            .unwrap();
        let Verdict::Patch(patch) = &verdicts[0] else {
            panic!("{mode}: {verdicts:?}")
        };
        assert_eq!(
            patch.fields().collect::<Vec<_>>(),
            [("tier", &br#""gold""#[..])],
            "{mode}"
        );
        assert!(
            matches!(&verdicts[1], Verdict::Reject(r) if r.code == "unknown_user" && r.field.as_deref() == Some("user")),
            "{mode}: {verdicts:?}"
        );
        assert!(
            matches!(&verdicts[2], Verdict::Reject(r) if r.code == "malformed_json"),
            "{mode}: {verdicts:?}"
        );

        let (_runtime, refused) = crate::enricher::with_profiles(path, &[("mode", mode)], false);
        let verdicts = refused
            .process_records(&records(&values[..1]).iter().collect::<Vec<_>>())
            .unwrap();
        let Verdict::Reject(r) = &verdicts[0] else {
            panic!("{mode}: {verdicts:?}")
        };
        assert_eq!(r.code, "lookup_failed", "{mode}");
        assert!(r.message.contains("profiles"), "{mode}: {r:?}");
    }
}
