//! The event generator says truthfully which events are invalid: the validator's rules,
//! compiled natively, agree with it on every event.

use clickstream_validator::Rules;
use sluice::generate::{EventKind, Generator, GeneratorConfig};

#[test]
fn generated_kinds_match_the_validator() {
    let config = GeneratorConfig {
        invalid_share: 0.2,
        late_share: 0.1,
        duplicate_share: 0.05,
        ..GeneratorConfig::default()
    };
    let rules = Rules::default();
    let mut originals = std::collections::HashMap::new();
    for event in Generator::new(config).take(5000) {
        let verdict = rules.check(&sluice_guest::Event::new(event.value.as_bytes()));
        let invalid = match event.kind {
            EventKind::Invalid => true,
            EventKind::Valid | EventKind::Late => false,
            EventKind::Duplicate => originals[&event.value],
        };
        assert_eq!(verdict.is_err(), invalid, "{:?}: {verdict:?}", event);
        originals.insert(event.value, invalid);
    }
}
