//! The evolution property (proptest): whatever JSON objects a batch holds, with
//! `unknown-fields = "add"` each one lands as a row with every field it carries in a
//! column (or counted as dropped, for values with no type), or is refused with a code;
//! none is lost, none lands twice, and the planned schema stays under its caps; in a
//! second batch, struct and list columns the first added grow inside as the events ask.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, SortOrder, TableMetadata,
    TableMetadataBuilder, Type, UnboundPartitionSpec,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{Evolution, count_fields, plan};
use crate::encode::{EncodeError, Encoder, Evolving, SCHEMA_CHANGE, UnknownFields, conform};

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
        (0u32..3, 0u32..2).prop_map(|(zone, sep)| {
            let sep = if sep == 0 { "T" } else { " " };
            Value::String(match zone {
                0 => format!("2026-01-09{sep}10:04:00"),
                1 => "2026-01-09T10:04:00Z".into(),
                _ => "2026-01-09T10:04:00.5+01:00".into(),
            })
        }),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-c.]{0,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An event: `id`, maybe `n` (any value), and fields from a small set of names (few, so
/// that the second batch meets the first's columns).
fn event() -> impl Strategy<Value = Map<String, Value>> {
    (
        any::<i64>(),
        proptest::option::of(json_value()),
        proptest::collection::btree_map("[a-d]", json_value(), 0..4),
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

/// The value at dead-letter field path `path` (`a.b`, `a[2].b`, `m["k"]`) in `value`;
/// a name holding a `.` is tried whole when its parts do not resolve.
fn at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    if path.is_empty() {
        return Some(value);
    }
    let path = path.strip_prefix('.').unwrap_or(path);
    if let Some(rest) = path.strip_prefix('[') {
        let end = rest.find(']')?;
        let (token, rest) = (&rest[..end], &rest[end + 1..]);
        let next = match token.parse::<usize>() {
            Ok(j) => value.as_array()?.get(j)?,
            Err(_) => value.get(serde_json::from_str::<String>(token).ok()?)?,
        };
        return at(next, rest);
    }
    let end = path.find(['.', '[']).unwrap_or(path.len());
    match value.get(&path[..end]) {
        Some(next) => at(next, &path[end..]).or_else(|| value.get(path)),
        None => value.get(path),
    }
}

/// Whether `array`'s slot `row` holds every part of `value` that carries data, by name
/// inside structs, by position inside lists (map values are not looked into).
fn holds(array: &dyn Array, row: usize, value: &Value) -> Result<(), String> {
    if !carries_data(value) {
        return Ok(());
    }
    if array.is_null(row) {
        return Err(format!("{value} is null"));
    }
    match (value, array.data_type()) {
        (Value::Object(fields), DataType::Struct(_)) => {
            let s = array.as_struct();
            for (name, v) in fields.iter().filter(|(_, v)| carries_data(v)) {
                let child = s
                    .column_by_name(name)
                    .ok_or(format!("`{name}` has no field"))?;
                holds(child.as_ref(), row, v).map_err(|e| format!("{name}: {e}"))?;
            }
            Ok(())
        }
        (Value::Array(items), DataType::List(_)) => {
            let elements = array.as_list::<i32>().value(row);
            for (j, item) in items.iter().enumerate() {
                holds(elements.as_ref(), j, item).map_err(|e| format!("[{j}]: {e}"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// What became of a batch's events, as the pipeline settles it: rows (in one or two
/// Arrow batches of the final schema, with their events' indexes) and errors.
struct Outcome {
    batches: Vec<(RecordBatch, Vec<usize>)>,
    errors: Vec<(usize, EncodeError)>,
}

/// One batch of `texts` against `schema` (`on_top` of an earlier change), as the pipeline
/// runs it: encoded, the change planned, the events set aside encoded again against the
/// final schema, the other rows conformed to it. Checks the caps and that nothing is
/// left asking; returns the outcome and the change.
fn round(
    metadata: &TableMetadata,
    on_top: Option<&Evolution>,
    texts: &[String],
) -> Result<(Outcome, Option<Evolution>), TestCaseError> {
    let schema = on_top.map_or(metadata.current_schema().as_ref(), |e| &e.schema);
    let evolving = |frozen, refused| Evolving {
        max_depth: MAX_DEPTH,
        frozen,
        refused,
        timestamps: true,
    };
    let first = Encoder::new(schema, &[])
        .unwrap()
        .with_unknown_fields(UnknownFields::Add)
        .with_evolving(evolving(false, Default::default()));
    let encoded = first
        .encode(texts.iter().map(|t| Some(t.as_bytes())), 0)
        .unwrap();
    let planned = plan(metadata, on_top, &encoded.wanted, MAX_COLUMNS);
    let schema = planned.evolution.as_ref().map_or(schema, |e| &e.schema);
    prop_assert!(count_fields(schema.as_struct().fields()) <= MAX_COLUMNS);
    let last = Encoder::new(schema, &[])
        .unwrap()
        .with_unknown_fields(UnknownFields::Add)
        .with_evolving(evolving(true, planned.refused.clone()));
    let (aside, mut errors): (Vec<_>, Vec<_>) = encoded
        .errors
        .into_iter()
        .partition(|(_, e)| e.code == SCHEMA_CHANGE);
    let aside: Vec<usize> = aside.into_iter().map(|(i, _)| i).collect();
    let again = last
        .encode(aside.iter().map(|&i| Some(texts[i].as_bytes())), 0)
        .unwrap();
    prop_assert!(again.wanted.is_empty());
    errors.extend(again.errors.into_iter().map(|(j, e)| (aside[j], e)));
    let conformed = conform(encoded.batch, last.arrow_schema()).unwrap();
    let rows_again = again.rows.iter().map(|&j| aside[j]).collect();
    let batches = vec![(conformed, encoded.rows), (again.batch, rows_again)];
    Ok((Outcome { batches, errors }, planned.evolution))
}

proptest! {
    /// Two batches: the first adds columns (structs and lists among them), the second
    /// meets them and may grow them inside.
    #[test]
    fn every_event_lands_with_every_field_or_is_refused_with_a_code(
        events in proptest::collection::vec(event(), 1..24),
        later in proptest::collection::vec(event(), 1..24),
    ) {
        let metadata = metadata();
        let mut on_top = None;
        for batch in [&events, &later] {
            let texts: Vec<String> = batch.iter().map(|e| Value::Object(e.clone()).to_string()).collect();
            let (outcome, evolution) = round(&metadata, on_top.as_ref(), &texts)?;
            if evolution.is_some() {
                on_top = evolution;
            }
            // Every event once: a row or an error with a code, never "schema change".
            let mut seen: Vec<usize> = outcome.batches.iter().flat_map(|(_, rows)| rows.clone()).collect();
            seen.extend(outcome.errors.iter().map(|(i, _)| *i));
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..batch.len()).collect::<Vec<_>>());
            for (i, error) in &outcome.errors {
                prop_assert!(error.code != SCHEMA_CHANGE && !error.code.is_empty(), "{error}");
                // A field no column takes is refused with its own code (caps, names)
                // unless it holds no data (`{}` inside a struct).
                if error.code == "unknown_field" {
                    let path = error.field.as_deref().unwrap_or_default();
                    let event = Value::Object(batch[*i].clone());
                    let value = at(&event, path);
                    prop_assert!(!value.is_some_and(carries_data), "{error}: {}", texts[*i]);
                }
            }
            // A row holds every field that carries data, in a column of its name, and
            // every nested field inside it.
            for (arrays, rows) in &outcome.batches {
                for (row, &i) in rows.iter().enumerate() {
                    for (name, value) in &batch[i] {
                        if !carries_data(value) {
                            continue;
                        }
                        let column = arrays.column_by_name(name);
                        prop_assert!(column.is_some(), "event {i}'s `{name}` has no column: {}", texts[i]);
                        let held = holds(column.unwrap().as_ref(), row, value);
                        prop_assert!(held.is_ok(), "event {i}'s `{name}`: {:?}: {}", held, texts[i]);
                    }
                }
            }
        }
    }
}
