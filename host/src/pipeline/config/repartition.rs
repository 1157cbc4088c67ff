//! The stages of a pipeline whose state is split by partition (`scale-out = "partitions"`)
//! and one of whose windows is grouped by fields that do not hold `source.keyed-by`
//! (issue 35): its events cross a repartition topic keyed by the window's first group-by
//! field (see [`crate::event_time::repartition`]). *Stage one* is the pipeline without
//! those windows, feeding their topics; each window's *stage two* is a pipeline of its own
//! over its topic: its own name (`<pipeline>-<window>`) and consumer group, no plugin
//! stages, dedup or joins (stage one ran them), the window alone; both commit to the
//! table, each its own marks.

use super::PipelineConfig;
use crate::event_time::config::{ScaleOut, WindowConfig};
use crate::event_time::repartition::topic_name;
use crate::kafka::partitioner::Partitioner;
use crate::source::kafka::StartingOffsets;

/// A window that runs as stage two: its repartition topic and the field that keys it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepartitionedWindow {
    /// The window's name.
    pub window: String,
    /// Its repartition topic.
    pub topic: String,
    /// The field whose value keys the topic: the window's first group-by field.
    pub key: String,
}

impl PipelineConfig {
    /// The pipeline's consumer group: `[source] group-id`, else `sluice-<name>`.
    pub fn group(&self) -> String {
        let name = &self.pipeline.name;
        let group = self.source.group_id.clone();
        group.unwrap_or_else(|| format!("sluice-{name}"))
    }

    /// The windows that cross a repartition topic: with state by partition, those whose
    /// group-by does not hold `source.keyed-by`.
    pub fn repartitioned(&self) -> Vec<RepartitionedWindow> {
        let partitions = self
            .event_time
            .as_ref()
            .is_some_and(|et| et.scale_out == ScaleOut::Partitions);
        let (true, Some(key)) = (partitions, &self.source.keyed_by) else {
            return Vec::new();
        };
        let elsewhere = |w: &&WindowConfig| !w.group_by.contains(key) && !w.group_by.is_empty();
        self.windows
            .iter()
            .filter(elsewhere)
            .map(|w| RepartitionedWindow {
                window: w.name.clone(),
                topic: topic_name(&self.pipeline.name, &w.name),
                key: w.group_by[0].clone(),
            })
            .collect()
    }

    /// Stage one: this pipeline without the windows that cross a repartition topic.
    pub fn stage_one(&self) -> PipelineConfig {
        let moved = self.repartitioned();
        let mut one = self.clone();
        one.windows
            .retain(|w| !moved.iter().any(|r| r.window == w.name));
        one
    }

    /// Stage two of `r`, one of [`PipelineConfig::repartitioned`].
    pub fn stage_two(&self, r: &RepartitionedWindow) -> PipelineConfig {
        let mut two = self.clone();
        two.pipeline.name = format!("{}-{}", self.pipeline.name, r.window);
        two.source.group_id = Some(format!("{}-{}", self.group(), r.window));
        two.source.topics = vec![r.topic.clone()];
        two.source.keyed_by = Some(r.key.clone());
        two.source.partitioner = Some(Partitioner::Murmur2);
        two.source.starting_offsets = StartingOffsets::Earliest;
        two.stages.clear();
        two.lookups.clear();
        two.dedup = None;
        two.joins.clear();
        two.windows.retain(|w| w.name == r.window);
        two.admin = None;
        two
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::{MINIMAL, WINDOWS};
    use super::*;

    #[test]
    fn a_window_grouped_otherwise_runs_as_stage_two_of_a_repartition_topic() {
        let text = MINIMAL.replace(
            "topics = [\"t\"]",
            "topics = [\"t\"]\nmode = \"group\"\nkeyed-by = \"user\"",
        ) + &WINDOWS
            .replace(
                "late = \"drop\"",
                "late = \"drop\"\nscale-out = \"partitions\"",
            )
            .replace("keys = [\"id\"]", "keys = [\"id\", \"user\"]");
        let c = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap();
        let moved = c.repartitioned();
        let expected = RepartitionedWindow {
            window: "w".into(),
            topic: "p-w-repartition".into(),
            key: "type".into(),
        };
        assert_eq!(moved, std::slice::from_ref(&expected));
        assert!(c.stage_one().windows.is_empty());
        assert!(c.stage_one().dedup.is_some());
        let two = c.stage_two(&expected);
        assert_eq!(two.pipeline.name, "p-w");
        assert_eq!(two.group(), "sluice-p-w");
        assert_eq!(two.source.topics, ["p-w-repartition"]);
        assert_eq!(two.source.keyed_by.as_deref(), Some("type"));
        assert!(two.dedup.is_none() && two.stages.is_empty());
        assert_eq!(two.windows.len(), 1);
        // Both stages are pipelines of their own, checked as such.
        for stage in [c.stage_one(), two] {
            assert_eq!(stage.check(), Ok(()), "{}", stage.pipeline.name);
            assert!(stage.partitioned_state());
        }
        // Grouped by the key, a window stays where it is.
        let kept = PipelineConfig::parse(
            &text.replace("group-by = [\"type\"]", "group-by = [\"type\", \"user\"]"),
            Path::new("p.toml"),
        )
        .unwrap();
        assert!(kept.repartitioned().is_empty());
        assert_eq!(kept.stage_one().windows.len(), 1);
    }
}
