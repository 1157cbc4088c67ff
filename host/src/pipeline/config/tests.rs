//! The pipeline file's cases: what parses, what each check refuses and the key it names.

use super::*;
use std::time::Duration;

pub(super) const MINIMAL: &str = r#"
[pipeline]
name = "p"
on-invalid = "fail"

[source]
bootstrap-servers = "localhost:9092"
topics = ["t"]

[sink]
warehouse = "w"
namespace = "n"
table = "t"
columns = [{ name = "a", type = "string" }]
"#;

#[test]
fn minimal_parses_with_defaults() {
    let c = PipelineConfig::parse(MINIMAL, Path::new("p.toml")).unwrap();
    assert_eq!(c.pipeline.on_invalid, OnInvalid::Fail);
    assert_eq!(c.trigger, TriggerConfig::default());
    assert!(c.stages.is_empty());
}

#[test]
fn unknown_key_names_key_and_line() {
    let text = MINIMAL.replace("topics = [\"t\"]", "topics = [\"t\"]\ntopicz = 1");
    let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
    let shown = err.to_string();
    assert!(shown.starts_with("p.toml:9: `source.topicz`: "), "{shown}");
    assert!(shown.contains("topicz"), "{shown}");
}

#[test]
fn wrong_type_names_the_key() {
    let text = MINIMAL.replace("name = \"p\"", "name = 5");
    let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
    let ConfigError::Invalid { key, line, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!((key.as_str(), *line), ("pipeline.name", 3));
}

#[test]
fn a_bad_snapshot_expiry_names_its_key() {
    let text = format!("{MINIMAL}\n[sink.expire-snapshots]\nretain-last = 0\n");
    let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
    let ConfigError::Invalid { key, message, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(key, "sink.expire-snapshots.retain-last");
    assert!(message.contains("at least 1"), "{err}");
    let text = format!("{MINIMAL}\n[sink.expire-snapshots]\nevery-commits = 2\n");
    let c = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap();
    assert_eq!(c.sink.expire_snapshots.map(|e| e.every_commits), Some(2));
}

#[test]
fn compaction_parses_and_a_bad_setting_is_refused() {
    let text = format!("{MINIMAL}\n[sink.compact]\nevery = \"1m\"\nsort-by = [\"v desc\"]\n");
    let c = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap();
    let compact = c.sink.compact.unwrap();
    assert_eq!(compact.every, std::time::Duration::from_secs(60));
    assert!(compact.enabled);
    let text = format!("{MINIMAL}\n[sink.compact]\nmin-input-files = 1\n");
    let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
    assert!(err.to_string().contains("min-input-files"), "{err}");
}

#[test]
fn group_mode_parses_and_makes_event_time_active_standby() {
    let group = MINIMAL.replace("topics = [\"t\"]", "topics = [\"t\"]\nmode = \"group\"");
    let c = PipelineConfig::parse(&group, Path::new("p.toml")).unwrap();
    assert_eq!(c.source.mode, SourceMode::Group);
    assert!(!c.active_standby());
    let c = PipelineConfig::parse(MINIMAL, Path::new("p.toml")).unwrap();
    assert_eq!(c.source.mode, SourceMode::Assign);
    let windows = format!("{group}{WINDOWS}");
    let c = PipelineConfig::parse(&windows, Path::new("p.toml")).unwrap();
    assert!(c.active_standby());
    let c = PipelineConfig::parse(&format!("{MINIMAL}{WINDOWS}"), Path::new("p.toml")).unwrap();
    assert!(!c.active_standby());
}

#[test]
fn commit_cadence_defaults_and_works_with_event_time() {
    let c = PipelineConfig::parse(MINIMAL, Path::new("p.toml")).unwrap();
    assert_eq!(c.sink.cadence(), None);
    let rows = MINIMAL.replace("table = \"t\"", "table = \"t\"\nmin-commit-rows = 5000");
    let c = PipelineConfig::parse(&rows, Path::new("p.toml")).unwrap();
    assert_eq!(c.sink.cadence(), Some((Duration::from_secs(300), 5000)));
    let every = MINIMAL.replace("table = \"t\"", "table = \"t\"\ncommit-interval = \"30s\"");
    let c = PipelineConfig::parse(&every, Path::new("p.toml")).unwrap();
    assert_eq!(c.sink.cadence(), Some((Duration::from_secs(30), 500_000)));
    let c = PipelineConfig::parse(&format!("{every}{WINDOWS}"), Path::new("p.toml")).unwrap();
    assert_eq!(c.sink.cadence(), Some((Duration::from_secs(30), 500_000)));
    assert!(c.event_time.is_some());
}

#[test]
fn inconsistencies_are_refused() {
    let text = MINIMAL.replace("on-invalid = \"fail\"", "");
    let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
    assert!(err.to_string().contains("[dead-letter]"), "{err}");
    let text = MINIMAL.replace("\"a\", type = \"string\"", "\"a\", type = \"varchar\"");
    let err = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap_err();
    assert!(err.to_string().contains("varchar"), "{err}");
}

const JOINS: &str = r#"
[event-time]
field = "ts"
max-delay = "2m"
late = "drop"

[[joins]]
name = "j"
right-topic = "profiles"
right-time-field = "updated_at"
right-max-delay = "1m"
on = ["user"]
kind = "left-outer"
before = "1h"
left-fields = ["a", "user"]
right-fields = ["tier", { field = "updated_at", name = "profile_time", type = "timestamptz" }]
iceberg = { table = "joined" }
"#;

#[test]
fn joins_parse_read_their_right_topic_and_are_checked() {
    use crate::event_time::join::config::JoinKind;
    let c = PipelineConfig::parse(&format!("{MINIMAL}{JOINS}"), Path::new("p.toml")).unwrap();
    let j = &c.joins[0];
    assert_eq!(
        (j.kind, j.after, j.right_on()),
        (
            JoinKind::LeftOuter,
            Duration::ZERO,
            &["user".to_string()][..]
        )
    );
    assert_eq!(c.source.topics, ["t", "profiles"]);
    let columns = j.columns(&c.sink.columns);
    let names: Vec<(&str, &str)> = columns
        .iter()
        .map(|c| (c.name.as_str(), c.ty.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("a", "string"),
            ("user", "string"),
            ("tier", "string"),
            ("profile_time", "timestamptz"),
            ("batch_id", "long")
        ]
    );
    let refused = |text: String, needle: &str| {
        let err = PipelineConfig::parse(&format!("{MINIMAL}{text}"), Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    };
    refused(
        JOINS.replace("right-topic = \"profiles\"", "right-topic = \"t\""),
        "also in source.topics",
    );
    refused(
        JOINS.replace("name = \"profile_time\"", "name = \"tier\""),
        "two output columns",
    );
    refused(
        JOINS.replace("kind = ", "max-rows = 0\nkind = "),
        "max-rows must be at least 1",
    );
    refused(
        JOINS.replace(
            "[event-time]\nfield = \"ts\"\nmax-delay = \"2m\"\nlate = \"drop\"",
            "",
        ),
        "need an [event-time]",
    );
    refused(
        JOINS.replace("iceberg = { table = \"joined\" }", ""),
        "give an output",
    );
    refused(
        JOINS.replace("table = \"joined\"", "table = \"t\""),
        "another output",
    );
    refused(
        JOINS.replace("kind = \"left-outer\"", "kind = \"full\""),
        "full",
    );
    refused(
        JOINS.replace("before = \"1h\"", "before = \"1h\"\nbefor = 1"),
        "befor",
    );
}

#[test]
fn lookups_parse_and_grants_must_name_one() {
    let stage = "\n[[stages]]\nname = \"enrich\"\nplugin = \"e.wasm\"\n[stages.grants]\nlookups = [\"profiles\"]\n";
    let lookups = "\n[[lookups]]\nname = \"profiles\"\ntopic = \"user-profiles\"\n";
    let c =
        PipelineConfig::parse(&format!("{MINIMAL}{stage}{lookups}"), Path::new("p.toml")).unwrap();
    assert_eq!(c.lookups[0].name, "profiles");
    let err = PipelineConfig::parse(&format!("{MINIMAL}{stage}"), Path::new("p.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("granted but not declared"), "{err}");
    let twice = format!("{MINIMAL}{lookups}{lookups}");
    let err = PipelineConfig::parse(&twice, Path::new("p.toml")).unwrap_err();
    assert!(err.to_string().contains("two lookups"), "{err}");
}

pub(super) const WINDOWS: &str = r#"
[event-time]
field = "ts"
max-delay = "2m"
late = "drop"

[dedup]
keys = ["id"]

[[windows]]
name = "w"
size = "1m"
slide = "30s"
group-by = ["type"]
aggregates = [{ name = "count", fn = "count" }, { name = "users", fn = "distinct-count", field = "user" }]
emit = "update"
kafka = { topic = "out" }
iceberg = { table = "counts", partition-by = ["day(window_start)"] }
"#;

#[test]
fn event_time_sections_parse_and_are_checked() {
    use crate::event_time::config::{EmitMode, Function};
    let c = PipelineConfig::parse(&format!("{MINIMAL}{WINDOWS}"), Path::new("p.toml")).unwrap();
    let et = c.event_time.as_ref().unwrap();
    assert_eq!(et.max_delay, std::time::Duration::from_secs(120));
    assert_eq!(et.idle_timeout, std::time::Duration::from_secs(30));
    let w = &c.windows[0];
    assert_eq!(w.slide, Some(std::time::Duration::from_secs(30)));
    assert_eq!(w.emit, EmitMode::Update);
    assert_eq!(w.aggregates[1].function, Function::DistinctCount);
    let refused = |text: String, needle: &str| {
        let err = PipelineConfig::parse(&format!("{MINIMAL}{text}"), Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    };
    refused(
        WINDOWS.replace(
            "[event-time]\nfield = \"ts\"\nmax-delay = \"2m\"\nlate = \"drop\"",
            "",
        ),
        "need an [event-time]",
    );
    refused(
        WINDOWS.replace("late = \"drop\"", ""),
        "needs a [dead-letter]",
    );
    refused(
        WINDOWS.replace("late = \"drop\"", "late = \"topic\""),
        "late-topic",
    );
    refused(
        WINDOWS.replace(
            "late = \"drop\"",
            "late = \"drop\"\nlate-topic-properties = { \"acks\" = \"1\" }",
        ),
        "late-topic-properties is only used",
    );
    refused(
        WINDOWS.replace("slide = \"30s\"", "slide = \"2m\""),
        "at most size",
    );
    refused(
        WINDOWS.replace("name = \"users\"", "name = \"count\""),
        "two output columns",
    );
    refused(
        WINDOWS.replace("name = \"users\"", "name = \"window_end\""),
        "reserved",
    );
    refused(WINDOWS.replace(", field = \"user\"", ""), "needs a field");
    refused(
        WINDOWS.replace("table = \"counts\"", "table = \"t\""),
        "another output",
    );
    refused(
        WINDOWS.replace("max-delay = \"2m\"", "max-delay = \"soon\""),
        "event-time.max-delay",
    );
    refused(
        WINDOWS.replace("fn = \"count\" }", "fn = \"median\" }"),
        "median",
    );
}

/// Checks that `MINIMAL` followed by `text` is refused with an error saying each of `needles`.
fn refused(text: String, needles: &[&str]) {
    let err = PipelineConfig::parse(&format!("{MINIMAL}{text}"), Path::new("p.toml"))
        .unwrap_err()
        .to_string();
    for needle in needles {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn field_paths_parse_and_bad_ones_are_refused_where_they_are_named() {
    let paths = WINDOWS
        .replace("field = \"ts\"", "field = \"meta.ts\"")
        .replace("keys = [\"id\"]", "keys = [\"meta.id\"]")
        .replace("[\"type\"]", "[\"context.device.os\", \"type\"]")
        .replace("field = \"user\"", "field = \"context.user.id\"");
    let c = PipelineConfig::parse(&format!("{MINIMAL}{paths}"), Path::new("p.toml")).unwrap();
    let columns: Vec<(&str, &str)> = c.windows[0].group_by_columns().collect();
    assert_eq!(columns, [("context.device.os", "os"), ("type", "type")]);
    let not_a_path = |path: &str| format!("`{path}` is not a field path");
    for bad in ["meta..ts", ".ts", "ts."] {
        let text = paths.replace("\"meta.ts\"", &format!("\"{bad}\""));
        refused(text, &["event-time.field", &not_a_path(bad)]);
    }
    refused(
        paths.replace("\"meta.id\"", "\"meta.\""),
        &["dedup.keys", &not_a_path("meta.")],
    );
    refused(
        paths.replace("\"context.device.os\"", "\"context..os\""),
        &["windows `w`", &not_a_path("context..os")],
    );
    refused(
        paths.replace("\"context.user.id\"", "\".user\""),
        &["windows `w`", &not_a_path(".user")],
    );
    // Two group-bys whose paths end alike make the same column: both are named.
    refused(
        paths.replace("\"type\"]", "\"app.os\"]"),
        &[
            "two output columns are named `os`",
            "group-by `context.device.os`",
            "group-by `app.os`",
        ],
    );
    refused(
        paths.replace("\"type\"]", "\"a.count\"]"),
        &[
            "two output columns are named `count`",
            "group-by `a.count`",
            "aggregate `count`",
        ],
    );
    refused(
        paths.replace("\"type\"]", "\"a.window_end\"]"),
        &["`window_end` (group-by `a.window_end`) is a reserved column name"],
    );
}

#[test]
fn join_paths_parse_and_bad_ones_are_refused_where_they_are_named() {
    let paths = JOINS
        .replace(
            "on = [\"user\"]",
            "on = [\"ctx.user\"]\nright-on = [\"profile.uid\"]",
        )
        .replace("\"updated_at\"", "\"meta.updated_at\"")
        .replace("[\"a\", \"user\"]", "[\"a\", \"ctx.user\"]")
        .replace("[\"tier\",", "[\"profile.tier\",");
    let c = PipelineConfig::parse(&format!("{MINIMAL}{paths}"), Path::new("p.toml")).unwrap();
    let j = &c.joins[0];
    assert_eq!(j.right_time_field, "meta.updated_at");
    let names: Vec<String> = j.columns(&[]).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["a", "user", "tier", "profile_time", "batch_id"]);
    for (from, to) in [
        ("\"ctx.user\"]\n", "\"ctx..user\"]\n"),
        ("\"profile.uid\"", "\"profile.\""),
        (
            "right-time-field = \"meta.updated_at\"",
            "right-time-field = \".updated_at\"",
        ),
        ("\"a\", \"ctx.user\"", "\"a\", \"ctx.user.\""),
        ("\"profile.tier\"", "\"profile..tier\""),
        (
            "{ field = \"meta.updated_at\"",
            "{ field = \"meta..updated_at\"",
        ),
    ] {
        let text = paths.replacen(from, to, 1);
        assert_ne!(text, paths, "{from}");
        refused(text, &["joins `j`", "is not a field path"]);
    }
    refused(
        paths.replace("[\"a\", \"ctx.user\"]", "[\"user\", \"ctx.user\"]"),
        &[
            "two output columns are named `user`",
            "from fields `user` and `ctx.user`",
        ],
    );
}

#[test]
fn a_format_needs_its_schemas_and_only_its_own_keys() {
    let with = |source: &str| {
        let text = MINIMAL.replace("topics = [\"t\"]", &format!("topics = [\"t\"]\n{source}"));
        PipelineConfig::parse(&text, Path::new("p.toml")).map_err(|e| e.to_string())
    };
    let registry = "format = \"avro\"\n[source.schema-registry]\nurl = \"http://r:8081\"";
    assert_eq!(
        with(registry).unwrap().source.format,
        crate::format::Format::Avro
    );
    assert!(with("format = \"protobuf\"\nschema-file = \"o.proto\"\nmessage = \"O\"").is_ok());
    for (source, says) in [
        ("format = \"avro\"", "needs [source.schema-registry]"),
        ("schema-file = \"o.avsc\"", "are for `format"),
        (
            "format = \"avro\"\nmessage = \"O\"\nschema-file = \"o.avsc\"",
            "source.message is for",
        ),
        ("format = \"xml\"", "xml"),
    ] {
        let error = with(source).unwrap_err();
        assert!(error.contains(says), "{source}: {error}");
    }
    let both = registry.replace("[source.", "schema-file = \"o.avsc\"\n[source.");
    assert!(with(&both).unwrap_err().contains("not both"));
    let lookup = "[[lookups]]\nname = \"l\"\ntopic = \"lt\"\nformat = \"avro\"";
    let error = with(&format!("\n{lookup}")).unwrap_err();
    assert!(error.contains("lookup `l`"), "{error}");
}

#[test]
fn a_declared_key_parses_and_needs_event_time_and_a_path() {
    use crate::kafka::partitioner::Partitioner;
    let keyed =
        |lines: &str| MINIMAL.replace("topics = [\"t\"]", &format!("topics = [\"t\"]\n{lines}"));
    let text = format!(
        "{}{WINDOWS}",
        keyed("keyed-by = \"user.id\"\npartitioner = \"murmur2\"")
    );
    let c = PipelineConfig::parse(&text, Path::new("p.toml")).unwrap();
    assert_eq!(c.source.keyed_by.as_deref(), Some("user.id"));
    assert_eq!(c.source.partitioner, Some(Partitioner::Murmur2));
    let c = PipelineConfig::parse(&format!("{MINIMAL}{WINDOWS}"), Path::new("p.toml")).unwrap();
    assert_eq!((c.source.keyed_by, c.source.partitioner), (None, None));
    let parse = |text: String| {
        PipelineConfig::parse(&text, Path::new("p.toml"))
            .unwrap_err()
            .to_string()
    };
    let err = parse(keyed("keyed-by = \"user\""));
    assert!(err.contains("no [event-time] section"), "{err}");
    let err = parse(format!("{}{WINDOWS}", keyed("partitioner = \"crc32\"")));
    assert!(err.contains("declare that field too"), "{err}");
    let err = parse(format!("{}{WINDOWS}", keyed("keyed-by = \"a..b\"")));
    assert!(err.contains("source.keyed-by"), "{err}");
    let err = parse(format!(
        "{}{WINDOWS}",
        keyed("keyed-by = \"u\"\npartitioner = \"fnv\"")
    ));
    assert!(err.contains("partitioner"), "{err}");
}

#[test]
fn state_by_partition_needs_a_group_a_keyed_source_and_keys_that_hold_it() {
    let source =
        |lines: &str| MINIMAL.replace("topics = [\"t\"]", &format!("topics = [\"t\"]\n{lines}"));
    let partitions = WINDOWS
        .replace(
            "late = \"drop\"",
            "late = \"drop\"\nscale-out = \"partitions\"",
        )
        .replace("keys = [\"id\"]", "keys = [\"id\", \"user\"]")
        .replace("group-by = [\"type\"]", "group-by = [\"type\", \"user\"]");
    let group = "mode = \"group\"\nkeyed-by = \"user\"";
    let c = PipelineConfig::parse(
        &format!("{}{partitions}", source(group)),
        Path::new("p.toml"),
    )
    .unwrap();
    assert!(c.partitioned_state() && !c.active_standby());
    let c =
        PipelineConfig::parse(&format!("{}{WINDOWS}", source(group)), Path::new("p.toml")).unwrap();
    assert!(
        !c.partitioned_state() && c.active_standby(),
        "standby by default"
    );
    for (lines, text, says) in [
        (
            "keyed-by = \"user\"",
            partitions.clone(),
            "needs source.mode = \"group\"",
        ),
        (
            "mode = \"group\"",
            partitions.clone(),
            "needs source.keyed-by",
        ),
        (
            group,
            partitions.replace("[\"type\", \"user\"]", "[]"),
            "window `w`, grouped by nothing",
        ),
    ] {
        let err = PipelineConfig::parse(&format!("{}{text}", source(lines)), Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{says}: {err}");
    }
}

#[test]
fn state_by_partition_takes_joins_on_the_source_key_and_assigns_by_range() {
    use crate::pipeline::config::ASSIGNMENT_STRATEGY;
    let source = |lines: &str| {
        MINIMAL.replace(
            "topics = [\"t\"]",
            &format!("topics = [\"t\"]\nmode = \"group\"\nkeyed-by = \"user\"\n{lines}"),
        )
    };
    let joins = JOINS.replace(
        "late = \"drop\"",
        "late = \"drop\"\nscale-out = \"partitions\"",
    );
    let c = PipelineConfig::parse(&format!("{}{joins}", source("")), Path::new("p.toml")).unwrap();
    assert!(c.partitioned_state());
    let client = c.source_client();
    assert_eq!(
        client
            .properties
            .get(ASSIGNMENT_STRATEGY)
            .map(String::as_str),
        Some("range"),
        "partition p of both topics to one member"
    );
    let chosen = source("properties = { \"partition.assignment.strategy\" = \"roundrobin\" }");
    let c = PipelineConfig::parse(&format!("{chosen}{joins}"), Path::new("p.toml")).unwrap();
    let client = c.source_client();
    assert_eq!(
        client
            .properties
            .get(ASSIGNMENT_STRATEGY)
            .map(String::as_str),
        Some("roundrobin"),
        "the user's choice stands (and is checked at each assignment)"
    );
    let c = PipelineConfig::parse(&format!("{}{JOINS}", source("")), Path::new("p.toml")).unwrap();
    assert!(
        c.source_client().properties.is_empty(),
        "standby: no strategy"
    );
    // A join on another key crosses a repartition topic keyed by it; past a dedup keyed
    // otherwise, it follows the dedup's stage.
    let off_key = joins.replace("on = [\"user\"]", "on = [\"a\"]");
    let c =
        PipelineConfig::parse(&format!("{}{off_key}", source("")), Path::new("p.toml")).unwrap();
    let names = |c: &PipelineConfig| -> Vec<String> {
        let plan = c.plan().into_iter();
        plan.map(|s| s.config.pipeline.name).collect()
    };
    assert_eq!(names(&c), ["p", "p-j"]);
    assert!(c.plan()[0].config.right_topics().next().is_none());
    assert_eq!(c.plan()[0].config.source.topics, ["t"]);
    assert_eq!(
        c.plan()[1].config.source.topics,
        ["p-j-repartition", "profiles"]
    );
    let past = format!("{}{joins}\n[dedup]\nkeys = [\"a\"]\n", source(""));
    let c = PipelineConfig::parse(&past, Path::new("p.toml")).unwrap();
    assert_eq!(names(&c), ["p", "p-dedup", "p-dedup-j"]);
    let join = &c.plan()[2];
    assert_eq!(join.config.right_topics().collect::<Vec<_>>(), ["profiles"]);
    assert_eq!(join.config.source.keyed_by.as_deref(), Some("user"));
}
