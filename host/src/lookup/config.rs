//! The `[[lookups]]` sections: where each lookup table's data comes from.
//!
//! ```toml
//! [[lookups]]
//! name = "profiles"
//! topic = "user-profiles"        # a compacted topic: key → latest value; a null value deletes
//!
//! [[lookups]]
//! name = "products"
//! table = "tutorial.products"    # an Iceberg table in the sink's catalog...
//! key-column = "product_id"      # ...keyed by this column; each row becomes a JSON object
//! max-bytes = "64MiB"
//! refresh-interval = "30s"
//! ```

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

use crate::units::ByteSize;

/// One `[[lookups]]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LookupConfig {
    /// The name plugins look the table up by (and their grants name).
    pub name: String,
    /// A compacted Kafka topic on the source's cluster (its connection settings): each
    /// record's key maps to its value, a JSON object; a null value deletes the key.
    #[serde(default)]
    pub topic: Option<String>,
    /// With `topic`: how its values are encoded, `json` (default), `avro` or `protobuf`
    /// (in the Confluent wire format, their schemas in `[source.schema-registry]`). Plugins
    /// read each value as JSON, as they read events.
    #[serde(default)]
    pub format: crate::format::Format,
    /// An Iceberg table in the sink's catalog, `namespace.table`; each row becomes a JSON
    /// object keyed by `key-column`.
    #[serde(default)]
    pub table: Option<String>,
    /// With `table`: the column whose value (as text) is each row's key.
    #[serde(default)]
    pub key_column: Option<String>,
    /// The most bytes of keys and values the table may hold; a refresh past it fails with
    /// an error naming the table. Default `"256MiB"`.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: ByteSize,
    /// How long a table is kept before it is brought to its source's newest version, at
    /// the next batch boundary. Default `"0s"`: at every batch boundary.
    #[serde(default, with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub refresh_interval: Duration,
}

const fn default_max_bytes() -> ByteSize {
    ByteSize::mib(256)
}

/// Where a lookup table's data comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind<'a> {
    /// A compacted topic.
    Topic(&'a str),
    /// An Iceberg table (`namespace.table`) and its key column.
    Table(&'a str, &'a str),
}

impl LookupConfig {
    /// Where the table's data comes from (after [`check`]).
    pub fn source(&self) -> Result<SourceKind<'_>, String> {
        let name = &self.name;
        match (&self.topic, &self.table, &self.key_column) {
            (Some(topic), None, None) => Ok(SourceKind::Topic(topic)),
            (Some(_), None, Some(_)) => Err(format!(
                "lookups `{name}`: key-column is only used with table (a topic's key is the record key)"
            )),
            (None, Some(table), Some(key)) if table.contains('.') => {
                Ok(SourceKind::Table(table, key))
            }
            (None, Some(table), Some(_)) => Err(format!(
                "lookups `{name}`: table `{table}` must be `namespace.table`"
            )),
            (None, Some(_), None) => Err(format!(
                "lookups `{name}`: table needs key-column (the column that keys each row)"
            )),
            (Some(_), Some(_), _) => Err(format!(
                "lookups `{name}`: set one of topic and table, not both"
            )),
            (None, None, _) => Err(format!("lookups `{name}`: set topic or table")),
        }
    }
}

/// Checks the `[[lookups]]` sections: names non-empty and unique, one source each, no
/// source topic used as a lookup.
pub fn check(lookups: &[LookupConfig], source_topics: &[String]) -> Result<(), String> {
    let mut names = HashSet::new();
    for lookup in lookups {
        if lookup.name.trim().is_empty() {
            return Err("lookups.name must not be empty".into());
        }
        if !names.insert(&lookup.name) {
            return Err(format!("two lookups are named `{}`", lookup.name));
        }
        if let SourceKind::Topic(topic) = lookup.source()?
            && source_topics.iter().any(|t| t == topic)
        {
            return Err(format!(
                "lookups `{}`: topic `{topic}` is also a source topic",
                lookup.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        lookups: Vec<LookupConfig>,
    }

    fn parse(text: &str) -> Result<Vec<LookupConfig>, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        check(&file.lookups, &["clicks".into()])?;
        Ok(file.lookups)
    }

    const BOTH: &str = r#"
[[lookups]]
name = "profiles"
topic = "user-profiles"

[[lookups]]
name = "products"
table = "tutorial.products"
key-column = "product_id"
max-bytes = "1MiB"
refresh-interval = "30s"
"#;

    #[test]
    fn a_topic_and_a_table_parse_with_defaults() {
        let lookups = parse(BOTH).unwrap();
        assert_eq!(lookups[0].source(), Ok(SourceKind::Topic("user-profiles")));
        assert_eq!(lookups[0].max_bytes, ByteSize::mib(256));
        assert_eq!(lookups[0].refresh_interval, Duration::ZERO);
        assert_eq!(
            lookups[1].source(),
            Ok(SourceKind::Table("tutorial.products", "product_id"))
        );
        assert_eq!(lookups[1].max_bytes, ByteSize::mib(1));
        assert_eq!(lookups[1].refresh_interval, Duration::from_secs(30));
    }

    #[test]
    fn mistakes_are_refused_with_the_lookup_named() {
        let refused = |text: String, needle: &str| {
            let err = parse(&text).unwrap_err();
            assert!(err.contains(needle), "{err}");
        };
        refused(BOTH.replace("\"products\"", "\"profiles\""), "two lookups");
        refused(
            BOTH.replace("topic = \"user-profiles\"", ""),
            "`profiles`: set topic or table",
        );
        refused(
            BOTH.replace(
                "topic = \"user-profiles\"",
                "topic = \"a\"\ntable = \"n.t\"",
            ),
            "not both",
        );
        refused(
            BOTH.replace("key-column = \"product_id\"", ""),
            "needs key-column",
        );
        refused(
            BOTH.replace("tutorial.products", "products"),
            "namespace.table",
        );
        refused(
            BOTH.replace("user-profiles", "clicks"),
            "also a source topic",
        );
        refused(BOTH.replace("max-bytes", "max-byte"), "max-byte");
        refused(BOTH.replace("\"30s\"", "\"soon\""), "refresh-interval");
    }
}
