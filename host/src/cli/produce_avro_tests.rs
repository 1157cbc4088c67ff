//! `sluice produce --format avro` against sluice's own Avro reader: the values decode to
//! the generator's JSON events (`format::json::to_json`, the schema from a
//! `MemoryRegistry` the produce side registered it in).

use std::sync::Arc;

use super::produce::{ProduceArgs, value_encoder as encoder};
use super::{Command, parse};
use crate::format::{
    Decoder, Format, FormatError, MemoryRegistry, Registry, Schemas, json::to_json,
};
use crate::generate::avro::{AvroEncoder, schema_text};
use crate::generate::{EventKind, Generator, GeneratorConfig, Shape};

/// What `sluice produce --topic t EXTRA` parses to, or clap's message.
fn parsed(extra: &[&str]) -> Result<ProduceArgs, String> {
    let args = ["sluice", "produce", "--topic", "t"]
        .iter()
        .chain(extra)
        .copied();
    match parse(args).map_err(|e| e.to_string())?.cli.command {
        Command::Produce(args) => Ok(args),
        _ => panic!("parsed as produce"),
    }
}

/// The JSON `json` with every field an Avro reader gives back: absent ones as null,
/// times as instants (the reader writes no `.000`), numbers as f64.
fn normalised(json: &str, fields: &[String]) -> serde_json::Value {
    let object: serde_json::Value = serde_json::from_str(json).unwrap();
    let normal = |v: &serde_json::Value| match v.as_str().map(chrono::DateTime::parse_from_rfc3339)
    {
        Some(Ok(t)) => serde_json::json!(t.timestamp_micros()),
        _ => v.as_f64().map_or(v.clone(), |f| serde_json::json!(f)),
    };
    fields
        .iter()
        .map(|f| {
            (
                f.clone(),
                normal(object.get(f).unwrap_or(&serde_json::Value::Null)),
            )
        })
        .collect()
}

/// `sluice produce --format avro`'s values decode, with the schema it registers, to the
/// events the generator made as JSON; the invalid events Avro cannot express are
/// truncated datums that sluice's reader refuses, never valid events.
#[test]
fn avro_values_decode_to_the_generated_json_events() {
    for shape in [Shape::Retail, Shape::Analytics] {
        let registry = Arc::new(MemoryRegistry::default());
        let subject = "clicks-value";
        let avro = crate::format::SchemaType::Avro;
        let id =
            Registry::register(&*registry, subject, schema_text(shape).unwrap(), avro).unwrap();
        let encoder = AvroEncoder::new(shape).unwrap().with_id(id);
        let apache_avro::Schema::Record(record) = encoder.schema() else {
            panic!("a record")
        };
        let fields: Vec<String> = record.fields.iter().map(|f| f.name.clone()).collect();
        let decoder = Decoder::Registry(Schemas::new(Box::new(registry.clone()), Format::Avro));
        let config = GeneratorConfig {
            shape,
            invalid_share: 0.3,
            ..GeneratorConfig::default()
        };
        let (mut valid, mut truncated, mut invalid) = (0, 0, 0);
        for event in Generator::new(config).take(2000) {
            let avro = encoder.encode(&event.value);
            let known = decoder.prepare([Some(&avro.value[..])]).unwrap();
            let decoded = known
                .writer(Some(&avro.value))
                .and_then(|(writer, datum)| to_json(writer, datum));
            invalid += u32::from(event.kind == EventKind::Invalid);
            if avro.truncated.is_some() {
                truncated += 1;
                assert_eq!(event.kind, EventKind::Invalid, "{}", event.value);
                assert!(
                    matches!(decoded, Err(FormatError::Undecodable(_))),
                    "{}: {decoded:?}",
                    event.value
                );
                continue;
            }
            let json = String::from_utf8(decoded.unwrap()).unwrap();
            assert_eq!(
                normalised(&json, &fields),
                normalised(&event.value, &fields),
                "{}",
                event.value
            );
            valid += u32::from(event.kind != EventKind::Invalid);
        }
        assert!(
            valid > 1000 && truncated > 100,
            "{shape:?}: {valid} {truncated}"
        );
        assert!(truncated <= invalid, "{shape:?}");
    }
}

#[test]
fn avro_needs_a_registry_and_a_shape_with_a_schema() {
    let error = parsed(&["--format", "avro"]).unwrap_err();
    assert!(error.contains("--schema-registry"), "{error}");
    let error = parsed(&["--format", "xml"]).unwrap_err();
    assert!(error.contains("json, avro or protobuf"), "{error}");
    let args = parsed(&[
        "--format",
        "avro",
        "--schema-registry",
        "http://127.0.0.1:9",
        "--shape",
        "products",
    ])
    .unwrap();
    let error = encoder(&args).unwrap_err().to_string();
    assert!(error.contains("retail and analytics"), "{error}");
}
