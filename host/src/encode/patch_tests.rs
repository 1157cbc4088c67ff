//! Patched values: a patch's fields take the place of the value's own, on the flat fast
//! path and on serde_json's, and misfit like any field.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use super::{Encoder, UnknownFields};
use crate::record::Patch;

fn encoder() -> Encoder {
    let field = |id, name: &str, ty| Arc::new(NestedField::optional(id, name, Type::Primitive(ty)));
    let schema = Schema::builder()
        .with_fields(vec![
            field(1, "id", PrimitiveType::String),
            field(2, "tier", PrimitiveType::String),
            field(3, "n", PrimitiveType::Int),
        ])
        .build()
        .unwrap();
    Encoder::new(&schema, &[]).unwrap()
}

#[test]
fn patched_fields_replace_and_add_on_both_paths() {
    let patch = Patch::of([("tier", r#""gold""#), ("n", " 7 "), ("extra", "[1]")]);
    let values: [&[u8]; 3] = [
        // The flat fast path.
        br#"{"id": "a", "tier": "silver", "n": "not a number"}"#,
        // Nested and escaped: serde_json's path.
        br#"{"id": "b\n", "n": {"x": 1}, "other": [2]}"#,
        br#"{"id": "c"}"#,
    ];
    let encoded = encoder()
        .encode_patched(
            values
                .iter()
                .zip([Some(&patch), Some(&patch), None])
                .map(|(v, p)| (Some(*v), p)),
            0,
        )
        .unwrap();
    assert!(encoded.errors.is_empty(), "{:?}", encoded.errors);
    let batch = encoded.batch;
    let strings = |i: usize| {
        let column = batch.column(i).as_string::<i32>();
        (0..3)
            .map(|r| column.is_valid(r).then(|| column.value(r).to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        strings(0),
        [Some("a".into()), Some("b\n".into()), Some("c".into())]
    );
    assert_eq!(strings(1), [Some("gold".into()), Some("gold".into()), None]);
    let n = batch.column(2).as_primitive::<Int32Type>();
    assert_eq!((n.value(0), n.value(1), n.is_null(2)), (7, 7, true));
    // The patch's unknown field is dropped and counted like the value's own.
    assert_eq!(encoded.dropped.get("extra"), Some(&2));
    assert_eq!(encoded.dropped.get("other"), Some(&1));
}

#[test]
fn a_patched_field_that_does_not_fit_fails_its_row_by_name() {
    let patch = Patch::of([("n", r#""seven""#)]);
    let encoded = encoder()
        .encode_patched([(Some(&br#"{"id": "a", "n": 1}"#[..]), Some(&patch))], 0)
        .unwrap();
    assert_eq!(encoded.errors.len(), 1);
    assert_eq!(encoded.errors[0].1.field.as_deref(), Some("n"));
    let dead = encoder()
        .with_unknown_fields(UnknownFields::DeadLetter)
        .encode_patched(
            [(
                Some(&br#"{"id": "a"}"#[..]),
                Some(&Patch::of([("new", "1")])),
            )],
            0,
        )
        .unwrap();
    assert_eq!(dead.errors[0].1.code, "unknown_field");
    let not_object = encoder()
        .encode_patched([(Some(&b"[1]"[..]), Some(&patch))], 0)
        .unwrap();
    assert_eq!(not_object.errors[0].1.code, "not_an_object");
}
