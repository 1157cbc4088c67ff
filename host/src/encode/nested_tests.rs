//! The encoder's nested columns: each kind, three levels deep, nulls, field ids, and the
//! path of a misfit.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, Schema, StructType, Type};

use super::Encoder;

fn p(ty: PrimitiveType) -> Type {
    Type::Primitive(ty)
}

fn opt(id: i32, name: &str, ty: Type) -> Arc<NestedField> {
    Arc::new(NestedField::optional(id, name, ty))
}

fn list(id: i32, element: Type) -> Type {
    Type::List(ListType::new(Arc::new(NestedField::list_element(
        id, element, false,
    ))))
}

fn structure(fields: Vec<Arc<NestedField>>) -> Type {
    Type::Struct(StructType::new(fields))
}

/// `items: list<struct<sku: string, qty: int, price: decimal(10,2)>>`,
/// `context: struct<device: string, at: timestamptz, r: required int>` (`r` is required),
/// `utm: map<string, string>`, `counts: map<int, long>`, and three levels deep
/// `deep: struct<a: list<map<string, struct<b: int>>>>`.
fn schema() -> Schema {
    let decimal = PrimitiveType::Decimal {
        precision: 10,
        scale: 2,
    };
    let item = structure(vec![
        opt(11, "sku", p(PrimitiveType::String)),
        opt(12, "qty", p(PrimitiveType::Int)),
        opt(13, "price", p(decimal)),
    ]);
    let context = structure(vec![
        opt(15, "device", p(PrimitiveType::String)),
        opt(16, "at", p(PrimitiveType::Timestamptz)),
        Arc::new(NestedField::required(17, "r", p(PrimitiveType::Int))),
    ]);
    let utm = MapType::optional(18, p(PrimitiveType::String), 19, p(PrimitiveType::String));
    let counts = MapType::optional(20, p(PrimitiveType::Int), 21, p(PrimitiveType::Long));
    let b = structure(vec![opt(26, "b", p(PrimitiveType::Int))]);
    let deep = structure(vec![opt(
        22,
        "a",
        list(
            23,
            Type::Map(MapType::optional(24, p(PrimitiveType::String), 25, b)),
        ),
    )]);
    Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(1, "id", p(PrimitiveType::String))),
            opt(2, "items", list(10, item)),
            opt(3, "context", context),
            opt(4, "utm", Type::Map(utm)),
            opt(5, "counts", Type::Map(counts)),
            opt(6, "deep", deep),
        ])
        .build()
        .unwrap()
}

fn encode(values: &[&str]) -> RecordBatch {
    let encoder = Encoder::new(&schema(), &[]).unwrap();
    let out = encoder
        .encode(values.iter().map(|v| Some(v.as_bytes())), 0)
        .unwrap();
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    out.batch
}

#[test]
fn lists_of_structs_fill_with_their_primitives_converted() {
    let b = encode(&[
        r#"{"id": "a", "items": [{"sku": "s1", "qty": 2, "price": "1.50"}, null, {"qty": 3}]}"#,
        r#"{"id": "b", "items": []}"#,
        r#"{"id": "c", "items": null}"#,
        r#"{"id": "d"}"#,
    ]);
    let items = b.column(1).as_list::<i32>();
    assert_eq!(items.value_offsets(), [0, 3, 3, 3, 3]);
    let nulls: Vec<bool> = (0..4).map(|i| items.is_null(i)).collect();
    assert_eq!(nulls, [false, false, true, true]);
    let elements = items.values().as_struct();
    assert_eq!(
        (
            elements.is_null(0),
            elements.is_null(1),
            elements.is_null(2)
        ),
        (false, true, false)
    );
    let sku = elements.column(0).as_string::<i32>();
    assert_eq!((sku.value(0), sku.is_null(2)), ("s1", true));
    let qty = elements.column(1).as_primitive::<Int32Type>();
    assert_eq!((qty.value(0), qty.value(2)), (2, 3));
    let price = elements.column(2).as_primitive::<Decimal128Type>();
    assert_eq!((price.value(0), price.is_null(2)), (150, true));
}

#[test]
fn structs_fill_by_name_and_missing_fields_are_null() {
    let b = encode(&[
        r#"{"id": "a", "context": {"r": 1, "at": "2026-01-09T10:04:00Z", "device": "ios"}}"#,
        r#"{"id": "b", "context": {"r": 2, "device": null}}"#,
        r#"{"id": "c", "context": null}"#,
    ]);
    let context = b.column(2).as_struct();
    assert_eq!(
        (context.is_null(0), context.is_null(1), context.is_null(2)),
        (false, false, true)
    );
    let device = context.column(0).as_string::<i32>();
    assert_eq!((device.value(0), device.is_null(1)), ("ios", true));
    let at = context.column(1).as_primitive::<TimestampMicrosecondType>();
    assert_eq!((at.value(0), at.is_null(1)), (1_767_953_040_000_000, true));
    let r = context.column(2).as_primitive::<Int32Type>();
    assert_eq!((r.value(0), r.value(1)), (1, 2));
}

#[test]
fn maps_fill_from_objects_with_keys_converted() {
    let b = encode(&[
        r#"{"id": "a", "utm": {"source": "news", "k\"q": null, "source": "mail"}, "counts": {"7": 70, "-1": 1}}"#,
        r#"{"id": "b", "utm": {}}"#,
    ]);
    let utm = b.column(3).as_map();
    assert_eq!(utm.value_offsets(), [0, 2, 2]);
    let keys = utm.keys().as_string::<i32>();
    // The last of a repeated key wins, as in a JSON object.
    assert_eq!((keys.value(0), keys.value(1)), ("k\"q", "source"));
    let values = utm.values().as_string::<i32>();
    assert_eq!((values.is_null(0), values.value(1)), (true, "mail"));
    let counts = b.column(4).as_map();
    let keys = counts.keys().as_primitive::<Int32Type>();
    assert_eq!((keys.value(0), keys.value(1)), (7, -1));
    let values = counts.values().as_primitive::<Int64Type>();
    assert_eq!((values.value(0), values.value(1)), (70, 1));
    assert!(counts.is_null(1));
}

#[test]
fn nests_three_levels_deep() {
    let b = encode(&[
        r#"{"id": "a", "deep": {"a": [{"x": {"b": 1}, "y": null}, {}, null, {"z": {}}]}}"#,
    ]);
    let deep = b.column(5).as_struct();
    let a = deep.column(0).as_list::<i32>();
    assert_eq!(a.value_offsets(), [0, 4]);
    let maps = a.values().as_map();
    assert_eq!(maps.value_offsets(), [0, 2, 2, 2, 3]);
    assert!(maps.is_null(2) && !maps.is_null(1));
    let keys = maps.keys().as_string::<i32>();
    assert_eq!(
        (keys.value(0), keys.value(1), keys.value(2)),
        ("x", "y", "z")
    );
    let inner = maps.values().as_struct();
    assert_eq!(
        (inner.is_null(0), inner.is_null(1), inner.is_null(2)),
        (false, true, false)
    );
    let b_values = inner.column(0).as_primitive::<Int32Type>();
    assert_eq!((b_values.value(0), b_values.is_null(2)), (1, true));
}

/// The Iceberg field id of each field, nested ones included, in depth-first order.
fn ids(field: &Field, out: &mut Vec<String>) {
    out.push(format!(
        "{}={}",
        field.name(),
        field
            .metadata()
            .get("PARQUET:field_id")
            .map_or("none", |s| s.as_str())
    ));
    match field.data_type() {
        DataType::Struct(fields) => fields.iter().for_each(|f| ids(f, out)),
        DataType::List(element) => ids(element, out),
        DataType::Map(entries, _) => {
            let DataType::Struct(pairs) = entries.data_type() else {
                panic!("{entries:?}")
            };
            pairs.iter().for_each(|f| ids(f, out));
        }
        _ => {}
    }
}

#[test]
fn every_nested_field_has_its_field_id() {
    let b = encode(&[r#"{"id": "a"}"#]);
    let mut all = Vec::new();
    for field in b.schema().fields() {
        ids(field, &mut all);
    }
    assert_eq!(
        all.join(" "),
        "id=1 items=2 element=10 sku=11 qty=12 price=13 context=3 device=15 at=16 r=17 \
         utm=4 key=18 value=19 counts=5 key=20 value=21 deep=6 a=22 element=23 key=24 \
         value=25 b=26"
    );
}

#[test]
fn a_misfit_names_its_path() {
    let encoder = Encoder::new(&schema(), &[]).unwrap();
    let cases = [
        (
            r#""items": [{}, {"qty": "x"}]"#,
            "type_mismatch",
            "items[1].qty",
        ),
        (
            r#""items": [{"price": 1.234}]"#,
            "invalid_decimal",
            "items[0].price",
        ),
        (r#""items": {"qty": 1}"#, "type_mismatch", "items"),
        (
            r#""context": {"r": 1, "at": "now"}"#,
            "invalid_timestamp",
            "context.at",
        ),
        (
            r#""context": {"r": 1, "os": "x"}"#,
            "unknown_field",
            "context.os",
        ),
        (
            r#""context": {"device": "x"}"#,
            "missing_required",
            "context.r",
        ),
        (r#""context": "ios""#, "type_mismatch", "context"),
        (r#""counts": {"x": 1}"#, "type_mismatch", r#"counts["x"]"#),
        (
            r#""counts": {"1": "many"}"#,
            "type_mismatch",
            r#"counts["1"]"#,
        ),
        (
            r#""counts": {"1": 1, "3000000000": 1}"#,
            "out_of_range",
            r#"counts["3000000000"]"#,
        ),
        (r#""utm": ["a"]"#, "type_mismatch", "utm"),
        (
            r#""deep": {"a": [{}, {"k\"1": {"b": true}}]}"#,
            "type_mismatch",
            r#"deep.a[1]["k\"1"].b"#,
        ),
    ];
    for (fields, code, path) in cases {
        let value = format!(r#"{{"id": "e", {fields}}}"#);
        let error = encoder.check(Some(value.as_bytes())).unwrap_err();
        assert_eq!(
            (error.code, error.field.as_deref()),
            (code, Some(path)),
            "{value}: {error}"
        );
    }
    // Only the misfit is dead-lettered; the other events of the batch are written.
    let values: [&[u8]; 2] = [
        br#"{"id": "a", "items": [{"qty": "x"}]}"#,
        br#"{"id": "b", "items": [{"qty": 1}]}"#,
    ];
    let out = encoder.encode(values.map(Some), 0).unwrap();
    assert_eq!((out.rows.as_slice(), out.errors.len()), (&[1][..], 1));
    assert_eq!(out.errors[0].1.field.as_deref(), Some("items[0].qty"));
}

#[test]
fn a_flat_event_of_a_nested_table_takes_the_fast_path_unharmed() {
    // No nested value: the flat parser reads it; a nested column left out is null.
    let b = encode(&[r#"{"id": "a", "items": null}"#, r#"{"id": "b"}"#]);
    assert_eq!(b.column(0).as_string::<i32>().value(1), "b");
    assert!(b.column(1).is_null(0) && b.column(2).is_null(1));
}
