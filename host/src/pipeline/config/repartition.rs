//! The stages of a pipeline whose state is split by partition (`scale-out = "partitions"`)
//! and one of whose operators is keyed by fields that do not hold `source.keyed-by` (issue
//! 35): its events cross a repartition topic keyed by the operator's first key field (see
//! [`crate::event_time::repartition`]). Every stage is a pipeline of its own, with its own
//! name and consumer group, committing its own marks to the table; [`PipelineConfig::plan`]
//! lists them in the order data flows.
//!
//! - A window grouped otherwise: *stage one* is the pipeline without the window, feeding
//!   its topic; the window's *stage two* (`<pipeline>-<window>`) reads the topic, with no
//!   plugin stages, dedup or joins (stage one ran them) and no table rows.
//! - Dedup keyed otherwise (by `event_id` on a topic keyed by user): dedup comes before the
//!   table, so stage one runs the plugin stages and feeds the dedup's topic, writing no
//!   rows; the dedup's stage (`<pipeline>-dedup`) reads it, deduplicates and writes the
//!   table's rows, then goes on as the first stage of the rest: its windows grouped
//!   otherwise than by the dedup's key cross topics of their own.
//! - A join on another key: its stage (`<pipeline>-<join>`) reads the topic and the join's
//!   right topic, which must be co-partitioned with it (checked as the stage starts).

use super::PipelineConfig;
use crate::event_time::config::ScaleOut;
use crate::event_time::repartition::topic_name;
use crate::kafka::partitioner::Partitioner;
use crate::source::kafka::StartingOffsets;

/// An operator that runs past a repartition topic: the topic and the field that keys it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepartitionTopic {
    /// The operator's name: a window's, or `dedup`.
    pub operator: String,
    /// Its repartition topic.
    pub topic: String,
    /// The field whose value keys the topic: the window's first group-by field, the
    /// dedup's first key.
    pub key: String,
    /// How the key's text places a record: `source.partitioner`, else murmur2 (a join's
    /// right topic must be placed alike).
    pub partitioner: Partitioner,
}

/// One pipeline of a staged run.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Its configuration.
    pub config: PipelineConfig,
    /// With a repartition topic as its source: the topic whose partitions feed that one.
    pub reads: Option<String>,
    /// The repartition topics it feeds.
    pub feeds: Vec<RepartitionTopic>,
    /// Whether it writes the table's rows (the stage holding the dedup, or stage one
    /// without it); the others commit only their marks.
    pub rows: bool,
}

impl PipelineConfig {
    /// The pipeline's consumer group: `[source] group-id`, else `sluice-<name>`.
    pub fn group(&self) -> String {
        let name = &self.pipeline.name;
        let group = self.source.group_id.clone();
        group.unwrap_or_else(|| format!("sluice-{name}"))
    }

    /// The windows and joins that cross a repartition topic: with state by partition,
    /// windows whose group-by does not hold `source.keyed-by` (keyed by their first
    /// group-by field) and joins whose `on` does not (keyed by their first `on` field, as
    /// their right topic must be).
    pub fn repartitioned(&self) -> Vec<RepartitionTopic> {
        let partitions = self
            .event_time
            .as_ref()
            .is_some_and(|et| et.scale_out == ScaleOut::Partitions);
        let (true, Some(key)) = (partitions, &self.source.keyed_by) else {
            return Vec::new();
        };
        let crossing = |operator: &str, keys: &[String]| {
            let first = keys.first().filter(|_| !keys.contains(key))?;
            Some(RepartitionTopic {
                operator: operator.to_string(),
                topic: topic_name(&self.pipeline.name, operator),
                key: first.clone(),
                partitioner: self.placing(),
            })
        };
        let windows = self.windows.iter().map(|w| crossing(&w.name, &w.group_by));
        let joins = self.joins.iter().map(|j| crossing(&j.name, &j.on));
        windows.chain(joins).flatten().collect()
    }

    /// Stage one: this pipeline without the windows and joins that cross a repartition
    /// topic.
    pub fn stage_one(&self) -> PipelineConfig {
        let moved = self.repartitioned();
        let stays = |name: &str| !moved.iter().any(|r| r.operator == name);
        let mut one = self.clone();
        one.windows.retain(|w| stays(&w.name));
        one.joins.retain(|j| stays(&j.name));
        one.reads_joins_right_topics();
        one
    }

    /// Reads the first source topic and the right topics of the joins it has (parsing
    /// listed every join's right topic after the source's).
    fn reads_joins_right_topics(&mut self) {
        let main = self.source.topics.first().cloned().unwrap_or_default();
        let right = self.joins.iter().map(|j| j.right_topic.clone());
        self.source.topics = std::iter::once(main).chain(right).collect();
    }

    /// Stage two of `r`, one of [`PipelineConfig::repartitioned`].
    pub fn stage_two(&self, r: &RepartitionTopic) -> PipelineConfig {
        let mut two = self.reading(r);
        two.dedup = None;
        two.windows.retain(|w| w.name == r.operator);
        two.joins.retain(|j| j.name == r.operator);
        two.reads_joins_right_topics();
        two
    }

    /// With state by partition, a dedup whose keys do not hold `source.keyed-by`: its
    /// topic, keyed by its first key.
    pub fn dedup_repartitioned(&self) -> Option<RepartitionTopic> {
        let partitions = self.event_time.as_ref()?.scale_out == ScaleOut::Partitions;
        let key = self.source.keyed_by.as_ref()?;
        let dedup = self.dedup.as_ref()?;
        let first = dedup.keys.first()?;
        (partitions && !dedup.keys.contains(key)).then(|| RepartitionTopic {
            operator: "dedup".into(),
            topic: topic_name(&self.pipeline.name, "dedup"),
            key: first.clone(),
            partitioner: self.placing(),
        })
    }

    /// The stages of this pipeline, in the order data flows through them: itself alone
    /// when nothing crosses a repartition topic.
    pub fn plan(&self) -> Vec<Stage> {
        let origin = self.source.topics.first().cloned().unwrap_or_default();
        if let Some(dedup) = self.dedup_repartitioned() {
            let mut one = self.clone();
            one.dedup = None;
            one.windows.clear();
            one.joins.clear();
            one.reads_joins_right_topics();
            let mut rest = self.reading(&dedup).plan();
            rest[0].reads = Some(origin);
            let first = Stage {
                config: one,
                reads: None,
                feeds: vec![dedup],
                rows: false,
            };
            return std::iter::once(first).chain(rest).collect();
        }
        let moved = self.repartitioned();
        let twos = moved.iter().map(|r| Stage {
            config: self.stage_two(r),
            reads: Some(origin.clone()),
            feeds: Vec::new(),
            rows: false,
        });
        let one = Stage {
            config: self.stage_one(),
            reads: None,
            feeds: moved.clone(),
            rows: true,
        };
        std::iter::once(one).chain(twos).collect()
    }

    /// How the repartition topics place keys: as the source's producers did when
    /// `source.partitioner` says how, else as Kafka's Java producers do.
    fn placing(&self) -> Partitioner {
        self.source.partitioner.unwrap_or(Partitioner::Murmur2)
    }

    /// This pipeline reading `r`'s topic: named after its operator (`<pipeline>-<operator>`,
    /// and its group), keyed by its key, without what ran before the topic (plugin stages,
    /// their lookups) nor an admin server, its batches starting as records arrive.
    fn reading(&self, r: &RepartitionTopic) -> PipelineConfig {
        let mut two = self.clone();
        two.pipeline.name = format!("{}-{}", self.pipeline.name, r.operator);
        two.source.group_id = Some(format!("{}-{}", self.group(), r.operator));
        two.source.topics = vec![r.topic.clone()];
        two.source.keyed_by = Some(r.key.clone());
        two.source.partitioner = Some(r.partitioner);
        two.source.starting_offsets = StartingOffsets::Earliest;
        two.stages.clear();
        two.lookups.clear();
        two.admin = None;
        two.trigger.follows = true;
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
        let expected = RepartitionTopic {
            operator: "w".into(),
            topic: "p-w-repartition".into(),
            key: "type".into(),
            partitioner: Partitioner::Murmur2,
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
        // Stage two starts a batch as records arrive; stage one keeps the interval.
        assert!(two.trigger.follows && !c.stage_one().trigger.follows);
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

    #[test]
    fn a_dedup_keyed_otherwise_runs_in_a_stage_of_its_own_that_writes_the_rows() {
        let text = MINIMAL.replace(
            "topics = [\"t\"]",
            "topics = [\"t\"]\nmode = \"group\"\nkeyed-by = \"user\"",
        ) + &WINDOWS.replace(
            "late = \"drop\"",
            "late = \"drop\"\nscale-out = \"partitions\"",
        );
        let c = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap();
        let plan = c.plan();
        let names: Vec<&str> = plan
            .iter()
            .map(|s| s.config.pipeline.name.as_str())
            .collect();
        assert_eq!(names, ["p", "p-dedup", "p-dedup-w"]);
        let reads: Vec<Option<&str>> = plan.iter().map(|s| s.reads.as_deref()).collect();
        assert_eq!(reads, [None, Some("t"), Some("p-dedup-repartition")]);
        let rows: Vec<bool> = plan.iter().map(|s| s.rows).collect();
        assert_eq!(
            rows,
            [false, true, false],
            "the dedup's stage writes the rows"
        );
        let fed = |i: usize| {
            plan[i]
                .feeds
                .iter()
                .map(|r| (r.topic.as_str(), r.key.as_str()))
        };
        assert!(fed(0).eq([("p-dedup-repartition", "id")]));
        assert!(fed(1).eq([("p-dedup-w-repartition", "type")]));
        assert!(fed(2).next().is_none());
        let (one, dedup, window) = (&plan[0].config, &plan[1].config, &plan[2].config);
        assert!(one.dedup.is_none() && one.windows.is_empty());
        assert!(dedup.dedup.is_some() && dedup.windows.is_empty());
        assert_eq!(dedup.source.keyed_by.as_deref(), Some("id"));
        assert!(window.dedup.is_none() && window.windows.len() == 1);
        for stage in &plan {
            let config = &stage.config;
            assert_eq!(config.check(), Ok(()), "{}", config.pipeline.name);
            assert!(config.partitioned_state());
        }
        // Keys placed as the source's producers place them, when it says how.
        let crc = text.replace(
            "keyed-by = \"user\"",
            "keyed-by = \"user\"\npartitioner = \"crc32\"",
        );
        let plan = PipelineConfig::parse(&crc, Path::new("p.toml"))
            .unwrap()
            .plan();
        let feeds = plan.iter().flat_map(|s| &s.feeds);
        assert!(feeds.map(|r| r.partitioner).eq([Partitioner::Crc32; 2]));
        let placed = plan.iter().map(|s| s.config.source.partitioner);
        assert!(placed.eq([Some(Partitioner::Crc32); 3]));
        // Stages and topics are named after their operators: one name, one operator.
        let twice = text.replace("name = \"w\"", "name = \"dedup\"");
        let err = PipelineConfig::parse(&twice, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("`dedup` is used twice"), "{err}");
        // Nothing crosses a topic: the pipeline alone.
        let alone = PipelineConfig::parse(
            &text
                .replace("keys = [\"id\"]", "keys = [\"id\", \"user\"]")
                .replace("group-by = [\"type\"]", "group-by = [\"user\"]"),
            Path::new("p.toml"),
        )
        .unwrap();
        let plan = alone.plan();
        assert_eq!(plan.len(), 1);
        assert!(plan[0].rows && plan[0].reads.is_none() && plan[0].feeds.is_empty());
    }
}
