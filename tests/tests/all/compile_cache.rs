//! The compile cache (`[runtime] compile-cache`) with real plugins: a plugin read from the
//! cache judges as the one compiled; a restart finds it; another engine setting compiles
//! its own; a damaged entry is compiled again and the plugin still judges; another
//! plugin's entry planted under this one's name is not run; a folder its group may write
//! is not used.

use std::path::{Path, PathBuf};

use sluice::plugin::config::{CompileCacheDir, Grants, Limits, RuntimeConfig};
use sluice::plugin::{Origin, Plugin, Runtime, Verdict};
use sluice_tests::{plugins, records, seed_events};

/// A fresh cache folder for one test, removed when dropped.
struct CacheDir(PathBuf);

impl CacheDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "sluice-test-compile-cache-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        CacheDir(dir)
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn runtime(dir: &Path, enforce_call_timeout: bool) -> Runtime {
    Runtime::new(RuntimeConfig {
        compile_cache: CompileCacheDir::At(dir.to_owned()),
        enforce_call_timeout,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn load(runtime: &Runtime, path: &str) -> Plugin {
    runtime
        .load_file(
            "validator",
            Path::new(path),
            Vec::new(),
            Limits::default(),
            Grants::default(),
        )
        .expect("the plugin loads")
}

/// The verdicts on the tutorial's five events and three invalid ones.
fn verdicts(plugin: &Plugin) -> Vec<Verdict> {
    let mut values = seed_events();
    values.extend([
        "not json".into(),
        "{}".into(),
        r#"{"event_type": 7}"#.into(),
    ]);
    let records = records(&values);
    plugin
        .process_records(&records.iter().collect::<Vec<_>>())
        .unwrap()
}

#[test]
fn a_plugin_from_the_cache_judges_as_the_compiled_one() {
    let dir = CacheDir::new("judges");
    let first = runtime(&dir.0, true);
    let compiled = load(&first, plugins::CLICKSTREAM_VALIDATOR);
    assert_eq!(compiled.origin(), Origin::Compiled);
    let cached = load(&first, plugins::CLICKSTREAM_VALIDATOR);
    assert_eq!(cached.origin(), Origin::Cache);
    assert_eq!(verdicts(&cached), verdicts(&compiled));
    assert_eq!(
        verdicts(&compiled)[..5],
        std::array::from_fn::<_, 5, _>(|_| Verdict::Keep)
    );
    assert_eq!(
        (first.compile_cache().hits(), first.compile_cache().misses()),
        (1, 1)
    );

    // A restart finds it; a runtime that compiles other code (no deadline checks) does not.
    let restarted = runtime(&dir.0, true);
    assert_eq!(
        load(&restarted, plugins::CLICKSTREAM_VALIDATOR).origin(),
        Origin::Cache
    );
    let unchecked = runtime(&dir.0, false);
    let plugin = load(&unchecked, plugins::CLICKSTREAM_VALIDATOR);
    assert_eq!(plugin.origin(), Origin::Compiled);
    assert_eq!(verdicts(&plugin), verdicts(&compiled));
    // Another plugin is another entry.
    assert_eq!(load(&first, plugins::KEEP_ALL).origin(), Origin::Compiled);
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 3);
}

#[test]
fn a_damaged_entry_is_compiled_again_and_the_plugin_still_judges() {
    let dir = CacheDir::new("damaged");
    let runtime = runtime(&dir.0, true);
    let compiled = load(&runtime, plugins::CLICKSTREAM_VALIDATOR);
    let expected = verdicts(&compiled);
    let entry = runtime.compile_cache().entry(compiled.digest()).unwrap();
    let whole = std::fs::read(&entry).unwrap();

    let mut flipped = whole.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    for damaged in [whole[..whole.len() - 100].to_vec(), flipped] {
        std::fs::write(&entry, &damaged).unwrap();
        let plugin = load(&runtime, plugins::CLICKSTREAM_VALIDATOR);
        assert_eq!(plugin.origin(), Origin::Compiled);
        assert_eq!(verdicts(&plugin), expected);
        assert_eq!(
            std::fs::read(&entry).unwrap(),
            whole,
            "the entry is rewritten"
        );
        let plugin = load(&runtime, plugins::CLICKSTREAM_VALIDATOR);
        assert_eq!(plugin.origin(), Origin::Cache);
        assert_eq!(verdicts(&plugin), expected);
    }
}

/// Another plugin's entry copied under the enricher's name (what the finding planted) is
/// refused: the `enrich` stage rewrites the five events, as the enricher does, instead of
/// keeping them as keep-all would, and it is compiled, not loaded from the cache.
#[test]
fn another_plugins_entry_under_this_ones_name_is_not_run() {
    let dir = CacheDir::new("planted");
    let runtime = runtime(&dir.0, true);
    let keep_all = load(&runtime, plugins::KEEP_ALL);
    let enricher_digest =
        sluice::plugin::digest_of(&std::fs::read(plugins::CLICKSTREAM_ENRICHER).unwrap());
    let planted = runtime.compile_cache().entry(&enricher_digest).unwrap();
    std::fs::copy(
        runtime.compile_cache().entry(keep_all.digest()).unwrap(),
        &planted,
    )
    .unwrap();

    let enricher = load(&runtime, plugins::CLICKSTREAM_ENRICHER);
    assert_eq!(enricher.origin(), Origin::Compiled);
    assert_eq!(enricher.digest(), enricher_digest);
    let judged = verdicts(&enricher);
    assert!(
        judged[..5].iter().all(|v| matches!(v, Verdict::Rewrite(_))),
        "the enricher rewrites the five events: {judged:?}"
    );
    // Its own entry replaced the planted one, and is used from now on.
    let again = load(&runtime, plugins::CLICKSTREAM_ENRICHER);
    assert_eq!(again.origin(), Origin::Cache);
    assert_eq!(verdicts(&again), judged);
}

/// A folder that its group may write is not used: every load compiles.
#[test]
fn a_group_writable_folder_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = CacheDir::new("group");
    std::fs::create_dir_all(&dir.0).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o775)).unwrap();
    let runtime = runtime(&dir.0, true);
    for _ in 0..2 {
        let plugin = load(&runtime, plugins::KEEP_ALL);
        assert_eq!(plugin.origin(), Origin::Compiled);
    }
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
}
