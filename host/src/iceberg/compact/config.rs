//! `[sink.compact]`: how small data files are rewritten into files of about a target size.

use std::time::Duration;

use serde::Deserialize;

use crate::units::ByteSize;

/// Compaction of the pipeline's tables (the main table, the window and join tables): the
/// small data files of a partition are rewritten into files of about `target-file-size`,
/// committed as one Iceberg `replace` snapshot, while the pipeline keeps writing. A file is
/// small under three quarters of the target (Spark's `rewrite_data_files` default). With
/// the section, the running pipeline compacts every `every` on a thread of its own;
/// `sluice maintain --compact` uses the same settings, `enabled` or not. A failed
/// compaction is logged and counted, never fails a batch.
///
/// ```toml
/// [sink.compact]
/// every = "10m"
/// target-file-size = "128MiB"
/// min-input-files = 5
/// max-bytes-per-run = "4GiB"
/// sort-by = ["customer_id", "amount desc"]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CompactConfig {
    /// Whether the running pipeline compacts (`false`: only `sluice maintain --compact`,
    /// for instance in one member of a consumer group, or in a job of its own).
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// How long the pipeline waits between two compactions, e.g. `"10m"` (the first runs
    /// this long after the start).
    #[serde(default = "default_every", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub every: Duration,
    /// The size of the rewritten files, e.g. `"128MiB"`. Default: `[sink]
    /// target-file-size`.
    #[serde(default)]
    pub target_file_size: Option<ByteSize>,
    /// A partition with fewer small files than this is left as it is (at least 2).
    #[serde(default = "default_min_input_files")]
    pub min_input_files: usize,
    /// At most this many bytes of small files are rewritten in one run, e.g. `"4GiB"`; the
    /// partitions with the most small files go first, the rest wait for the next run.
    #[serde(default = "default_max_bytes_per_run")]
    pub max_bytes_per_run: ByteSize,
    /// Columns of the main table to sort the rows of each rewritten file by, each
    /// optionally followed by `asc` or `desc` (e.g. `"amount desc"`); nulls first. Default:
    /// none, the rows keep the order of the files they came from. Sorting holds a file's
    /// rows in memory. The window and join tables are compacted unsorted.
    #[serde(default)]
    pub sort_by: Vec<String>,
}

const fn default_enabled() -> bool {
    true
}

const fn default_every() -> Duration {
    Duration::from_secs(600)
}

const fn default_min_input_files() -> usize {
    5
}

const fn default_max_bytes_per_run() -> ByteSize {
    ByteSize(4 << 30)
}

impl Default for CompactConfig {
    fn default() -> Self {
        CompactConfig {
            enabled: default_enabled(),
            every: default_every(),
            target_file_size: None,
            min_input_files: default_min_input_files(),
            max_bytes_per_run: default_max_bytes_per_run(),
            sort_by: Vec::new(),
        }
    }
}

/// A column to sort by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// The column's name.
    pub column: String,
    /// Largest first.
    pub descending: bool,
}

impl CompactConfig {
    /// Checks the settings that serde cannot: returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.min_input_files < 2 {
            return Err("sink.compact.min-input-files: must be at least 2".into());
        }
        if self.every.is_zero() {
            return Err("sink.compact.every: must be more than 0s".into());
        }
        if self.target_file_size.is_some_and(|s| s.0 < 1024) {
            return Err("sink.compact.target-file-size: must be at least 1KiB".into());
        }
        self.sort_keys().map(|_| ())
    }

    /// `sort-by`, parsed.
    pub fn sort_keys(&self) -> Result<Vec<SortKey>, String> {
        self.sort_by
            .iter()
            .map(|entry| {
                let words: Vec<&str> = entry.split_whitespace().collect();
                let descending = match words.as_slice() {
                    [_] => false,
                    [_, order] if order.eq_ignore_ascii_case("asc") => false,
                    [_, order] if order.eq_ignore_ascii_case("desc") => true,
                    _ => {
                        return Err(format!(
                            "sink.compact.sort-by: {entry:?} is not a column optionally followed by asc or desc"
                        ));
                    }
                };
                Ok(SortKey {
                    column: words[0].to_string(),
                    descending,
                })
            })
            .collect()
    }

    /// The target size of rewritten files, given the table's `[sink] target-file-size`.
    pub fn target(&self, sink_target: ByteSize) -> u64 {
        self.target_file_size.unwrap_or(sink_target).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CompactConfig, String> {
        let config: CompactConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        config.check().map(|()| config)
    }

    #[test]
    fn the_defaults_and_the_documented_example_parse() {
        assert_eq!(parse("").unwrap(), CompactConfig::default());
        let config = parse(
            r#"every = "1m"
target-file-size = "64MiB"
min-input-files = 3
max-bytes-per-run = "1GiB"
sort-by = ["customer_id", "amount DESC"]"#,
        )
        .unwrap();
        assert_eq!(config.every, Duration::from_secs(60));
        assert_eq!(config.target(ByteSize::mib(128)), 64 << 20);
        assert_eq!(
            config.sort_keys().unwrap(),
            vec![
                SortKey {
                    column: "customer_id".into(),
                    descending: false
                },
                SortKey {
                    column: "amount".into(),
                    descending: true
                }
            ]
        );
    }

    #[test]
    fn wrong_settings_are_refused_with_the_key() {
        for (text, says) in [
            ("min-input-files = 1", "min-input-files"),
            ("every = \"0s\"", "every"),
            ("sort-by = [\"a sideways\"]", "sort-by"),
            ("target-file-size = \"10B\"", "target-file-size"),
            ("target = 3", "unknown field"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
