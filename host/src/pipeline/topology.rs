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
    for w in &config.windows {
        if let Some(iceberg) = &w.iceberg {
            outputs.push(Node::new(
                &iceberg.table,
                format!("window table of {}", w.name),
            ));
        }
        if let Some(kafka) = &w.kafka {
            outputs.push(Node::new(
                &kafka.topic,
                format!("window topic of {}", w.name),
            ));
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
