//! Avro datums (written by apache-avro's own writer) straight into a table's columns.

use std::sync::Arc;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use iceberg::spec::{NestedFieldRef, PrimitiveType, Schema, Type};

use super::{Encoded, Encoder, SCHEMA_CHANGE, UnknownFields, with_type};
use crate::format::tests::{ORDER, framed, order};
use crate::format::{Decoder, Format, MemoryRegistry, Schemas, Writer, iceberg::columns};

/// The table a new pipeline makes from `ORDER`, changed by `change`.
fn table(change: impl FnOnce(&mut Vec<NestedFieldRef>)) -> Schema {
    let (mut fields, _) = columns(&Writer::parse(ORDER).unwrap()).unwrap();
    change(&mut fields);
    Schema::builder().with_fields(fields).build().unwrap()
}

fn encode(encoder: &Encoder, values: &[Vec<u8>]) -> Encoded {
    let writer = Writer::parse(ORDER).unwrap();
    encoder
        .encode_avro(values.iter().map(|v| Ok((&writer, &v[..]))), 0)
        .unwrap()
}

#[test]
fn every_logical_type_lands_in_its_column() {
    let encoder = Encoder::new(&table(|_| {}), &[]).unwrap();
    let encoded = encode(&encoder, &[order("o-1", Some("gift")), order("o-2", None)]);
    assert_eq!(encoded.errors, vec![]);
    let batch = &encoded.batch;
    assert_eq!(batch.num_rows(), 2);
    assert_eq!(batch.column(0).as_string::<i32>().value(1), "o-2");
    assert_eq!(batch.column(1).as_primitive::<Int32Type>().value(0), -3);
    let at = batch.column(2).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(at.value(0), 1_767_323_045_678_901);
    assert_eq!(
        batch.column(3).as_primitive::<Decimal128Type>().value(0),
        12345
    );
    assert_eq!(
        batch.column(4).as_primitive::<Date32Type>().value(0),
        20_455
    );
    assert_eq!(batch.column(5).as_string::<i32>().value(0), "gift");
    assert!(batch.column(5).is_null(1));
    assert_eq!(batch.column(6).as_string::<i32>().value(0), "STORE");
    let tags = batch.column(7).as_list::<i32>().value(0);
    assert_eq!(tags.as_string::<i32>().value(0), "a\"b");
    let attrs = batch.column(8).as_map();
    assert_eq!(attrs.values().as_primitive::<Int64Type>().value(0), 7);
    let ship = batch.column(9).as_struct();
    assert_eq!(ship.column(0).as_string::<i32>().value(0), "Oslo");
    assert_eq!(ship.column(1).as_string::<i32>().value(0), "WEB");
}

#[test]
fn wider_columns_take_narrower_values_and_a_misfit_names_its_field() {
    let widened = table(|f| {
        f[1] = with_type(&f[1], Type::Primitive(PrimitiveType::Long));
        f[3] = with_type(
            &f[3],
            Type::Primitive(PrimitiveType::Decimal {
                precision: 12,
                scale: 4,
            }),
        );
    });
    let encoded = encode(&Encoder::new(&widened, &[]).unwrap(), &[order("o-1", None)]);
    assert_eq!(encoded.errors, vec![]);
    assert_eq!(
        encoded.batch.column(1).as_primitive::<Int64Type>().value(0),
        -3
    );
    assert_eq!(
        encoded
            .batch
            .column(3)
            .as_primitive::<Decimal128Type>()
            .value(0),
        1_234_500
    );
    let misfit = table(|f| f[0] = with_type(&f[0], Type::Primitive(PrimitiveType::Int)));
    let encoded = encode(&Encoder::new(&misfit, &[]).unwrap(), &[order("o-1", None)]);
    let (_, error) = &encoded.errors[0];
    assert_eq!(
        (error.code, error.field.as_deref()),
        ("type_mismatch", Some("id"))
    );
    assert!(error.message.contains("string"), "{}", error.message);
}

#[test]
fn fields_the_table_lacks_follow_unknown_fields() {
    let narrow = table(|f| {
        f.remove(5);
    });
    let dropping = Encoder::new(&narrow, &[]).unwrap();
    let encoded = encode(&dropping, &[order("o-1", Some("x")), order("o-2", None)]);
    assert_eq!(encoded.batch.num_rows(), 2);
    assert_eq!(encoded.dropped.get("note"), Some(&2));
    let refusing = Encoder::new(&narrow, &[])
        .unwrap()
        .with_unknown_fields(UnknownFields::DeadLetter);
    let encoded = encode(&refusing, &[order("o-1", None)]);
    assert_eq!(encoded.errors[0].1.code, "unknown_field");
    let adding = Encoder::new(&narrow, &[])
        .unwrap()
        .with_unknown_fields(UnknownFields::Add);
    let encoded = encode(&adding, &[order("o-1", None)]);
    assert_eq!(encoded.errors[0].1.code, SCHEMA_CHANGE);
    assert!(!encoded.wanted.is_empty());
}

#[test]
fn a_narrower_column_asks_to_widen_with_add() {
    let narrow_ship = table(|f| {
        let Type::Struct(s) = &*f[9].field_type else {
            unreachable!()
        };
        let city = vec![s.fields()[0].clone()];
        f[9] = with_type(&f[9], Type::Struct(iceberg::spec::StructType::new(city)));
    });
    let strict = Encoder::new(&narrow_ship, &[]).unwrap();
    let (_, error) = &encode(&strict, &[order("o-1", None)]).errors[0];
    assert_eq!(
        (error.code, error.field.as_deref()),
        ("unknown_field", Some("ship.kind"))
    );
    let adding = strict.with_unknown_fields(UnknownFields::Add);
    let encoded = encode(&adding, &[order("o-1", None)]);
    assert_eq!(encoded.errors[0].1.code, SCHEMA_CHANGE);
}

#[test]
fn broken_and_unknown_values_are_dead_letters() {
    let encoder = Encoder::new(&table(|_| {}), &[]).unwrap();
    let datum = order("o-1", None);
    let encoded = encode(&encoder, &[datum[..datum.len() - 1].to_vec()]);
    assert_eq!(encoded.errors[0].1.code, "undecodable");
    let registry = Arc::new(MemoryRegistry::default());
    registry.insert("orders-value", 1, ORDER);
    let decoder = Decoder::Registry(Schemas::new(Box::new(registry), Format::Avro));
    let (good, unknown) = (framed(1, &datum), framed(2, &datum));
    let values = [
        Some(&good[..]),
        Some(&unknown[..]),
        Some(&b"{\"id\":1}"[..]),
    ];
    let known = decoder.prepare(values).unwrap();
    let encoded = encoder
        .encode_avro(values.iter().map(|v| known.writer(*v)), 0)
        .unwrap();
    assert_eq!(encoded.rows, vec![0]);
    let codes: Vec<&str> = encoded.errors.iter().map(|(_, e)| e.code).collect();
    assert_eq!(codes, ["unknown_schema", "not_framed"]);
}

#[test]
fn bytes_and_fixed_land_in_binary_columns() {
    let text = r#"{"type": "record", "name": "B", "fields": [
        {"name": "raw", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 2}}]}"#;
    let writer = Writer::parse(text).unwrap();
    let (fields, skipped) = columns(&writer).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    let table = Schema::builder().with_fields(fields).build().unwrap();
    let datum = [0x04, 0x00, 0xff, 0xab, 0xcd]; // bytes [0, 255], fixed [0xab, 0xcd]
    let encoded = Encoder::new(&table, &[])
        .unwrap()
        .encode_avro([Ok((&writer, &datum[..]))], 0)
        .unwrap();
    assert_eq!(encoded.errors, vec![]);
    let raw = encoded.batch.column(0).as_binary::<i64>();
    assert_eq!(raw.value(0), [0x00, 0xff]);
    assert_eq!(
        encoded.batch.column(1).as_binary::<i64>().value(0),
        [0xab, 0xcd]
    );
}
