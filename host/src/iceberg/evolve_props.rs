//! The evolution property (proptest): whatever JSON objects a batch holds, with
//! `unknown-fields = "add"` each one lands as a row with every field it carries in a
//! column (or counted as dropped, for values with no type), or is refused with a code;
//! none is lost, none lands twice, and the planned schema stays under its caps.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::Array;
use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, SortOrder, TableMetadata,
    TableMetadataBuilder, Type, UnboundPartitionSpec,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{count_fields, plan};
use crate::encode::{Encoder, Evolving, SCHEMA_CHANGE, UnknownFields};

const MAX_COLUMNS: usize = 16;
const MAX_DEPTH: usize = 2;

fn metadata() -> TableMetadata {
    let schema = Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::optional(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )),
            Arc::new(NestedField::optional(
                2,
                "n",
                Type::Primitive(PrimitiveType::Int),
            )),
        ])
        .build()
        .unwrap();
    TableMetadataBuilder::new(
        schema,
        UnboundPartitionSpec::builder().build(),
        SortOrder::unsorted_order(),
        "file:///tmp/t".into(),
        FormatVersion::V2,
        HashMap::new(),
    )
    .unwrap()
    .build()
    .unwrap()
    .metadata
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-c.]{0,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An event: `id`, maybe `n` (any value), and fields from a small set of names.
fn event() -> impl Strategy<Value = Map<String, Value>> {
    (
        any::<i64>(),
        proptest::option::of(json_value()),
        proptest::collection::btree_map("[a-f]{1,2}", json_value(), 0..4),
    )
        .prop_map(|(id, n, extra)| {
            let mut event = Map::new();
            event.insert("id".into(), id.into());
            if let Some(n) = n {
                event.insert("n".into(), n);
            }
            event.extend(extra);
            event
        })
}

/// Whether `value` carries data a column could hold (not null, not only empty values).
fn carries_data(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Array(items) => items.iter().any(carries_data),
        Value::Object(fields) => fields.values().any(carries_data),
        _ => true,
    }
}

proptest! {
    #[test]
    fn every_event_lands_with_every_field_or_is_refused_with_a_code(
        events in proptest::collection::vec(event(), 1..24),
    ) {
        let metadata = metadata();
        let texts: Vec<String> = events.iter().map(|e| Value::Object(e.clone()).to_string()).collect();
        let values = || texts.iter().map(|t| Some(t.as_bytes()));
        let evolving = |frozen, refused| Evolving { max_depth: MAX_DEPTH, frozen, refused };
        let first = Encoder::new(metadata.current_schema(), &[])
            .unwrap()
            .with_unknown_fields(UnknownFields::Add)
            .with_evolving(evolving(false, Default::default()));
        let encoded = first.encode(values(), 0).unwrap();
        let planned = plan(&metadata, None, &encoded.wanted.added, &encoded.wanted.promoted, MAX_COLUMNS);
        let schema = planned.evolution.as_ref().map_or(metadata.current_schema().as_ref(), |e| &e.schema).clone();
        prop_assert!(count_fields(schema.as_struct().fields()) <= MAX_COLUMNS);
        let last = Encoder::new(&schema, &[])
            .unwrap()
            .with_unknown_fields(UnknownFields::Add)
            .with_evolving(evolving(true, planned.refused.clone()));
        let again = last.encode(values(), 0).unwrap();
        prop_assert!(again.wanted.is_empty());

        // Every event once: a row or an error with a code, never "schema change".
        let mut seen: Vec<usize> = again.rows.clone();
        seen.extend(again.errors.iter().map(|(i, _)| *i));
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..events.len()).collect::<Vec<_>>());
        for (_, error) in &again.errors {
            prop_assert!(error.code != SCHEMA_CHANGE && !error.code.is_empty(), "{error}");
        }
        // A row holds every field that carries data, in a column of its name.
        for (row, &i) in again.rows.iter().enumerate() {
            for (name, value) in &events[i] {
                if !carries_data(value) {
                    continue;
                }
                let column = again.batch.column_by_name(name);
                prop_assert!(column.is_some(), "event {i}'s `{name}` has no column: {}", texts[i]);
                prop_assert!(!column.unwrap().is_null(row), "event {i}'s `{name}` is null: {}", texts[i]);
            }
        }
    }
}
