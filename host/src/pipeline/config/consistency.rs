//! The checks across sections of a pipeline file, run after it parses: names unique,
//! outputs apart from inputs, event-time sections complete, joins' topics and tables their
//! own. Each failure is one message naming the key.

use std::collections::HashSet;

use super::{OnInvalid, PipelineConfig, names};
use crate::event_time::config::{EventTimeConfig, LateData, ScaleOut};
use crate::event_time::extract::check_path;
use crate::source::kafka::SourceMode;

impl PipelineConfig {
    pub(super) fn check(&self) -> Result<(), String> {
        if self.pipeline.name.trim().is_empty() {
            return Err("pipeline.name must not be empty".into());
        }
        if self.source.topics.is_empty() {
            return Err("source.topics must name at least one topic".into());
        }
        names::check(self)?;
        let mut names = HashSet::new();
        for stage in &self.stages {
            if !names.insert(&stage.name) {
                return Err(format!("two stages are named `{}`", stage.name));
            }
        }
        if self.pipeline.on_invalid == OnInvalid::DeadLetter && self.dead_letter.is_none() {
            return Err(
                "no [dead-letter] topic: add one, or set pipeline.on-invalid = \"fail\"".into(),
            );
        }
        if let Some(dl) = &self.dead_letter
            && self.source.topics.contains(&dl.topic)
        {
            return Err(format!(
                "dead-letter topic `{}` is also a source topic",
                dl.topic
            ));
        }
        self.check_event_time()?;
        self.check_formats()?;
        if let Some(compact) = &self.sink.compact {
            compact.check()?;
        }
        crate::lookup::config::check(&self.lookups, &self.source.topics)?;
        let declared = self.lookups.iter().map(|l| l.name.as_str()).collect();
        crate::plugin::lookup::check(&self.stages, &declared).map_err(|e| e.to_string())?;
        if self.sink.columns.is_empty() {
            return Ok(()); // the table must exist already
        }
        let schema = self.sink.schema()?;
        self.sink.partition_spec(&schema)?;
        if let Some(column) = &self.sink.ingestion_time_column
            && !self.sink.columns.iter().any(|c| &c.name == column)
        {
            return Err(format!(
                "sink.ingestion-time-column `{column}` is not one of sink.columns"
            ));
        }
        Ok(())
    }

    /// The source's format has what it needs (a registry or a schema file, not both), and
    /// so do the lookups' and the joins' topics.
    fn check_formats(&self) -> Result<(), String> {
        use crate::format::Format;
        let source = &self.source;
        let schemas = (
            source.schema_registry.is_some(),
            source.schema_file.is_some(),
        );
        match (source.format, schemas) {
            (Format::Json, (false, false)) if source.message.is_none() => {}
            (Format::Json, _) => {
                return Err("source.schema-registry, source.schema-file and source.message are for `format = \"avro\"` or `\"protobuf\"`".into());
            }
            (format, (false, false)) => {
                return Err(format!(
                    "source.format = \"{}\" needs [source.schema-registry] or source.schema-file",
                    format.name()
                ));
            }
            (_, (true, true)) => {
                return Err("give [source.schema-registry] or source.schema-file, not both".into());
            }
            (Format::Avro, _) if source.message.is_some() => {
                return Err("source.message is for `format = \"protobuf\"`".into());
            }
            _ => {}
        }
        if source.schema_file.is_some() && !self.joins.is_empty() {
            return Err(
                "a join's right topic is read in the source's format with its registry: `[source] schema-file` holds one schema, for the source's topics only; use `[source.schema-registry]`"
                    .into(),
            );
        }
        for lookup in &self.lookups {
            if lookup.format != Format::Json && source.schema_registry.is_none() {
                return Err(format!(
                    "lookup `{}`: format = \"{}\" is read with [source.schema-registry], and there is none",
                    lookup.name,
                    lookup.format.name()
                ));
            }
        }
        Ok(())
    }

    fn check_event_time(&self) -> Result<(), String> {
        self.check_keyed_by()?;
        let Some(et) = &self.event_time else {
            if self.dedup.is_some() || !self.windows.is_empty() || !self.joins.is_empty() {
                return Err(
                    "[dedup], [[windows]] and [[joins]] need an [event-time] section (its watermark bounds their state)"
                        .into(),
                );
            }
            return Ok(());
        };
        if et.field.trim().is_empty() {
            return Err("event-time.field must not be empty".into());
        }
        check_path(&et.field).map_err(|e| format!("event-time.field: {e}"))?;
        self.check_late(et)?;
        self.check_scale_out(et)?;
        if let Some(dedup) = &self.dedup
            && dedup.keys.is_empty()
        {
            return Err("dedup.keys must name at least one field".into());
        }
        for key in self.dedup.iter().flat_map(|d| &d.keys) {
            check_path(key).map_err(|e| format!("dedup.keys: {e}"))?;
        }
        let mut tables = HashSet::from([(self.sink.namespace.clone(), self.sink.table.clone())]);
        self.check_windows(&mut tables)?;
        self.check_joins(&mut tables)
    }

    /// The source's declared key: a field path, for the keyed state of event time.
    fn check_keyed_by(&self) -> Result<(), String> {
        let source = &self.source;
        match &source.keyed_by {
            None if source.partitioner.is_some() => {
                Err("source.partitioner names how records were placed by source.keyed-by: declare that field too".into())
            }
            None => Ok(()),
            Some(_) if self.event_time.is_none() => Err(
                "source.keyed-by declares the key of event-time state: this pipeline has no [event-time] section".into(),
            ),
            Some(field) => check_path(field).map_err(|e| format!("source.keyed-by: {e}")),
        }
    }

    /// `scale-out = "partitions"`: a group, one source topic keyed by a field (the state of
    /// operators keyed by it is then each partition's own; the others cross repartition
    /// topics), no window grouped by nothing.
    fn check_scale_out(&self, et: &EventTimeConfig) -> Result<(), String> {
        if et.scale_out == ScaleOut::Standby {
            return Ok(());
        }
        let need = |what: String| Err(format!("event-time.scale-out = \"partitions\" {what}"));
        if self.source.mode != SourceMode::Group {
            return need("needs source.mode = \"group\"".into());
        }
        if self.source.keyed_by.is_none() {
            return need("needs source.keyed-by: the field the source topic is keyed by, which splits the state of operators keyed by it (the others cross repartition topics)".into());
        }
        if self.source.topics.len() != 1 {
            return need("reads one source topic (the group does not give one member the same partition of several topics)".into());
        }
        // An operator keyed otherwise crosses a repartition topic named after it (see
        // `repartition`): no two may share a name.
        let mut names: Vec<&str> = self.windows.iter().map(|w| w.name.as_str()).collect();
        names.extend(self.joins.iter().map(|j| j.name.as_str()));
        if self.dedup_repartitioned().is_some() {
            names.push("dedup");
        }
        names.sort_unstable();
        if let Some(twice) = names.windows(2).find(|n| n[0] == n[1]) {
            return need(format!(
                "names each window, join and a dedup crossing a repartition topic (`dedup`) once: `{}` is used twice (their topics and stages are named after them)",
                twice[0]
            ));
        }
        // A window grouped by nothing has one group, which no split can share.
        if let Some(w) = self.windows.iter().find(|w| w.group_by.is_empty()) {
            return need(format!(
                "cannot run window `{}`, grouped by nothing: its one group cannot be split by partition",
                w.name
            ));
        }
        Ok(())
    }

    /// Where late events go: the keys of `late` are consistent with it.
    fn check_late(&self, et: &EventTimeConfig) -> Result<(), String> {
        match (et.late, &et.late_topic) {
            (LateData::Topic, None) => {
                return Err("event-time.late = \"topic\" needs event-time.late-topic".into());
            }
            (LateData::Topic, Some(topic)) if self.source.topics.contains(topic) => {
                return Err(format!("late topic `{topic}` is also a source topic"));
            }
            (LateData::DeadLetter, _) if self.dead_letter.is_none() => {
                return Err(
                    "event-time.late = \"dead-letter\" needs a [dead-letter] topic; or set late = \"topic\" or \"drop\""
                        .into(),
                );
            }
            (LateData::DeadLetter | LateData::Drop, Some(_)) => {
                return Err("event-time.late-topic is only used with late = \"topic\"".into());
            }
            (LateData::DeadLetter | LateData::Drop, _) if !et.late_topic_properties.is_empty() => {
                return Err(
                    "event-time.late-topic-properties is only used with late = \"topic\"".into(),
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// The windows: each valid, named once, writing to a topic that is not read and a table
    /// no other output writes (`tables`, the outputs' so far).
    fn check_windows(&self, tables: &mut HashSet<(String, String)>) -> Result<(), String> {
        let mut names = HashSet::new();
        for window in &self.windows {
            window.check()?;
            if !names.insert(&window.name) {
                return Err(format!("two windows are named `{}`", window.name));
            }
            if let Some(kafka) = &window.kafka
                && self.source.topics.contains(&kafka.topic)
            {
                return Err(format!(
                    "windows `{}`: topic `{}` is also a source topic",
                    window.name, kafka.topic
                ));
            }
            if let Some(table) = &window.iceberg {
                let namespace = table
                    .namespace
                    .clone()
                    .unwrap_or(self.sink.namespace.clone());
                if !tables.insert((namespace, table.table.clone())) {
                    return Err(format!(
                        "windows `{}`: table `{}` is written by another output",
                        window.name, table.table
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_joins(&self, tables: &mut HashSet<(String, String)>) -> Result<(), String> {
        let mut names = HashSet::new();
        let mut right_topics = HashSet::new();
        for join in &self.joins {
            join.check()?;
            let at = format!("joins `{}`", join.name);
            if !names.insert(&join.name) {
                return Err(format!("two joins are named `{}`", join.name));
            }
            if self.source.topics.contains(&join.right_topic) {
                return Err(format!(
                    "{at}: right-topic `{}` is also in source.topics; a join's right topic is read for the join alone (it is added to the topics read), do not list it",
                    join.right_topic
                ));
            }
            if !right_topics.insert(&join.right_topic) {
                return Err(format!(
                    "{at}: right-topic `{}` is the right topic of another join",
                    join.right_topic
                ));
            }
            let outputs = [
                self.dead_letter.as_ref().map(|d| &d.topic),
                self.event_time.as_ref().and_then(|e| e.late_topic.as_ref()),
            ];
            if outputs
                .into_iter()
                .flatten()
                .any(|t| t == &join.right_topic)
            {
                return Err(format!(
                    "{at}: right-topic `{}` is an output topic of the pipeline",
                    join.right_topic
                ));
            }
            if let Some(kafka) = &join.kafka
                && (self.source.topics.contains(&kafka.topic)
                    || self.right_topics().any(|t| t == kafka.topic))
            {
                return Err(format!(
                    "{at}: topic `{}` is also a source topic",
                    kafka.topic
                ));
            }
            if let Some(table) = &join.iceberg {
                let namespace = table
                    .namespace
                    .clone()
                    .unwrap_or(self.sink.namespace.clone());
                if !tables.insert((namespace, table.table.clone())) {
                    return Err(format!(
                        "{at}: table `{}` is written by another output",
                        table.table
                    ));
                }
            }
        }
        Ok(())
    }
}
