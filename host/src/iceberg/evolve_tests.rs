use std::collections::HashMap;
use std::path::PathBuf;

use super::*;
use crate::checkpoint::CommitMark;
use crate::iceberg::{Fence, IcebergCatalog, IcebergError, IcebergSinkConfig, IcebergTable};
use crate::record::Offsets;

fn open(name: &str) -> (PathBuf, IcebergTable) {
    let dir = std::env::temp_dir().join(format!("sluice-evolve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config: IcebergSinkConfig = toml::from_str(&format!(
        "warehouse = {:?}\nnamespace = \"n\"\ntable = \"t\"\npartition-by = [\"bucket[4](id)\"]\n\
         columns = [{{ name = \"id\", type = \"string\" }}, {{ name = \"qty\", type = \"int\" }}, \
         {{ name = \"ctx\", type = \"struct<os: string>\" }}]",
        dir.display()
    ))
    .unwrap();
    let catalog = IcebergCatalog::open(&config, &dir).unwrap();
    let table = IcebergTable::open(&catalog, config).unwrap();
    (dir, table)
}

fn string() -> Type {
    Type::Primitive(PrimitiveType::String)
}

fn ids(schema: &Schema) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    fn walk(fields: &[NestedFieldRef], prefix: &str, out: &mut Vec<(i32, String)>) {
        for f in fields {
            let name = format!("{prefix}{}", f.name);
            out.push((f.id, format!("{name}:{}", f.field_type)));
            match &*f.field_type {
                Type::Struct(s) => walk(s.fields(), &format!("{name}."), out),
                Type::List(l) => walk(
                    std::slice::from_ref(&l.element_field),
                    &format!("{name}."),
                    out,
                ),
                _ => {}
            }
        }
    }
    walk(schema.as_struct().fields(), "", &mut out);
    out
}

#[test]
fn a_plan_adds_columns_in_name_order_with_fresh_ids_and_widens_what_iceberg_allows() {
    let (dir, table) = open("plan");
    let metadata = table.table().metadata();
    assert_eq!(metadata.last_column_id(), 4);
    let list = Type::List(ListType::new(Arc::new(NestedField::list_element(
        0,
        string(),
        false,
    ))));
    let added = BTreeMap::from([
        ("tier".to_string(), string()),
        ("tags".to_string(), list),
        ("".to_string(), string()),
        ("a.b".to_string(), string()),
        ("id_bucket".to_string(), string()),
        ("ID".to_string(), string()),
    ]);
    let promoted = BTreeMap::from([
        ("qty".to_string(), PrimitiveType::Long),
        ("id".to_string(), PrimitiveType::Long),
    ]);
    let planned = plan(metadata, None, &wanted(&added, &promoted), 100);
    let evolution = planned.evolution.expect("a change");
    assert_eq!(evolution.base_schema_id, metadata.current_schema_id());
    assert_eq!(evolution.added, ["tags", "tier"]);
    assert_eq!(
        evolution.promoted,
        ["qty"],
        "a string does not widen to a long"
    );
    assert_eq!(
        ids(&evolution.schema),
        [
            (1, "id:string".to_string()),
            (2, "qty:long".to_string()),
            (3, "ctx:struct<string>".to_string()),
            (4, "ctx.os:string".to_string()),
            (5, "tags:list".to_string()),
            (6, "tags.element:string".to_string()),
            (7, "tier:string".to_string()),
        ]
    );
    let refused: Vec<(&str, &str)> = planned
        .refused
        .iter()
        .map(|(n, (code, _))| (n.as_str(), *code))
        .collect();
    assert_eq!(
        refused,
        [
            ("", "invalid_column_name"),
            ("ID", "invalid_column_name"),
            ("a.b", "invalid_column_name"),
            ("id_bucket", "invalid_column_name"),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn columns_past_the_cap_are_refused_and_nothing_else_changes() {
    let (dir, table) = open("cap");
    let metadata = table.table().metadata();
    let added = BTreeMap::from([("a".to_string(), string()), ("b".to_string(), string())]);
    // 4 fields now (ctx.os counts): room for one more.
    let planned = plan(metadata, None, &wanted(&added, &BTreeMap::new()), 5);
    assert_eq!(planned.evolution.unwrap().added, ["a"]);
    assert_eq!(planned.refused["b"].0, "too_many_columns");
    let planned = plan(metadata, None, &wanted(&added, &BTreeMap::new()), 4);
    assert!(planned.evolution.is_none());
    assert_eq!(planned.refused.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_struct_column_grows_inside_with_fresh_ids_counted_against_the_cap() {
    let (dir, table) = open("grow");
    let metadata = table.table().metadata();
    let field = |id, name: &str, ty| Arc::new(NestedField::optional(id, name, ty));
    let asked = |fields| Wanted {
        grown: BTreeMap::from([("ctx".to_string(), Type::Struct(StructType::new(fields)))]),
        ..Wanted::default()
    };
    // `ctx.os` (id 4) stays, `ctx.v` and `ctx.app` are new (id 0, asked by the encoder).
    let wanted = asked(vec![
        field(4, "os", string()),
        field(0, "v", Type::Primitive(PrimitiveType::Long)),
        field(0, "app", string()),
    ]);
    let evolution = plan(metadata, None, &wanted, 100).evolution.unwrap();
    assert_eq!(evolution.added, ["ctx.v", "ctx.app"]);
    assert_eq!(
        ids(&evolution.schema)[2..],
        [
            (3, "ctx:struct<stringlongstring>".to_string()),
            (4, "ctx.os:string".to_string()),
            (5, "ctx.v:long".to_string()),
            (6, "ctx.app:string".to_string()),
        ]
    );
    // 4 fields now: one more fits under 5, two do not, and nothing else changes.
    let planned = plan(metadata, None, &wanted, 5);
    assert!(planned.evolution.is_none());
    assert_eq!(planned.refused["ctx"].0, "too_many_columns");
    // A new field named as another but for its case refuses the growth.
    let twin = asked(vec![field(4, "os", string()), field(0, "OS", string())]);
    let planned = plan(metadata, None, &twin, 100);
    assert!(planned.evolution.is_none());
    assert_eq!(planned.refused["ctx"].0, "invalid_column_name");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a batch asks for: `added` columns and `promoted` ones.
fn wanted(added: &BTreeMap<String, Type>, promoted: &BTreeMap<String, PrimitiveType>) -> Wanted {
    Wanted {
        added: added.clone(),
        promoted: promoted.clone(),
        ..Wanted::default()
    }
}

fn mark(batch_id: u64) -> CommitMark {
    CommitMark {
        pipeline: "p".into(),
        batch_id,
        offsets: Offsets::default(),
    }
}

#[test]
fn a_schema_change_commits_with_its_batch_or_not_at_all() {
    let (dir, mut table) = open("commit");
    let before = table.schema().schema_id();
    let added = BTreeMap::from([("tier".to_string(), string())]);
    let promoted = BTreeMap::from([("qty".to_string(), PrimitiveType::Long)]);
    let planned = plan(
        table.table().metadata(),
        None,
        &wanted(&added, &promoted),
        100,
    );
    let evolution = planned.evolution.unwrap();
    // Another change, planned against the same schema: it must not land after the first.
    let other = plan(
        table.table().metadata(),
        None,
        &wanted(
            &BTreeMap::from([("other".to_string(), string())]),
            &BTreeMap::new(),
        ),
        100,
    )
    .evolution
    .unwrap();

    let fence = Fence::Follows(Offsets::default());
    let landed = table.commit_evolving(vec![], &mark(1), HashMap::new(), &fence, Some(&evolution));
    landed.unwrap();
    let schema = table.schema().clone();
    assert_ne!(schema.schema_id(), before);
    assert_eq!(ids(&schema), ids(&evolution.schema));
    let metadata = table.table().metadata();
    assert_eq!(
        metadata.last_column_id(),
        5,
        "the placeholder's id is not kept"
    );
    let snapshot = metadata.current_snapshot().unwrap();
    assert_eq!(snapshot.schema_id(), Some(schema.schema_id()));
    assert_eq!(
        metadata.snapshots().count(),
        1,
        "one snapshot: schema and rows"
    );

    let refused = table.commit_evolving(vec![], &mark(2), HashMap::new(), &fence, Some(&other));
    assert!(
        matches!(refused, Err(IcebergError::SchemaMoved { expected, found, .. })
            if expected == before && found == schema.schema_id()),
        "{refused:?}"
    );
    table.refresh().unwrap();
    assert_eq!(table.schema().schema_id(), schema.schema_id());
    assert_eq!(table.table().metadata().snapshots().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
