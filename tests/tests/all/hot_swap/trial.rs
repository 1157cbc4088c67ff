//! A new version on trial: in shadow mode it reports where it disagrees and changes
//! nothing; with rejection bounds it is rolled back when it rejects too much.

use super::*;

#[test]
fn a_shadow_version_reports_where_it_disagrees_without_changing_the_output() {
    // keep-all is active; the validator runs beside it in shadow mode. On 2 000 generated
    // events, 20% invalid, the shadow must disagree exactly where the validator's rules
    // (run natively here, on the same events) reject, and the output must be keep-all's.
    let mut s = Setup::new("shadow");
    s.write_config(
        "shadow.toml",
        &CONFIG
            .replace("mode = \"interval\"", "mode = \"available-now\"")
            .replace("rollback = {", "shadow = \"candidate.wasm\"\nrollback = {"),
    );
    install(plugins::KEEP_ALL, &s.warehouse.join("rules.wasm"));
    install(
        plugins::CLICKSTREAM_VALIDATOR,
        &s.warehouse.join("candidate.wasm"),
    );
    let validator = load(plugins::CLICKSTREAM_VALIDATOR, &[]).unwrap();
    produce(
        &s.broker.bootstrap,
        &s.topic,
        &[
            "--count",
            "2000",
            "--invalid-share",
            "0.2",
            "--seed",
            "7",
            "--partitions",
            "2",
        ],
    );
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));

    let rules = clickstream_validator::Rules::default();
    let mut expected = std::collections::BTreeMap::<String, u64>::new();
    for event in sluice::generate::Generator::new(sluice::generate::GeneratorConfig {
        seed: 7,
        invalid_share: 0.2,
        ..Default::default()
    })
    .take(2000)
    {
        if let Err(r) = rules.check(&sluice_guest::Event::new(event.value.as_bytes())) {
            *expected
                .entry(format!("kept -> rejected:{}", r.code()))
                .or_default() += 1;
        }
    }
    assert!(expected.len() >= 4, "several codes: {expected:?}");

    let progress = progress_lines(&String::from_utf8_lossy(&out.stderr));
    let mut got = std::collections::BTreeMap::<String, u64>::new();
    let (mut events, mut agreed) = (0, 0);
    for p in &progress {
        let shadow = &p["stages"]["rules"]["shadow"];
        assert_eq!(shadow["digest"], validator.digest());
        events += shadow["events"].as_u64().unwrap();
        agreed += shadow["agreed"].as_u64().unwrap();
        for (key, d) in shadow["disagreements"].as_object().unwrap() {
            *got.entry(key.clone()).or_default() += d["count"].as_u64().unwrap();
            let samples = d["samples"].as_array().unwrap();
            assert!(!samples.is_empty() && samples.len() <= 5, "{d}");
            assert!(samples[0].as_str().unwrap().starts_with(&s.topic), "{d}");
        }
    }
    assert_eq!(got, expected);
    assert_eq!(events, 2000);
    assert_eq!(agreed + expected.values().sum::<u64>(), 2000);

    // The shadow changed nothing: every event keep-all kept went on; only the table's
    // schema refused some (stage `encode`), none was refused by the stage.
    let shown = s.show();
    let dead = shown["dead_letters"].as_array().unwrap();
    assert!(
        dead.iter()
            .all(|d| d["headers"]["sluice.error.stage"] == "encode")
    );
    assert_eq!(shown["rows"].as_array().unwrap().len() + dead.len(), 2000);
}

#[test]
fn rejection_bounds_roll_a_new_version_back() {
    // The relative bound (here: at most twice the previous version's share) and the
    // absolute one. The counts are given by hand, as a batch would report them.
    use sluice::pipeline::stages::{StageCounts, Stages};
    use sluice::plugin::swap::{Candidate, Found};
    let stage: sluice::plugin::config::StageConfig = toml::from_str(&format!(
        "name = \"rules\"\nplugin = \"{}\"\nwatch = false\nrollback = {{ first-events = 1000, max-failure-rate = 0.5, max-rejection-ratio = 2.0 }}",
        plugins::KEEP_ALL
    ))
    .unwrap();
    let runtime = sluice_tests::runtime();
    let mut stages = Stages::load(runtime, std::slice::from_ref(&stage)).unwrap();
    let old = stages.active()[0].digest().to_string();
    let counts = |events, rejected| StageCounts {
        events,
        kept: events - rejected,
        rejected,
        ..StageCounts::default()
    };
    // The active version rejected 10% of its events.
    stages.committed(&[counts(1000, 100)]);
    let new = swap::prepare(
        runtime,
        &stage,
        &std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap(),
        &[],
    )
    .unwrap();
    let new_digest = new.digest().to_string();
    let sender = stages.sender();
    let offer = |plugin| {
        sender
            .send(Found::Ready(Candidate {
                stage: 0,
                plugin,
                detected: Instant::now(),
                prepared_in: Duration::ZERO,
            }))
            .unwrap()
    };
    offer(new.clone());
    stages.activate_new_versions();
    assert_eq!(stages.active()[0].digest(), new_digest);
    // 15% is within twice 10%: it stays on probation.
    assert!(!stages.judge(&[counts(200, 30)]));
    stages.committed(&[counts(200, 30)]);
    // 25% over its first 400 events is over twice 10%: rolled back to the previous one.
    assert!(stages.judge(&[counts(200, 70)]));
    assert_eq!(stages.active()[0].digest(), old);
    let progress = stages.progress(&[counts(200, 0)], Vec::new(), Vec::new());
    let rules = &progress["rules"];
    assert_eq!((rules.swaps, rules.rollbacks), (1, 1));
    assert!(
        rules
            .rolled_back
            .as_deref()
            .unwrap()
            .contains("over 2× the previous version's 10.0%"),
        "{:?}",
        rules.rolled_back
    );

    // A version that passes its probation is kept: 1 000 events within the bounds.
    offer(new);
    stages.activate_new_versions();
    assert!(!stages.judge(&[counts(1000, 150)]));
    stages.committed(&[counts(1000, 150)]);
    assert!(!stages.judge(&[counts(10, 10)]), "probation is over");
    assert_eq!(stages.active()[0].digest(), new_digest);

    // The absolute bound: at most 20% rejected, whatever the previous version did.
    let absolute: sluice::plugin::config::StageConfig = toml::from_str(&format!(
        "name = \"rules\"\nplugin = \"{}\"\nwatch = false\nrollback = {{ max-rejection-rate = 0.2 }}",
        plugins::KEEP_ALL
    ))
    .unwrap();
    let mut stages = Stages::load(runtime, std::slice::from_ref(&absolute)).unwrap();
    stages
        .sender()
        .send(Found::Ready(Candidate {
            stage: 0,
            plugin: swap::prepare(
                runtime,
                &absolute,
                &std::fs::read(plugins::CLICKSTREAM_VALIDATOR).unwrap(),
                &[],
            )
            .unwrap(),
            detected: Instant::now(),
            prepared_in: Duration::ZERO,
        }))
        .unwrap();
    stages.activate_new_versions();
    assert!(!stages.judge(&[counts(100, 20)]));
    stages.committed(&[counts(100, 20)]);
    assert!(
        stages.judge(&[counts(100, 30)]),
        "25% of its first 200 events"
    );
    assert_eq!(stages.active()[0].digest(), old);
}
