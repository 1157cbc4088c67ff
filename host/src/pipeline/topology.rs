//! The pipeline's graph for the admin console ([`crate::admin::topology`]), from its
//! configuration.

use super::config::PipelineConfig;
use crate::admin::topology::{Node, Topology};
use crate::units::format_duration;

/// The graph of the pipeline `config` describes.
pub(super) fn topology(config: &PipelineConfig) -> Topology {
    let right: Vec<&str> = config.right_topics().collect();
    let sources = config.source.topics.iter().map(|topic| {
        let detail = if right.contains(&topic.as_str()) {
            "Kafka topic, a join's right side"
        } else {
            "Kafka topic"
        };
        Node::new(topic, detail)
    });
    let stages = config.stages.iter().map(|s| {
        let shadow = s.shadow.as_ref().map_or("", |_| ", with a shadow");
        Node::new(&s.name, format!("plugin {}{shadow}", s.plugin.display()))
    });
    let mut operators = Vec::new();
    if let Some(dedup) = &config.dedup {
        operators.push(Node::new("dedup", format!("by {}", dedup.keys.join(", "))));
    }
    for w in &config.windows {
        let kind = match (w.size, w.slide, w.gap) {
            (_, _, Some(gap)) => format!("session window, gap {}", format_duration(gap)),
            (Some(size), Some(slide), _) => format!(
                "sliding window of {} every {}",
                format_duration(size),
                format_duration(slide)
            ),
            (Some(size), None, _) => format!("tumbling window of {}", format_duration(size)),
            _ => "window".to_string(),
        };
        operators.push(Node::new(
            &w.name,
            format!("{kind} by {}", w.group_by.join(", ")),
        ));
    }
    for j in &config.joins {
        operators.push(Node::new(
            &j.name,
            format!("join with {} on {}", j.right_topic, j.on.join(", ")),
        ));
    }
    let sink = &config.sink;
    let mut outputs = vec![Node::new(
        format!("{}.{}", sink.namespace, sink.table),
        "Iceberg table, the checkpoint",
    )];
    if let Some(dead) = &config.dead_letter {
        outputs.push(Node::new(&dead.topic, "dead-letter topic"));
    }
    let windows = config
        .windows
        .iter()
        .map(|w| ("window", &w.name, &w.iceberg, &w.kafka));
    let joins = config
        .joins
        .iter()
        .map(|j| ("join", &j.name, &j.iceberg, &j.kafka));
    for (kind, name, iceberg, kafka) in windows.chain(joins) {
        if let Some(iceberg) = iceberg {
            outputs.push(Node::new(&iceberg.table, format!("{kind} table of {name}")));
        }
        if let Some(kafka) = kafka {
            outputs.push(Node::new(&kafka.topic, format!("{kind} topic of {name}")));
        }
    }
    let lookups = config.lookups.iter().map(|l| {
        let from = match (&l.topic, &l.table) {
            (Some(topic), _) => format!("from topic {topic}"),
            (None, Some(table)) => format!("from table {table}"),
            (None, None) => String::new(),
        };
        Node::new(&l.name, from)
    });
    Topology {
        sources: sources.collect(),
        stages: stages.collect(),
        operators,
        outputs,
        lookups: lookups.collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn names(nodes: &[Node]) -> Vec<&str> {
        nodes.iter().map(|n| n.name.as_str()).collect()
    }

    /// The analytics example, every kind of node: a join's right topic among the sources,
    /// dedup, windows, a session and a join among the operators, their tables and topics
    /// among the outputs.
    #[test]
    fn the_analytics_example_is_drawn_whole() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/clickstream-analytics/pipeline.toml");
        let config = PipelineConfig::load(&path).unwrap();
        let graph = topology(&config);
        assert_eq!(
            names(&graph.sources),
            ["clickstream-events", "user-profiles"]
        );
        assert_eq!(graph.sources[1].detail, "Kafka topic, a join's right side");
        assert_eq!(names(&graph.stages), ["enrich"]);
        let operators = names(&graph.operators);
        assert_eq!(
            operators[..3],
            ["dedup", "event-type-counts", "user-sessions"]
        );
        assert_eq!(
            graph.operators[1].detail,
            "tumbling window of 1m by event_type"
        );
        assert!(
            graph.operators[2]
                .detail
                .starts_with("session window, gap 30m")
        );
        assert!(
            graph.operators[3]
                .detail
                .starts_with("join with user-profiles")
        );
        let outputs = names(&graph.outputs);
        assert_eq!(
            outputs[..2],
            ["analytics.clickstream_events", "clickstream-dead-letter"]
        );
        for table in [
            "event_type_counts",
            "user_sessions",
            "clickstream-analytics",
        ] {
            assert!(outputs.contains(&table), "{outputs:?}");
        }
        let join_output = graph.outputs.iter().any(|o| o.detail.starts_with("join "));
        assert!(join_output, "{outputs:?}");
    }
}
