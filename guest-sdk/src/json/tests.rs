//! The fast path against serde_json: every value it gives is serde_json's.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Debug;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{find_special, from_str};

/// A seeded pseudo-random sequence (xorshift64).
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Every input the fast path accepts gives serde_json's value; returns whether it did.
fn agrees<'a, T>(text: &'a str) -> bool
where
    T: Deserialize<'a> + PartialEq + Debug,
{
    let mut complete = false;
    let fast = from_str::<T>(text, &mut complete).ok().filter(|_| complete);
    let slow = serde_json::from_str::<T>(text);
    if let Some(fast) = &fast {
        assert_eq!(
            Some(fast),
            slow.as_ref().ok(),
            "the fast path accepted {text:?}, serde_json says {slow:?}"
        );
    }
    fast.is_some()
}

/// A typed event: borrowed strings, numbers, a raw value, a list, an enum, nesting
/// (the randomised properties read it too).
#[derive(Deserialize, PartialEq, Debug)]
pub(super) struct Click<'a> {
    #[serde(borrow)]
    event_id: Option<Cow<'a, str>>,
    user_id: Option<String>,
    quantity: Option<i32>,
    price: Option<f64>,
    #[serde(borrow)]
    raw: Option<Raw<'a>>,
    tags: Option<Vec<String>>,
    kind: Option<EventType>,
    nested: Option<Box<Nested>>,
}

#[derive(Deserialize, Debug)]
struct Raw<'a>(#[serde(borrow)] &'a RawValue);

impl PartialEq for Raw<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(rename_all = "snake_case")]
enum EventType {
    PageView,
    Purchase,
}

#[derive(Deserialize, PartialEq, Debug)]
struct Nested {
    a: u8,
    b: Option<bool>,
}

#[test]
fn agrees_with_serde_json_on_what_it_accepts() {
    let accepted = [
        r#"{"event_id":"e1","user_id":"u1","quantity":2,"price":18.99}"#,
        r#" { "event_id" : "e1" , "unknown" : [1, {"x": null}, "s", true, -3.5] } "#,
        r#"{"raw": {"a": [1, 2]} , "price": 0}"#,
        r#"{"raw":"text","tags":["a","b"],"kind":"page_view"}"#,
        r#"{"nested":{"a":255,"b":false},"price":-0.25}"#,
        r#"{"raw":-1.5E+3,"unknown":[1e9,2E-7,0.1234567890123456789e1]}"#,
        r#"{"event_id":"caf\u00e9 \"quoted\" \\ \/ \n","user_id":"\ud83d\ude00"}"#,
        r#"{"event_id":"a string that is longer than sixteen bytes, with more to come"}"#,
        r#"{"quantity":null,"price":null,"kind":null}"#,
        // Characters of several bytes right after and before the quotes.
        r#"{"event_id":"é","user_id":"日本語のテキスト、十六バイトより長い","raw":"€"}"#,
        r#"{"é":"x","unknown":"😀😀😀😀😀","event_id":"ü\n日"}"#,
        "{}",
    ];
    for text in accepted {
        assert!(agrees::<Click<'_>>(text), "not accepted: {text}");
    }
}

#[test]
fn leaves_what_it_does_not_handle_or_what_is_wrong_to_serde_json() {
    let left = [
        // Invalid JSON.
        "",
        "{",
        r#"{"event_id":"e1",}"#,
        r#"{"event_id":"e1" "user_id":"u1"}"#,
        r#"{"event_id":"e1"} x"#,
        r#"{"quantity":01}"#,
        r#"{"quantity":1.}"#,
        r#"{"price":.5}"#,
        r#"{"event_id":"bad \x escape"}"#,
        r#"{"event_id":"lone \ud800 surrogate"}"#,
        "{\"event_id\":\"tab\tinside\"}",
        r#"{"unknown":tru}"#,
        r#"{"unknown":[1,]}"#,
        r#"{"unknown":1e}"#,
        r#"{"raw":1E+}"#,
        r#"{"unknown":1.e5}"#,
        // Valid, but the type refuses it (serde_json gives the error).
        r#"{"quantity":"2"}"#,
        r#"{"quantity":2.5}"#,
        r#"{"quantity":4294967296}"#,
        r#"{"nested":{"a":256}}"#,
        r#"{"kind":"refund"}"#,
        r#"{"event_id":"e1","event_id":"e2"}"#,
        // Valid, and left to serde_json on purpose.
        r#"{"price":1e3}"#,
        r#"{"price":0.1234567890123456}"#,
        r#"{"quantity":-0}"#,
        r#"["e1","u1",null,null,null,null,null,null]"#,
    ];
    for text in left {
        assert!(!agrees::<Click<'_>>(text), "accepted: {text}");
    }
    // A visitor that stops before the closing bracket (a pair from a longer array).
    assert!(agrees::<(u8, u8)>("[1, 2]"));
    for text in ["[1,2,3]", "[1,2", "[[1,2,3],4]", "[1,2]]", "{\"a\":[1,2]"] {
        assert!(!agrees::<(u8, u8)>(text), "accepted: {text}");
    }
    assert!(!agrees::<((u8, u8), u8)>("[[1,2,3],4]"));
    assert!(agrees::<((u8, u8), u8)>("[[1,2],4]"));
}

#[test]
fn any_value_agrees() {
    for text in [
        r#"{"a":[1,-2,3.25,"x",true,false,null,{"b":{}}],"c":"d"}"#,
        "[]",
        "  \"just a string\"  ",
        "18446744073709551615",
        "-9223372036854775808",
    ] {
        assert!(agrees::<Value>(text), "not accepted: {text}");
    }
    assert!(agrees::<BTreeMap<String, Value>>(
        r#"{"key":1,"b":"\"2\""}"#
    ));
    assert!(!agrees::<BTreeMap<String, Value>>(r#"{"k\"ey":1}"#));
    assert!(!agrees::<BTreeMap<u32, Value>>(r#"{"1":1}"#));
    assert!(!agrees::<Value>("18446744073709551616"));
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(!agrees::<Value>(&deep));
}

/// Mutates JSON documents at random (bytes replaced by JSON's own characters, cuts,
/// white space, escapes) and checks that whatever the fast path accepts, serde_json
/// reads the same way.
#[test]
fn agrees_with_serde_json_on_mutated_documents() {
    let seeds = [
        r#"{"event_id":"evt_0001","user_id":"user_42","quantity":3,"price":18.99,"raw":[1,{"a":"b"}],"tags":["x","y"],"kind":"purchase","nested":{"a":7,"b":true},"page_url":"/products/trail-mug?ref=home"}"#,
        r#"{"event_id":"a\"b","price":-0.5,"raw":null,"unknown":{"deep":[[],{},"",0]}}"#,
    ];
    let pieces: [&str; 24] = [
        "\"",
        "\\",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "0",
        "7",
        "-",
        ".",
        "e",
        "E",
        "+",
        " ",
        "\t",
        "\n",
        "\\u00e9",
        "\\ud83d\\ude00",
        "\\/",
        "null",
        "é",
        "\u{1}",
    ];
    let mut random = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut next = |bound: usize| (random() % bound as u64) as usize;
    let (mut accepted, mut total) = (0, 0);
    for seed in seeds {
        for _ in 0..4000 {
            let mut text = seed.to_string();
            for _ in 0..1 + next(3) {
                let mut at = next(text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                match next(4) {
                    0 => text.truncate(at),
                    1 => text.insert_str(at, pieces[next(pieces.len())]),
                    _ => {
                        let mut end = (at + 1).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(at..end, pieces[next(pieces.len())]);
                    }
                }
            }
            total += 1;
            accepted += usize::from(agrees::<Click<'_>>(&text));
            agrees::<Value>(&text);
        }
    }
    // Both outcomes occur, so both were checked.
    assert!(
        accepted > total / 20 && accepted < total,
        "{accepted} of {total}"
    );
}

/// Decimals of up to 15 digits read to the same f64 as serde_json's (which divides the
/// digits by a power of ten, exact up to there).
#[test]
fn decimals_read_as_serde_json_reads_them() {
    let mut next = xorshift(0x0123_4567_89ab_cdef);
    for _ in 0..20_000 {
        let int = next() % 100_000_000;
        let frac_digits = 1 + (next() % 7) as usize;
        let frac = next() % 10u64.pow(frac_digits as u32);
        let sign = if next() % 2 == 0 { "-" } else { "" };
        let text = format!("{sign}{int}.{frac:0frac_digits$}");
        assert!(agrees::<f64>(&text), "not accepted: {text}");
    }
}

#[test]
fn decimal_values_are_read_only_when_serde_json_reads_them_as_f64() {
    assert!(
        !super::keeps_number_text(),
        "built without arbitrary_precision"
    );
    assert!(agrees::<Value>(r#"{"price":18.50}"#));
}

#[test]
fn finds_special_bytes_at_every_position() {
    for len in 0..40 {
        for at in 0..len {
            for special in [b'"', b'\\', 0x1f, 0] {
                let mut bytes = vec![b'a'; len];
                bytes[at] = special;
                for from in 0..=at {
                    assert_eq!(find_special(&bytes, from), Some(at), "{len} {at} {from}");
                }
                assert_eq!(find_special(&bytes, at + 1), None, "{len} {at}");
            }
        }
        let plain = vec![0x7fu8; len];
        assert_eq!(find_special(&plain, 0), None);
        let high = vec![0xc3u8; len];
        assert_eq!(find_special(&high, 0), None);
    }
}
