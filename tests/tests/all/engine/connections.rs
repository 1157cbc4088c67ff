//! Every output topic is opened on the source's cluster with `[source] properties` and its
//! own properties over them: the production wiring of the outputs, seen through the
//! in-memory topics, which keep the target of every topic opened.

use std::collections::BTreeMap;

use sluice::pipeline::crash::Crash;

use super::{Engine, pipeline_file};

/// Dead letters, late data to a topic, and a window topic, each with properties.
const OUTPUTS: &str = pipeline_file!(
    "connections",
    r#"
[source.properties]
"security.protocol" = "SSL"
"ssl.ca.location" = "/etc/sluice/ca.pem"
"client.id" = "shared"

[sink]
warehouse = "warehouse"
namespace = "engine"
table = "events"
columns = [{ name = "id", type = "string" }]

[dead-letter]
topic = "dead"
properties = { "client.id" = "dead" }

[event-time]
field = "ts"
max-delay = "1m"
late = "topic"
late-topic = "late"
late-topic-properties = { "client.id" = "late" }

[[windows]]
name = "w"
size = "1m"
aggregates = [{ name = "n", fn = "count" }]
kafka = { topic = "counts", properties = { "linger.ms" = "50" } }
"#
);

#[test]
fn every_output_topic_gets_the_source_properties_and_its_own_win() {
    let engine = Engine::new("connections", OUTPUTS);
    engine.open(Crash::Never).unwrap();
    let opened: BTreeMap<String, (String, BTreeMap<String, String>)> = engine
        .topics
        .opened()
        .into_iter()
        .map(|t| {
            let c = t.connection;
            (t.topic, (c.bootstrap.clone(), c.properties()))
        })
        .collect();
    let topics: Vec<&str> = opened.keys().map(String::as_str).collect();
    assert_eq!(topics, ["counts", "dead", "late"]);
    for (topic, (bootstrap, properties)) in &opened {
        assert_eq!(bootstrap, "memory", "{topic}");
        assert_eq!(properties["security.protocol"], "SSL", "{topic}");
        assert_eq!(
            properties["ssl.ca.location"], "/etc/sluice/ca.pem",
            "{topic}"
        );
    }
    let property = |topic: &str, key: &str| opened[topic].1.get(key).cloned();
    assert_eq!(property("dead", "client.id").as_deref(), Some("dead"));
    assert_eq!(property("late", "client.id").as_deref(), Some("late"));
    assert_eq!(property("counts", "client.id").as_deref(), Some("shared"));
    assert_eq!(property("counts", "linger.ms").as_deref(), Some("50"));
}
