//! Protobuf schemas compiled from `.proto` text, and messages (encoded by prost) read by
//! their indexes, as JSON.

use std::sync::Arc;

use prost::Message;
use prost_reflect::DynamicMessage;

use super::protobuf::{ProtoSchema, to_json, unindex};
use super::registry::{Reference, SchemaType};
use super::tests::framed;
use super::*;

/// The schemas of the integration tests (`tests/tests/all/protobuf.rs`).
const MONEY: &str = include_str!("../../../tests/data/proto/money.proto");

const ORDER: &str = include_str!("../../../tests/data/proto/order.proto");

pub(crate) fn schema() -> ProtoSchema {
    ProtoSchema::compile(ORDER, vec![("money.proto".into(), MONEY.into())]).unwrap()
}

/// An order message, encoded by prost from its JSON form.
pub(crate) fn order(id: &str, note: Option<&str>) -> Vec<u8> {
    let mut json = serde_json::json!({
        "order_id": id, "quantity": "5000000000", "customer": {"name": "Ann", "tier": 2},
        "tags": ["a", "b"], "placed_at": "2026-01-02T03:04:05.678901Z", "status": "PAID",
        "counts": {"x": 1, "y": 2}, "points": 7, "total": {"currency": "EUR", "units": 12},
    });
    if let Some(note) = note {
        json["note"] = note.into();
    }
    let message = schema().message(&[0]).unwrap();
    DynamicMessage::deserialize(message, json)
        .unwrap()
        .encode_to_vec()
}

#[test]
fn message_indexes_name_the_message() {
    assert_eq!(unindex(&[0x00, 9]).unwrap(), (vec![0], &[9u8][..]));
    assert_eq!(unindex(&[0x04, 0x00, 0x00]).unwrap().0, vec![0, 0]);
    assert_eq!(unindex(&[0x02, 0x02]).unwrap().0, vec![1]);
    assert!(unindex(&[]).is_err());
    assert!(unindex(&[0x7f]).is_err(), "a negative count");
    let schema = schema();
    assert_eq!(schema.message(&[0]).unwrap().full_name(), "shop.Order");
    assert_eq!(
        schema.message(&[0, 0]).unwrap().full_name(),
        "shop.Order.Customer"
    );
    assert!(schema.message(&[1]).is_none());
    assert_eq!(
        schema.named(Some("Order.Customer")).unwrap().name(),
        "Customer"
    );
    assert!(ProtoSchema::compile("syntax = \"proto3\"; message {", Vec::new()).is_err());
}

#[test]
fn a_message_reads_to_the_json_the_encoder_reads_back() {
    let message = schema().message(&[0]).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&to_json(&message, &order("o-1", None)).unwrap()).unwrap();
    assert_eq!(json["order_id"], "o-1");
    assert_eq!(
        json["quantity"], 5_000_000_000i64,
        "64-bit integers stay numbers"
    );
    assert_eq!(json["placed_at"], "2026-01-02T03:04:05.678901Z");
    assert_eq!(json["status"], "PAID");
    assert_eq!(json["points"], 7);
    assert_eq!(
        json["shelf"], 0,
        "an unset field without presence has its default"
    );
    assert!(
        json.get("note").is_none_or(serde_json::Value::is_null),
        "{json}"
    );
    let error = to_json(&message, &[0xff, 0xff]).unwrap_err();
    assert_eq!(error.code(), "undecodable");
}

#[test]
fn registered_protobuf_schemas_bring_their_references() {
    let registry = Arc::new(MemoryRegistry::default());
    registry.register_typed("money.proto", 1, MONEY, SchemaType::Protobuf, Vec::new());
    let reference = Reference {
        name: "money.proto".into(),
        subject: "money.proto".into(),
        version: 1,
    };
    registry.register_typed(
        "orders-value",
        2,
        ORDER,
        SchemaType::Protobuf,
        vec![reference],
    );
    registry.insert("avro-value", 3, r#""string""#);
    let decoder = Decoder::Registry(Schemas::new(Box::new(registry), Format::Protobuf));
    let mut good = framed(2, &[0]);
    good.extend_from_slice(&order("o-1", None));
    let avro = framed(3, &[0]);
    let known = decoder.prepare([Some(&good[..]), Some(&avro[..])]).unwrap();
    let json = known.to_json(Some(&good)).unwrap();
    assert!(
        String::from_utf8(json)
            .unwrap()
            .contains("\"currency\":\"EUR\"")
    );
    let error = known.to_json(Some(&avro)).unwrap_err();
    assert_eq!(error.code(), "unsupported_schema", "{error}");
    let (fields, _) = decoder.columns("orders-value", None).unwrap();
    assert_eq!(fields.len(), 11);
}

#[test]
fn a_schema_file_reads_bare_messages_of_its_message() {
    let dir = std::env::temp_dir().join(format!("sluice-proto-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("order.proto"), ORDER).unwrap();
    std::fs::write(dir.join("money.proto"), MONEY).unwrap();
    let path = dir.join("order.proto");
    let decoder = Decoder::new(Format::Protobuf, None, Some(&path), Some("Order"))
        .unwrap()
        .unwrap();
    let message = order("o-1", None);
    let known = decoder.prepare([Some(&message[..])]).unwrap();
    let json = String::from_utf8(known.to_json(Some(&message)).unwrap()).unwrap();
    assert!(json.contains("\"order_id\":\"o-1\""), "{json}");
    assert!(Decoder::new(Format::Protobuf, None, Some(&path), Some("Nope")).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_generators_shapes_compile_and_their_json_events_map() {
    for (text, name) in [
        (
            include_str!("../generate/retail.proto"),
            "sluice.generate.RetailEvent",
        ),
        (
            include_str!("../generate/analytics.proto"),
            "sluice.generate.AnalyticsEvent",
        ),
    ] {
        let message = ProtoSchema::compile(text, Vec::new())
            .unwrap()
            .message(&[0])
            .unwrap();
        assert_eq!(message.full_name(), name);
    }
    let retail = ProtoSchema::compile(include_str!("../generate/retail.proto"), Vec::new())
        .unwrap()
        .message(&[0])
        .unwrap();
    let event = r#"{"event_id":"evt_1","event_time":"2026-01-02T03:04:05Z","user_id":"user_1","referrer_url":null,"price":19.99,"quantity":2}"#;
    let bytes = super::protobuf::from_json(&retail, event).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&to_json(&retail, &bytes).unwrap()).unwrap();
    assert_eq!(json["event_time"], "2026-01-02T03:04:05Z");
    assert_eq!(json["price"], 19.99);
    let broken = r#"{"event_id":"evt_2","quantity":"several"}"#;
    assert!(super::protobuf::from_json(&retail, broken).is_err());
}
