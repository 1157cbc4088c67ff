//! The host's one reading of each value ([`super::index_fields`]): the encoder uses it
//! instead of reading the value again, and gives the same rows as without it.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use super::{Encoder, index_fields};
use crate::record::{FieldSpans, Patch, Record};

fn encoder() -> Encoder {
    let field = |id, name: &str| {
        Arc::new(NestedField::optional(
            id,
            name,
            Type::Primitive(PrimitiveType::String),
        ))
    };
    let schema = Schema::builder()
        .with_fields(vec![field(1, "id"), field(2, "tier")])
        .build()
        .unwrap();
    Encoder::new(&schema, &[]).unwrap()
}

fn records(values: &[&str]) -> Vec<Record> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Record::with_value("t".into(), i as i64, v.as_bytes().to_vec()))
        .collect()
}

fn column(records: &[Record], patch: Option<&Patch>, i: usize) -> Vec<Option<String>> {
    let encoded = encoder()
        .encode_records(records.iter().map(|r| (r, patch)), 0)
        .unwrap();
    assert!(encoded.errors.is_empty(), "{:?}", encoded.errors);
    let column = encoded.batch.column(i).as_string::<i32>();
    (0..records.len())
        .map(|r| column.is_valid(r).then(|| column.value(r).to_string()))
        .collect()
}

#[test]
fn indexed_records_encode_as_unindexed_ones() {
    let values = [
        r#"{"id": "a", "tier": "gold", "n": 1}"#,
        r#"{"id": "b\n", "tier": {"nested": true}}"#,
        r#"{"tier":"silver","id":"c"}"#,
    ];
    let plain = records(&values);
    let mut indexed = records(&values);
    index_fields(&mut indexed);
    assert!(indexed[0].field_spans().is_some());
    assert!(
        indexed[1].field_spans().is_none(),
        "not a flat object of the common shape"
    );
    let patch = Patch::of([("tier", r#""bronze""#)]);
    for patch in [None, Some(&patch)] {
        for i in 0..2 {
            assert_eq!(column(&indexed, patch, i), column(&plain, patch, i));
        }
    }
}

#[test]
fn the_encoder_reads_the_spans_not_the_value_again() {
    let value = br#"{"id":"a","tier":"gold"}"#;
    let mut record = Record::with_value("t".into(), 0, value.to_vec());
    // Spans that name the field `id` twice, the second time with `tier`'s value: only a
    // reader of the spans sees `id` = "gold".
    let stored = record.value.clone().unwrap();
    let spans = Arc::new(vec![2, 2, 5, 3, 2, 2, 17, 6]);
    record.spans = Some(FieldSpans::new(spans, 0, 2, &stored));
    assert_eq!(
        column(std::slice::from_ref(&record), None, 0),
        [Some("gold".into())]
    );
    // A record whose value was replaced does not use them.
    record.value = Some(value.to_vec().into());
    assert!(record.field_spans().is_none());
    assert_eq!(column(&[record], None, 0), [Some("a".into())]);
}
