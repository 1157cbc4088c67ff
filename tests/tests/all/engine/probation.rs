//! A new plugin version on probation that fails is rolled back by itself, and the batch it
//! judged is processed again on the previous version before anything of it leaves.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use sluice::pipeline::crash::Crash;
use sluice::plugin::swap::{self, Candidate, Found};
use sluice_tests::plugins;

use super::{Engine, PLAIN, plain};

#[test]
fn a_failing_version_is_rolled_back_and_its_batch_processed_again() {
    let stage = format!(
        "\n[[stages]]\nname = \"rules\"\nplugin = \"{}\"\n",
        plugins::KEEP_ALL
    );
    let engine = Engine::new("probation", &format!("{PLAIN}{stage}"));
    engine.append(&(0..4).map(plain).collect::<Vec<_>>());
    let mut pipeline = engine.open(Crash::Never).unwrap();
    let stop = AtomicBool::new(false);
    assert_eq!(pipeline.run(&stop).unwrap().rows_written, 4);

    // A release gone wrong: it traps on every event.
    let config = &engine.config.stages[0];
    let bytes = std::fs::read(plugins::TRAP_ALWAYS).unwrap();
    let bad = swap::prepare(sluice_tests::runtime(), config, &bytes, &[]).unwrap();
    let bad_digest = bad.digest().to_string();
    let good_digest = pipeline.stages().active()[0].digest().to_string();
    let candidate = Candidate {
        stage: 0,
        plugin: bad,
        detected: Instant::now(),
        prepared_in: Duration::ZERO,
    };
    pipeline
        .stages()
        .sender()
        .send(Found::Ready(candidate))
        .unwrap();
    engine.append(&(4..8).map(plain).collect::<Vec<_>>());
    let summary = pipeline.run(&stop).unwrap();

    // Every event of the batch was judged again by the previous version: none was lost
    // or dead-lettered as a failure of the bad one.
    assert_eq!((summary.rows_written, summary.rows_dead_lettered), (4, 0));
    assert_eq!(engine.rows(None).len(), 8);
    assert!(engine.topic("dead").is_empty());
    assert_eq!(pipeline.stages().active()[0].digest(), good_digest);
    assert_ne!(bad_digest, good_digest);
}
