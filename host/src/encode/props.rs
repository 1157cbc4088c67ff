//! Randomised properties of the encoder (proptest): typed rows come back as they were
//! written, any bytes are encoded or refused (never a panic, every input accounted for
//! once), and what serde_json refuses is refused. `PROPTEST_CASES` cases each (256 by
//! default); `scripts/fuzz` runs them for as long as it is asked to.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::decimal;

/// One column of each kind the encoder fills, all optional, in this order.
const COLUMNS: [(&str, PrimitiveType); 10] = [
    ("s", PrimitiveType::String),
    ("b", PrimitiveType::Boolean),
    ("i", PrimitiveType::Int),
    ("l", PrimitiveType::Long),
    ("f", PrimitiveType::Float),
    ("d", PrimitiveType::Double),
    (
        "dec",
        PrimitiveType::Decimal {
            precision: 10,
            scale: 2,
        },
    ),
    ("dt", PrimitiveType::Date),
    ("ts", PrimitiveType::Timestamp),
    ("tz", PrimitiveType::Timestamptz),
];

fn encoder() -> Encoder {
    let fields: Vec<_> = COLUMNS
        .iter()
        .zip(1..)
        .map(|((name, ty), id)| {
            Arc::new(NestedField::optional(
                id,
                *name,
                Type::Primitive(ty.clone()),
            ))
        })
        .collect();
    let schema = Schema::builder().with_fields(fields).build().unwrap();
    Encoder::new(&schema, &[]).unwrap()
}

/// A row of typed values (`None`: null or absent).
#[derive(Debug, Clone)]
struct Row {
    s: Option<String>,
    b: Option<bool>,
    i: Option<i32>,
    l: Option<i64>,
    f: Option<f32>,
    d: Option<f64>,
    /// Unscaled, at scale 2; written as a number or as a string.
    dec: Option<(i64, bool)>,
    dt: Option<i32>,
    ts: Option<(i64, bool)>,
    /// Microseconds and the zone's offset in minutes.
    tz: Option<(i64, i32)>,
    /// Fields the table does not have.
    extra: Vec<(String, Value)>,
    /// Whether a null is written (`"x": null`) or the field left out.
    explicit_nulls: bool,
}

/// Microseconds of years 2 to 9998, where every zone's local time is a 4-digit year.
const MICROS: std::ops::Range<i64> = -62_104_060_800_000_000..253_339_228_800_000_000;

fn row() -> impl Strategy<Value = Row> {
    let scalars = (
        proptest::option::of(any::<String>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<i32>()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(any::<f32>().prop_filter("finite", |f| f.is_finite())),
        proptest::option::of(any::<f64>().prop_filter("finite", |f| f.is_finite())),
    );
    let kinds = (
        proptest::option::of((-9_999_999_999i64..=9_999_999_999, any::<bool>())),
        proptest::option::of(-719_162i32..2_932_896),
        proptest::option::of((MICROS, any::<bool>())),
        proptest::option::of((MICROS, -14 * 60..=14 * 60)),
        proptest::collection::vec(("x_[a-z]{0,6}", json_value()), 0..4),
        any::<bool>(),
    );
    (scalars, kinds).prop_map(
        |((s, b, i, l, f, d), (dec, dt, ts, tz, extra, explicit_nulls))| Row {
            s,
            b,
            i,
            l,
            f,
            d,
            dec,
            dt,
            ts,
            tz,
            extra,
            explicit_nulls,
        },
    )
}

/// Any JSON value, for fields the table lacks and for columns given the wrong type.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{0,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

impl Row {
    /// The row as a JSON object, fields in the table's order then the extra ones.
    fn json(&self) -> String {
        let text = |v: Value| v.to_string();
        let micros = |m: i64| chrono::DateTime::from_timestamp_micros(m).unwrap();
        let fields: [Option<String>; 10] = [
            self.s.clone().map(|s| text(Value::String(s))),
            self.b.map(|b| b.to_string()),
            self.i.map(|i| i.to_string()),
            self.l.map(|l| l.to_string()),
            self.f.map(|f| text(Value::from(f64::from(f)))),
            self.d.map(|d| text(Value::from(d))),
            self.dec.map(|(v, quoted)| {
                let t = decimal::format_decimal(i128::from(v), 2);
                if quoted { format!("\"{t}\"") } else { t }
            }),
            self.dt.map(|days| {
                let date = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()
                    + chrono::Duration::days(i64::from(days));
                format!("\"{}\"", date.format("%Y-%m-%d"))
            }),
            self.ts.map(|(m, spaced)| {
                let format = if spaced {
                    "%Y-%m-%d %H:%M:%S%.6f"
                } else {
                    "%Y-%m-%dT%H:%M:%S%.6f"
                };
                format!("\"{}\"", micros(m).naive_utc().format(format))
            }),
            self.tz.map(|(m, minutes)| {
                let zone = chrono::FixedOffset::east_opt(minutes * 60).unwrap();
                let local = micros(m).with_timezone(&zone);
                format!(
                    "\"{}\"",
                    local.to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
                )
            }),
        ];
        let mut parts: Vec<String> = COLUMNS
            .iter()
            .zip(fields)
            .filter_map(|((name, _), v)| match v {
                Some(v) => Some(format!("\"{name}\":{v}")),
                None => self.explicit_nulls.then(|| format!("\"{name}\":null")),
            })
            .collect();
        for (key, value) in &self.extra {
            parts.push(format!("{}:{value}", Value::String(key.clone())));
        }
        format!("{{{}}}", parts.join(","))
    }
}

/// Checks that row `r` of `batch` holds `row`'s values.
fn assert_holds(batch: &RecordBatch, r: usize, row: &Row) {
    let c = |i: usize| batch.column(i);
    let value = |i: usize| (!c(i).is_null(r)).then_some(());
    assert_eq!(
        value(0).map(|()| c(0).as_string::<i32>().value(r).to_string()),
        row.s
    );
    assert_eq!(value(1).map(|()| c(1).as_boolean().value(r)), row.b);
    assert_eq!(
        value(2).map(|()| c(2).as_primitive::<Int32Type>().value(r)),
        row.i
    );
    assert_eq!(
        value(3).map(|()| c(3).as_primitive::<Int64Type>().value(r)),
        row.l
    );
    let f = value(4).map(|()| c(4).as_primitive::<Float32Type>().value(r));
    assert_eq!(f.map(f32::to_bits), row.f.map(f32::to_bits));
    let d = value(5).map(|()| c(5).as_primitive::<Float64Type>().value(r));
    assert_eq!(d, row.d);
    let dec = value(6).map(|()| c(6).as_primitive::<Decimal128Type>().value(r));
    assert_eq!(dec, row.dec.map(|(v, _)| i128::from(v)));
    assert_eq!(
        value(7).map(|()| c(7).as_primitive::<Date32Type>().value(r)),
        row.dt
    );
    let ts = value(8).map(|()| c(8).as_primitive::<TimestampMicrosecondType>().value(r));
    assert_eq!(ts, row.ts.map(|(m, _)| m));
    let tz = value(9).map(|()| c(9).as_primitive::<TimestampMicrosecondType>().value(r));
    assert_eq!(tz, row.tz.map(|(m, _)| m));
}

/// A text damaged: cut at `cut` (if given), then `insertions` put in, each at its place.
fn damaged(text: String, cut: Option<usize>, insertions: Vec<(usize, Vec<u8>)>) -> Vec<u8> {
    let mut bytes = text.into_bytes();
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    for (at, piece) in insertions {
        let at = at % (bytes.len() + 1);
        bytes.splice(at..at, piece);
    }
    bytes
}

/// What is put into a damaged text: JSON's own characters and words, escapes (a lone
/// surrogate too), bytes that are not UTF-8, or any two bytes.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let words: Vec<Vec<u8>> = [
        "\"", "\\", "{", "}", "[", ",", ":", "-", "e", "1", " ", "null", "\\u", "\\ud800",
    ]
    .iter()
    .map(|w| w.as_bytes().to_vec())
    .chain([vec![0xff], vec![0xc3]])
    .collect();
    prop_oneof![
        proptest::sample::select(words),
        proptest::collection::vec(any::<u8>(), 1..3),
    ]
}

/// Inputs of every kind: rows, damaged rows, objects of any values under the columns'
/// names, and arbitrary bytes.
fn any_input() -> impl Strategy<Value = Vec<u8>> {
    let names = proptest::sample::select(COLUMNS.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    prop_oneof![
        row().prop_map(|r| r.json().into_bytes()),
        (
            row(),
            proptest::option::of(any::<usize>()),
            proptest::collection::vec((any::<usize>(), piece()), 0..3),
        )
            .prop_map(|(r, cut, insertions)| damaged(r.json(), cut, insertions)),
        proptest::collection::btree_map(names, json_value(), 0..6).prop_map(|m| Value::Object(
            m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        )
        .to_string()
        .into_bytes()),
        numbers(),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

/// Objects whose numeric columns hold numbers of any shape: long, with exponents of any
/// size, negative zero.
fn numbers() -> impl Strategy<Value = Vec<u8>> {
    let number = "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,24})?([eE][+-]?[0-9]{1,5})?";
    let columns = proptest::sample::subsequence(vec!["i", "l", "f", "d", "dec"], 1..=5);
    (columns, proptest::collection::vec(number, 5)).prop_map(|(columns, numbers)| {
        let fields: Vec<String> = columns
            .iter()
            .zip(numbers)
            .map(|(c, n)| format!("\"{c}\":{n}"))
            .collect();
        format!("{{{}}}", fields.join(",")).into_bytes()
    })
}

/// Whether `bytes` are JSON: UTF-8 text (RFC 8259) of one value, by serde_json's syntax
/// (which, like the encoder, does not limit the numbers or the escapes of values it skips).
fn is_json(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok()
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

proptest! {
    #[test]
    fn typed_rows_come_back_as_they_were_written(rows in proptest::collection::vec(row(), 1..8)) {
        let texts: Vec<String> = rows.iter().map(Row::json).collect();
        let out = encoder().encode(texts.iter().map(|t| Some(t.as_bytes())), 0).unwrap();
        prop_assert!(out.errors.is_empty(), "{:?} for {:?}", out.errors, texts);
        // Every field the table lacks is counted, once per occurrence.
        let extra: usize = rows.iter().map(|r| r.extra.len()).sum();
        prop_assert_eq!(out.dropped.values().sum::<u64>(), extra as u64);
        for (r, row) in rows.iter().enumerate() {
            assert_holds(&out.batch, r, row);
        }
    }

    #[test]
    fn any_bytes_are_encoded_or_refused_once(inputs in proptest::collection::vec(any_input(), 1..8)) {
        let out = encoder().encode(inputs.iter().map(|i| Some(i.as_slice())), 0).unwrap();
        prop_assert_eq!(out.batch.num_rows(), out.rows.len());
        let mut seen: Vec<usize> = out.rows.iter().copied().chain(out.errors.iter().map(|(i, _)| *i)).collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..inputs.len()).collect::<Vec<_>>());
        for (i, input) in inputs.iter().enumerate() {
            let refused = out.errors.iter().find(|(e, _)| *e == i).map(|(_, error)| error);
            let code = refused.map(|e| e.code);
            let shown = String::from_utf8_lossy(input);
            if !is_json(input) {
                // What is not JSON is refused.
                prop_assert!(refused.is_some(), "accepted {:?}", shown);
            } else if input.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
                prop_assert_eq!(code, Some("not_an_object"), "{:?}", shown);
            } else if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(input) {
                // An object serde_json reads is never refused as malformed, and its strings
                // are read as serde_json reads them. (One it only skips, with a lone
                // surrogate or a number beyond f64, may go either way.)
                prop_assert!(!matches!(code, Some("malformed_json" | "not_an_object")), "{:?}: {:?}", shown, refused);
                if let (None, Some(Value::String(s))) = (refused, fields.get("s")) {
                    let r = out.rows.iter().position(|r| *r == i).unwrap();
                    prop_assert_eq!(out.batch.column(0).as_string::<i32>().value(r), s.as_str());
                }
            }
        }
    }
}
