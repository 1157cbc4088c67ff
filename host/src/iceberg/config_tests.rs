//! The sink's configuration: parsing, defaults, and the checks of names and partitions.

use iceberg::spec::PrimitiveType;

use super::super::column_type::parse_type;
use super::*;

fn sink(expire: &str) -> Result<IcebergSinkConfig, toml::de::Error> {
    toml::from_str(&format!(
        "warehouse = \"w\"\nnamespace = \"n\"\ntable = \"t\"\n{expire}"
    ))
}

#[test]
fn a_table_from_a_topics_schema_gains_the_ingestion_time_column_after_every_id() {
    let config = sink("ingestion-time-column = \"seen\"").unwrap();
    let nested = Type::Struct(iceberg::spec::StructType::new(vec![Arc::new(
        NestedField::optional(3, "city", Type::Primitive(PrimitiveType::String)),
    )]));
    let fields = vec![
        Arc::new(NestedField::optional(
            1,
            "id",
            Type::Primitive(PrimitiveType::String),
        )),
        Arc::new(NestedField::optional(2, "ship", nested)),
    ];
    let schema = config.schema_with(fields.clone()).unwrap();
    let seen = schema.field_by_name("seen").unwrap();
    assert_eq!(
        (seen.id, &*seen.field_type),
        (4, &Type::Primitive(PrimitiveType::Timestamptz))
    );
    let already = sink("ingestion-time-column = \"id\"").unwrap();
    assert_eq!(
        already
            .schema_with(fields)
            .unwrap()
            .as_struct()
            .fields()
            .len(),
        2
    );
}

#[test]
fn snapshot_expiry_is_off_by_default_and_parsed_with_defaults() {
    assert_eq!(sink("").unwrap().expire_snapshots, None);
    let on = sink("[expire-snapshots]").unwrap().expire_snapshots;
    assert_eq!(on, Some(ExpireSnapshotsConfig::default()));
    let on = on.unwrap();
    assert_eq!(
        (on.older_than, on.retain_last, on.every_commits),
        (Duration::from_secs(3600), 10, 10)
    );
    let set = "[expire-snapshots]\nolder-than = \"0s\"\nretain-last = 2\nevery-commits = 3";
    let set = sink(set).unwrap().expire_snapshots.unwrap();
    assert_eq!(
        set,
        ExpireSnapshotsConfig {
            older_than: Duration::ZERO,
            retain_last: 2,
            every_commits: 3,
        }
    );
}

#[test]
fn snapshot_expiry_refuses_bad_values() {
    for (text, says) in [
        ("retain-last = 0", "at least 1"),
        ("every-commits = 0", "at least 1"),
        ("retain-last = -1", "u64"),
        ("older-than = \"soon\"", "soon"),
        ("older-than = 5", "string"),
        ("keep = 3", "unknown field"),
    ] {
        let error = sink(&format!("[expire-snapshots]\n{text}")).unwrap_err();
        assert!(error.to_string().contains(says), "{text}: {error}");
    }
}

#[test]
fn types_and_transforms() {
    assert_eq!(
        parse_type("DECIMAL(10, 2)").unwrap(),
        PrimitiveType::Decimal {
            precision: 10,
            scale: 2
        }
    );
    assert_eq!(
        parse_type("timestamptz").unwrap(),
        PrimitiveType::Timestamptz
    );
    assert!(parse_type("decimal(2,3)").is_err());
    assert!(parse_type("varchar").is_err());
    assert_eq!(
        parse_partition("day(event_time)").unwrap(),
        (Transform::Day, "event_time".into())
    );
    assert_eq!(
        parse_partition("bucket[16](user_id)").unwrap(),
        (Transform::Bucket(16), "user_id".into())
    );
    assert!(parse_partition("day event_time").is_err());
    assert!(parse_partition("fortnight(x)").is_err());
    for zero in ["bucket[0](event_id)", "truncate[0](user_id)"] {
        let error = parse_partition(zero).unwrap_err();
        assert!(error.contains("at least 1"), "{zero}: {error}");
    }
    assert_eq!(
        parse_partition("truncate[1](user_id)").unwrap(),
        (Transform::Truncate(1), "user_id".into())
    );
}

#[test]
fn table_names_stay_inside_the_warehouse() {
    for (namespace, table) in [("tutorial", "events"), ("a.b", "t_1"), ("n", "t.x")] {
        assert_eq!(
            table_name_problem(namespace, table),
            None,
            "{namespace}.{table}"
        );
    }
    for (namespace, table, key, says) in [
        ("n", "../../x", "table", "`/`"),
        ("n", "..", "table", "`..`"),
        ("n", ".", "table", "`.`"),
        ("n", "", "table", "empty"),
        ("n", "a\\b", "table", "`\\`"),
        ("n", "/abs", "table", "`/`"),
        ("../..", "t", "namespace", "empty"),
        ("a..b", "t", "namespace", "empty"),
        ("", "t", "namespace", "empty"),
        ("a/b", "t", "namespace", "`/`"),
        ("a.b\u{7}", "t", "namespace", "control"),
    ] {
        let (named, reason) = table_name_problem(namespace, table)
            .unwrap_or_else(|| panic!("{namespace:?} {table:?} passed"));
        assert_eq!(named, key, "{namespace:?} {table:?}");
        assert!(reason.contains(says), "{namespace:?} {table:?}: {reason}");
    }
}
