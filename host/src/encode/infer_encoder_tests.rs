//! The encoder with `unknown-fields = "add"`: what it asks the schema for, and what it
//! refuses once the schema is final.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use super::{Encoder, Evolving, SCHEMA_CHANGE, UnknownFields};

fn schema() -> Schema {
    let field = |id, name, ty| Arc::new(NestedField::optional(id, name, Type::Primitive(ty)));
    Schema::builder()
        .with_fields(vec![
            field(1, "id", PrimitiveType::String),
            field(2, "qty", PrimitiveType::Int),
            field(
                3,
                "price",
                PrimitiveType::Decimal {
                    precision: 5,
                    scale: 2,
                },
            ),
        ])
        .build()
        .unwrap()
}

fn adding(frozen: bool, refused: &[(&str, &'static str)]) -> Encoder {
    Encoder::new(&schema(), &[])
        .unwrap()
        .with_unknown_fields(UnknownFields::Add)
        .with_evolving(Evolving {
            max_depth: 2,
            timestamps: false,
            frozen,
            refused: refused
                .iter()
                .map(|(n, c)| (n.to_string(), (*c, format!("{n} refused"))))
                .collect(),
        })
}

fn codes(encoded: &super::Encoded) -> Vec<(usize, &'static str, Option<String>)> {
    encoded
        .errors
        .iter()
        .map(|(i, e)| (*i, e.code, e.field.clone()))
        .collect()
}

#[test]
fn new_fields_and_outgrown_values_set_the_row_aside_and_say_what_they_need() {
    let values: Vec<&[u8]> = vec![
        br#"{"id": "a", "qty": 1}"#,
        br#"{"id": "b", "tier": "gold", "n": 3}"#,
        br#"{"id": "c", "n": 2.5, "ctx": {"os": "ios"}}"#,
        br#"{"id": "d", "qty": 3000000000, "price": "123456.78"}"#,
        br#"{"id": "e", "deep": {"a": {"b": {"c": 1}}}}"#,
        br#"{"id": "f", "empty": [], "nothing": null}"#,
        br#"{"id": "g", "qty": "many"}"#,
    ];
    let e = adding(false, &[]);
    let encoded = e.encode(values.iter().map(|v| Some(*v)), 0).unwrap();
    assert_eq!(
        codes(&encoded),
        [
            (1, SCHEMA_CHANGE, None),
            (2, SCHEMA_CHANGE, None),
            (3, SCHEMA_CHANGE, None),
            (4, "nested_too_deep", Some("deep".to_string())),
            (6, "type_mismatch", Some("qty".to_string())),
        ]
    );
    assert_eq!(encoded.rows, [0, 5]);
    assert_eq!(encoded.dropped, BTreeMap::from([("empty".to_string(), 1)]));
    let added: Vec<String> = encoded
        .wanted
        .added
        .iter()
        .map(|(n, t)| format!("{n}:{t}"))
        .collect();
    assert_eq!(added, ["ctx:struct<string>", "n:double", "tier:string"]);
    assert_eq!(
        encoded.wanted.promoted,
        BTreeMap::from([
            ("qty".to_string(), PrimitiveType::Long),
            (
                "price".to_string(),
                PrimitiveType::Decimal {
                    precision: 8,
                    scale: 2
                }
            ),
        ])
    );
}

#[test]
fn a_final_schema_refuses_what_it_lacks_with_a_code() {
    let values: Vec<&[u8]> = vec![
        br#"{"id": "a", "k1": 1}"#,
        br#"{"id": "b", "k2": 1}"#,
        br#"{"id": "c", "qty": 3000000000}"#,
        br#"{"id": "d", "k2": null}"#,
    ];
    let e = adding(true, &[("k1", "too_many_columns")]);
    let encoded = e.encode(values.iter().map(|v| Some(*v)), 0).unwrap();
    assert_eq!(
        codes(&encoded),
        [
            (0, "too_many_columns", Some("k1".to_string())),
            (1, "unknown_field", Some("k2".to_string())),
            (2, "out_of_range", Some("qty".to_string())),
        ]
    );
    assert_eq!(encoded.rows, [3]);
    assert!(encoded.wanted.is_empty());
}
