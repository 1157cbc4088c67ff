//! A plugin cannot make each dead letter carry megabytes: its messages are capped, and the
//! error of a failed call is made once for all of the call's records.

use sluice_tests::plugins;

use super::{Engine, PLAIN, plain};
use sluice::record::MAX_MESSAGE_BYTES;

fn stage(mode: &str, bytes: usize) -> String {
    format!(
        "\n[[stages]]\nname = \"evil\"\nplugin = \"{}\"\nparams = {{ mode = \"{mode}\", bytes = \"{bytes}\" }}\nlimits = {{ max-output = \"64MiB\" }}\n",
        plugins::MISBEHAVE
    )
}

fn messages(engine: &Engine) -> Vec<String> {
    engine
        .topic("dead")
        .iter()
        .map(|d| d.headers["sluice.error.message"].clone())
        .collect()
}

#[test]
fn a_huge_chunk_error_is_capped_and_every_record_dead_lettered() {
    let engine = Engine::new(
        "huge-error",
        &format!("{PLAIN}{}", stage("huge-error", 8 << 20)),
    );
    engine.append(&(0..8).map(plain).collect::<Vec<_>>());
    let summary = engine.run().unwrap();
    assert_eq!(summary.rows_dead_lettered, 8);
    let messages = messages(&engine);
    assert_eq!(messages.len(), 8);
    for m in &messages {
        assert!(m.len() <= MAX_MESSAGE_BYTES, "{}", m.len());
        assert!(m.ends_with("more bytes cut]"), "{}", &m[m.len() - 60..]);
    }
}

#[test]
fn huge_rejection_messages_are_capped() {
    let engine = Engine::new(
        "huge-reason",
        &format!("{PLAIN}{}", stage("huge-reason", 100_000)),
    );
    engine.append(&(0..4).map(plain).collect::<Vec<_>>());
    engine.run().unwrap();
    let messages = messages(&engine);
    assert_eq!(messages.len(), 4);
    assert!(
        messages
            .iter()
            .all(|m| m.len() <= MAX_MESSAGE_BYTES && m.starts_with("rrrr"))
    );
}
