//! The names a pipeline file gives to things outside it, checked with the rest of the file
//! (so `run --check` refuses what `run` cannot do, exit 78, naming the key): the bootstrap
//! lists, every Kafka topic (Kafka's rules; a source topic listed once), every table (its
//! files must stay inside the warehouse) and every partition transform.

use std::collections::HashSet;

use super::PipelineConfig;
use crate::iceberg::config::{parse_partition, table_name_problem};
use crate::kafka::{bootstrap_problem, topic_name_problem};

/// Checks the names of `config`; the first problem, its key named.
pub(super) fn check(config: &PipelineConfig) -> Result<(), String> {
    bootstraps(config)?;
    topics(config)?;
    tables(config)
}

fn bootstraps(config: &PipelineConfig) -> Result<(), String> {
    let mut lists = vec![("source.bootstrap-servers", &config.source.bootstrap_servers)];
    if let Some(servers) = config
        .dead_letter
        .as_ref()
        .and_then(|d| d.bootstrap_servers.as_ref())
    {
        lists.push(("dead-letter.bootstrap-servers", servers));
    }
    for (key, servers) in lists {
        if let Some(problem) = bootstrap_problem(servers) {
            return Err(format!("{key}: {problem}"));
        }
    }
    Ok(())
}

fn topic(key: &str, name: &str) -> Result<(), String> {
    match topic_name_problem(name) {
        Some(problem) => Err(format!("{key}: {problem}")),
        None => Ok(()),
    }
}

fn topics(config: &PipelineConfig) -> Result<(), String> {
    let mut seen = HashSet::new();
    for (i, name) in config.source.topics.iter().enumerate() {
        let key = format!("source.topics[{i}]");
        topic(&key, name)?;
        if !seen.insert(name) {
            return Err(format!(
                "{key}: topic `{name}` is listed twice in source.topics; list each topic once"
            ));
        }
    }
    if let Some(dl) = &config.dead_letter {
        topic("dead-letter.topic", &dl.topic)?;
    }
    if let Some(late) = config
        .event_time
        .as_ref()
        .and_then(|e| e.late_topic.as_ref())
    {
        topic("event-time.late-topic", late)?;
    }
    for window in &config.windows {
        if let Some(kafka) = &window.kafka {
            topic(
                &format!("windows `{}`: kafka.topic", window.name),
                &kafka.topic,
            )?;
        }
    }
    for join in &config.joins {
        let at = format!("joins `{}`", join.name);
        topic(&format!("{at}: right-topic"), &join.right_topic)?;
        if let Some(kafka) = &join.kafka {
            topic(&format!("{at}: kafka.topic"), &kafka.topic)?;
        }
    }
    for lookup in &config.lookups {
        if let Some(name) = &lookup.topic {
            topic(&format!("lookups `{}`: topic", lookup.name), name)?;
        }
    }
    Ok(())
}

/// A table's namespace and name, and the partition transforms of the table to create.
fn table(at: &str, namespace: &str, name: &str, partition_by: &[String]) -> Result<(), String> {
    if let Some((key, problem)) = table_name_problem(namespace, name) {
        return Err(format!("{at}{key}: {problem}"));
    }
    for (i, text) in partition_by.iter().enumerate() {
        parse_partition(text).map_err(|e| format!("{at}partition-by[{i}]: {e}"))?;
    }
    Ok(())
}

fn tables(config: &PipelineConfig) -> Result<(), String> {
    let sink = &config.sink;
    table("sink.", &sink.namespace, &sink.table, &sink.partition_by)?;
    let derived = config
        .windows
        .iter()
        .map(|w| (format!("windows `{}`: iceberg.", w.name), &w.iceberg))
        .chain(
            config
                .joins
                .iter()
                .map(|j| (format!("joins `{}`: iceberg.", j.name), &j.iceberg)),
        );
    for (at, iceberg) in derived {
        if let Some(t) = iceberg {
            let namespace = t.namespace.as_deref().unwrap_or(&sink.namespace);
            table(&at, namespace, &t.table, &t.partition_by)?;
        }
    }
    for lookup in &config.lookups {
        // `namespace.table`, the last level the table's (see `lookup::iceberg`).
        if let Some((namespace, name)) = lookup.table.as_deref().and_then(|t| t.rsplit_once('.')) {
            table(
                &format!("lookups `{}`: table, ", lookup.name),
                namespace,
                name,
                &[],
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::PipelineConfig;

    const BASE: &str = r#"
[pipeline]
name = "p"

[source]
bootstrap-servers = "localhost:9092"
topics = ["t"]

[sink]
warehouse = "w"
namespace = "n"
table = "t"
columns = [{ name = "a", type = "string" }, { name = "ts", type = "timestamptz" }]
partition-by = ["day(ts)"]

[dead-letter]
topic = "dlq"
"#;

    const DERIVED: &str = r#"
[event-time]
field = "ts"
max-delay = "2m"
late = "drop"

[[windows]]
name = "w"
size = "1m"
aggregates = [{ name = "count", fn = "count" }]
kafka = { topic = "counts" }
iceberg = { table = "counts", partition-by = ["day(window_start)"] }

[[lookups]]
name = "profiles"
topic = "profiles"

[[lookups]]
name = "products"
table = "ref.products"
key-column = "id"
"#;

    /// The error of `text`, which must be refused.
    fn refused(text: &str) -> String {
        match PipelineConfig::parse(text, Path::new("p.toml")) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn the_base_files_pass() {
        PipelineConfig::parse(BASE, Path::new("p.toml")).unwrap();
        PipelineConfig::parse(&format!("{BASE}{DERIVED}"), Path::new("p.toml")).unwrap();
    }

    #[test]
    fn what_run_cannot_do_is_refused_naming_the_key() {
        let full = format!("{BASE}{DERIVED}");
        for (from, to, says) in [
            (
                "[\"day(ts)\"]",
                "[\"day(ts)\", \"bucket[0](a)\"]",
                "sink.partition-by[1]: partition `bucket[0](a)`: the number in brackets must be at least 1",
            ),
            (
                "[\"day(ts)\"]",
                "[\"truncate[0](a)\"]",
                "sink.partition-by[0]",
            ),
            (
                "[\"day(window_start)\"]",
                "[\"bucket[0](window_start)\"]",
                "windows `w`: iceberg.partition-by[0]",
            ),
            (
                "topic = \"dlq\"",
                "topic = \"\"",
                "dead-letter.topic: the topic name is empty",
            ),
            (
                "topic = \"dlq\"",
                "topic = \"..\"",
                "dead-letter.topic: the topic may not be named",
            ),
            (
                "topics = [\"t\"]",
                "topics = [\"t\", \"a b\"]",
                "source.topics[1]: the topic name holds a space",
            ),
            (
                "topics = [\"t\"]",
                "topics = [\"t\", \"u\", \"t\"]",
                "source.topics[2]: topic `t` is listed twice",
            ),
            (
                "topic = \"counts\"",
                "topic = \"c/x\"",
                "windows `w`: kafka.topic",
            ),
            (
                "topic = \"profiles\"",
                "topic = \"\"",
                "lookups `profiles`: topic",
            ),
            (
                "table = \"t\"",
                "table = \"../../x\"",
                "sink.table: the table name may not hold `/`",
            ),
            (
                "table = \"t\"",
                "table = \"..\"",
                "sink.table: the table name may not be `.` or `..`",
            ),
            ("table = \"t\"", "table = \"a\\\\b\"", "sink.table"),
            (
                "namespace = \"n\"",
                "namespace = \"../x\"",
                "sink.namespace: a level of the namespace is empty",
            ),
            ("namespace = \"n\"", "namespace = \"/\"", "sink.namespace"),
            (
                "table = \"counts\"",
                "table = \"..\"",
                "windows `w`: iceberg.table",
            ),
            (
                "ref.products",
                "ref..products",
                "lookups `products`: table, namespace",
            ),
            (
                "bootstrap-servers = \"localhost:9092\"",
                "bootstrap-servers = \"\"",
                "source.bootstrap-servers: no bootstrap server",
            ),
            (
                "bootstrap-servers = \"localhost:9092\"",
                "bootstrap-servers = \" , \"",
                "source.bootstrap-servers",
            ),
            (
                "topic = \"dlq\"",
                "topic = \"dlq\"\nbootstrap-servers = \"\"",
                "dead-letter.bootstrap-servers: no bootstrap server",
            ),
        ] {
            assert!(full.contains(from), "{from}");
            let error = refused(&full.replacen(from, to, 1));
            assert!(error.contains(says), "{to}: {error}");
        }
    }
}
