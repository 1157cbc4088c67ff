//! The format module against datums written by apache-avro's own writer (an encoder
//! independent of `read.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::types::Value;
use apache_avro::{Decimal, to_avro_datum};

use super::*;

pub(crate) const ORDER: &str = r#"{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["WEB", "STORE"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}, {"name": "kind", "type": "Kind"}]}], "default": null}
  ]
}"#;

/// An order datum, written by apache-avro.
pub(crate) fn order(id: &str, note: Option<&str>) -> Vec<u8> {
    let schema = apache_avro::Schema::parse_str(ORDER).unwrap();
    let value = Value::Record(vec![
        ("id".into(), Value::String(id.into())),
        ("qty".into(), Value::Int(-3)),
        ("at".into(), Value::TimestampMicros(1_767_323_045_678_901)),
        (
            "price".into(),
            Value::Decimal(Decimal::from(12345i64.to_be_bytes().to_vec())),
        ),
        ("day".into(), Value::Date(20_455)),
        (
            "note".into(),
            match note {
                Some(n) => Value::Union(1, Box::new(Value::String(n.into()))),
                None => Value::Union(0, Box::new(Value::Null)),
            },
        ),
        ("kind".into(), Value::Enum(1, "STORE".into())),
        (
            "tags".into(),
            Value::Array(vec![Value::String("a\"b".into())]),
        ),
        (
            "attrs".into(),
            Value::Map(HashMap::from([("n".into(), Value::Long(7))])),
        ),
        (
            "ship".into(),
            Value::Union(
                1,
                Box::new(Value::Record(vec![
                    ("city".into(), Value::String("Oslo".into())),
                    ("kind".into(), Value::Enum(0, "WEB".into())),
                ])),
            ),
        ),
    ]);
    to_avro_datum(&schema, value).unwrap()
}

/// `payload` in the wire format with schema id `id`.
pub(crate) fn framed(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut value = vec![MAGIC];
    value.extend_from_slice(&id.to_be_bytes());
    value.extend_from_slice(payload);
    value
}

#[test]
fn the_wire_format_is_unframed_or_refused() {
    assert_eq!(unframe(&[0, 0, 0, 1, 2, 9]), Ok((258, &[9u8][..])));
    assert_eq!(unframe(&[0, 0, 0, 0, 7]), Ok((7, &[][..])));
    for bad in [&b""[..], b"{\"a\":1}", &[0, 0, 1]] {
        let error = unframe(bad).unwrap_err();
        assert_eq!(error.code(), "not_framed", "{bad:?}: {error}");
    }
}

#[test]
fn a_datum_reads_to_the_json_the_encoder_reads_back() {
    let writer = Writer::parse(ORDER).unwrap();
    let json = json::to_json(&writer, &order("o-1", Some("gift"))).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "id": "o-1", "qty": -3, "at": "2026-01-02T03:04:05.678901Z", "price": 123.45,
            "day": "2026-01-02", "note": "gift", "kind": "STORE", "tags": ["a\"b"],
            "attrs": {"n": 7}, "ship": {"city": "Oslo", "kind": "WEB"}
        })
    );
    let none = json::to_json(&writer, &order("o-2", None)).unwrap();
    assert!(String::from_utf8(none).unwrap().contains("\"note\":null"));
}

#[test]
fn broken_datums_are_undecodable_not_a_panic() {
    let writer = Writer::parse(ORDER).unwrap();
    let datum = order("o-1", Some("gift"));
    for cut in 0..datum.len() {
        let error = json::to_json(&writer, &datum[..cut]).unwrap_err();
        assert_eq!(error.code(), "undecodable", "cut at {cut}");
    }
    let mut longer = datum.clone();
    longer.push(0);
    assert!(
        json::to_json(&writer, &longer)
            .unwrap_err()
            .to_string()
            .contains("follow")
    );
}

#[test]
fn schemas_are_fetched_once_and_an_outage_is_transient() {
    let registry = Arc::new(MemoryRegistry::default());
    registry.insert("orders-value", 5, ORDER);
    let decoder = Decoder::Registry(Schemas::new(Box::new(registry.clone()), Format::Avro));
    let good = framed(5, &order("o-1", None));
    let unknown = framed(6, &order("o-1", None));
    let values = [Some(&good[..]), Some(&unknown[..]), Some(&b"{}"[..]), None];
    let known = decoder.prepare(values).unwrap();
    assert!(known.writer(Some(&good)).is_ok());
    assert_eq!(
        known.writer(Some(&unknown)).unwrap_err().code(),
        "unknown_schema"
    );
    assert_eq!(known.writer(Some(b"{}")).unwrap_err().code(), "not_framed");
    assert_eq!(known.writer(None).unwrap_err().code(), "null_value");
    assert_eq!(registry.fetches(), 2);
    registry.set_down(true);
    let again = decoder.prepare(values).unwrap();
    assert!(again.writer(Some(&good)).is_ok(), "no fetch for a known id");
    assert_eq!(registry.fetches(), 2);
    let new = framed(7, &order("o-1", None));
    let error = decoder.prepare([Some(&new[..])]).unwrap_err();
    assert!(error.is_transient(), "{error}");
}

#[test]
fn a_registry_schema_of_another_type_is_unsupported() {
    let writer = Writer::parse("\"string\"").unwrap();
    assert!(matches!(writer.schema(), apache_avro::Schema::String));
    assert!(Writer::parse("{\"type\": \"nope\"}").is_err());
}

#[test]
fn a_table_made_from_the_schema_has_a_documented_column_per_field() {
    let writer = Writer::parse(ORDER).unwrap();
    let (fields, skipped) = iceberg::columns(&writer).unwrap();
    let types: Vec<String> = fields
        .iter()
        .map(|f| format!("{}:{}:{}", f.id, f.name, f.field_type))
        .collect();
    assert_eq!(skipped, Vec::<String>::new());
    assert_eq!(
        &types[..5],
        [
            "1:id:string",
            "2:qty:int",
            "3:at:timestamptz",
            "4:price:decimal(9, 2)",
            "5:day:date"
        ]
    );
    assert!(fields.iter().all(|f| !f.required));
    assert!(matches!(
        *fields[9].field_type,
        ::iceberg::spec::Type::Struct(_)
    ));
    let schema = ::iceberg::spec::Schema::builder()
        .with_fields(fields)
        .build();
    assert!(schema.is_ok(), "ids are unique: {schema:?}");
    let odd = r#"{"type":"record","name":"B","fields":[
        {"name":"t","type":{"type":"int","logicalType":"time-millis"}},
        {"name":"u","type":["int","string"]}]}"#;
    let (fields, skipped) = iceberg::columns(&Writer::parse(odd).unwrap()).unwrap();
    assert!(fields.is_empty());
    assert_eq!(skipped.len(), 2, "{skipped:?}");
}

#[test]
fn past_its_capacity_the_cache_forgets_the_oldest_id() {
    let registry = Arc::new(MemoryRegistry::default());
    for id in 1..=3 {
        registry.insert("orders-value", id, ORDER);
    }
    let schemas = Schemas::with_capacity(Box::new(registry.clone()), Format::Avro, 2);
    for id in [1, 2, 3, 3, 2] {
        assert!(schemas.get(id).unwrap().is_ok());
    }
    assert_eq!(registry.fetches(), 3, "each id once while it is kept");
    assert!(schemas.get(1).unwrap().is_ok());
    assert_eq!(registry.fetches(), 4, "id 1 was forgotten");
    assert_eq!(schemas.known().len(), 2);
}

#[test]
fn a_schema_file_reads_bare_datums() {
    let dir = std::env::temp_dir().join(format!("sluice-schema-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("order.avsc");
    std::fs::write(&path, ORDER).unwrap();
    let decoder = Decoder::new(Format::Avro, None, Some(&path), None)
        .unwrap()
        .unwrap();
    let datum = order("o-1", None);
    let known = decoder.prepare([Some(&datum[..])]).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&known.to_json(Some(&datum)).unwrap()).unwrap();
    assert_eq!(json["id"], "o-1");
    let (columns, _) = decoder.columns("ignored", None).unwrap();
    assert_eq!(columns.len(), 10);
    assert!(
        Decoder::new(Format::Avro, None, Some(&path), Some("Order")).is_err(),
        "message is for Protobuf"
    );
    assert!(
        Decoder::new(Format::Avro, None, None, None).is_err(),
        "a schema is needed"
    );
    assert!(
        Decoder::new(Format::Json, None, Some(&path), None).is_err(),
        "JSON has none"
    );
    assert!(
        Decoder::new(Format::Json, None, None, None)
            .unwrap()
            .is_none()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
