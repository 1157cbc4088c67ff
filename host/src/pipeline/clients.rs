//! The Kafka clients a pipeline makes, and how each reaches its cluster: the source's
//! consumer, the election's (an event-time pipeline in `mode = "group"`), and a producer
//! per output topic (dead letters, late data, window results), each with `[source]
//! properties` and the output's own over them. [`super::open`] opens the outputs at these
//! targets; `sluice run --check` checks these clients offline ([`crate::kafka::check`]).

use std::path::Path;

use super::config::{ConfigError, OnInvalid, PipelineConfig};
use crate::election::KafkaElection;
use crate::event_time::config::LateData;
use crate::kafka::check::{ClientKind, PlannedClient, check_clients};
use crate::sink::topic::{TopicTarget, producer_config};
use crate::source::kafka::KafkaSource;

/// The pipeline's consumer group: `[source] group-id`, else `sluice-<name>`.
pub fn group(config: &PipelineConfig) -> String {
    config.group()
}

/// The dead-letter topic, if the pipeline sends anything there: refused events
/// (`on-invalid = "dead-letter"`) or late ones (`late = "dead-letter"`).
pub fn dead_letter_target(config: &PipelineConfig) -> Option<TopicTarget> {
    let late = config.event_time.as_ref().map(|et| et.late);
    let dl = config.dead_letter.as_ref()?;
    let used =
        config.pipeline.on_invalid == OnInvalid::DeadLetter || late == Some(LateData::DeadLetter);
    used.then(|| dl.target(&config.source.connection()))
}

/// The late-data topic, with `late = "topic"`.
pub fn late_target(config: &PipelineConfig) -> Option<TopicTarget> {
    let et = config.event_time.as_ref()?;
    et.late_target(&config.source.connection())
}

/// Every output topic, each with what it is for people: dead letters, late data, then the
/// windows' topics in order.
pub fn output_targets(config: &PipelineConfig) -> Vec<(String, String, TopicTarget)> {
    let source = config.source.connection();
    let mut targets = Vec::new();
    if let Some(t) = dead_letter_target(config) {
        targets.push(("dead-letter".into(), "[dead-letter] properties".into(), t));
    }
    if let Some(t) = late_target(config) {
        let section = "[event-time] late-topic-properties".into();
        targets.push(("late-topic".into(), section, t));
    }
    for window in &config.windows {
        if let Some(k) = &window.kafka {
            let role = format!("window `{}`", window.name);
            let section = format!("[[windows]] `{}` kafka.properties", window.name);
            targets.push((role, section, k.target(&source)));
        }
    }
    targets
}

/// Every Kafka client `sluice run` makes for the pipeline, with its whole configuration.
pub fn planned(config: &PipelineConfig) -> Vec<PlannedClient> {
    let group = group(config);
    let source = config.source_client();
    let election = config.active_standby().then(|| PlannedClient {
        role: "election consumer".into(),
        kind: ClientKind::Consumer,
        section: "[source] properties".into(),
        connection: config.source.connection(),
        config: KafkaElection::client_config(&config.source, &group),
    });
    let mut clients = vec![PlannedClient {
        role: "source consumer".into(),
        kind: ClientKind::Consumer,
        section: "[source] properties".into(),
        connection: source.connection(),
        config: KafkaSource::client_config(&source, &group, config.trigger.caps()),
    }];
    clients.extend(election);
    for (what, section, target) in output_targets(config) {
        clients.push(PlannedClient {
            role: format!("{what} producer (topic `{}`)", target.topic),
            kind: ClientKind::Producer,
            section,
            config: producer_config(&target.connection),
            connection: target.connection,
        });
    }
    clients
}

/// Checks the Kafka clients of the pipeline `config` (read from `path`) offline; see the
/// documentation of [`crate::kafka::check`]. What `sluice run --check` calls.
pub fn check_pipeline(config: &PipelineConfig, path: &Path) -> Result<(), ConfigError> {
    check_clients(&planned(config)).map_err(|error| ConfigError::Kafka {
        path: path.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const PIPELINE: &str = r#"
[pipeline]
name = "p"

[source]
bootstrap-servers = "broker:9093"
topics = ["t"]
mode = "group"
properties = { "security.protocol" = "SSL", "ssl.ca.location" = "/ca.pem", "client.id" = "shared" }

[sink]
warehouse = "w"
namespace = "n"
table = "t"
columns = [{ name = "a", type = "string" }]

[dead-letter]
topic = "dlq"
bootstrap-servers = "other:9093"
properties = { "client.id" = "dlq", "compression.type" = "zstd" }

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
"#;

    #[test]
    fn every_client_gets_the_source_properties_and_its_own_win() {
        let config = PipelineConfig::parse(PIPELINE, Path::new("p.toml")).unwrap();
        let clients = planned(&config);
        let roles: Vec<&str> = clients.iter().map(|c| c.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "source consumer",
                "election consumer",
                "dead-letter producer (topic `dlq`)",
                "late-topic producer (topic `late`)",
                "window `w` producer (topic `counts`)",
            ]
        );
        for c in &clients {
            let get = |k: &str| c.config.get(k).map(String::from);
            assert_eq!(
                get("security.protocol").as_deref(),
                Some("SSL"),
                "{}",
                c.role
            );
            assert_eq!(
                get("ssl.ca.location").as_deref(),
                Some("/ca.pem"),
                "{}",
                c.role
            );
        }
        let get = |i: usize, k: &str| clients[i].config.get(k).map(String::from);
        assert_eq!(get(0, "client.id").as_deref(), Some("shared"));
        assert_eq!(get(1, "client.id").as_deref(), Some("shared"));
        assert_eq!(get(1, "group.id").as_deref(), Some("sluice-p-active"));
        assert_eq!(get(2, "client.id").as_deref(), Some("dlq"));
        assert_eq!(get(2, "compression.type").as_deref(), Some("zstd"));
        assert_eq!(get(2, "bootstrap.servers").as_deref(), Some("other:9093"));
        assert_eq!(get(2, "acks").as_deref(), Some("all"), "sluice's default");
        assert_eq!(get(3, "client.id").as_deref(), Some("late"));
        assert_eq!(get(3, "bootstrap.servers").as_deref(), Some("broker:9093"));
        assert_eq!(get(4, "client.id").as_deref(), Some("shared"));
        assert_eq!(
            get(4, "linger.ms").as_deref(),
            Some("50"),
            "over sluice's 5"
        );
        assert_eq!(
            get(0, "partition.assignment.strategy"),
            None,
            "the active process of an event-time pipeline assigns itself every partition"
        );
    }

    #[test]
    fn unused_outputs_make_no_client() {
        let mut config = PipelineConfig::parse(PIPELINE, Path::new("p.toml")).unwrap();
        config.pipeline.on_invalid = OnInvalid::Fail;
        let et = config.event_time.as_mut().unwrap();
        et.late = LateData::Drop;
        et.late_topic = None;
        let roles: Vec<String> = planned(&config).into_iter().map(|c| c.role).collect();
        assert_eq!(
            roles,
            [
                "source consumer",
                "election consumer",
                "window `w` producer (topic `counts`)"
            ]
        );
    }
}
