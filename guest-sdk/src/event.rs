use std::sync::OnceLock;

use serde::Deserialize;

use crate::codes;
use crate::verdict::Rejection;

/// One Kafka header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name.
    pub name: String,
    /// Header value; `None` for a header with a null value.
    pub value: Option<Vec<u8>>,
}

/// One Kafka event as a plugin sees it: borrowed views into the chunk the host sent.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) value: Option<&'a [u8]>,
    /// Where the value lies in the values of its chunk, whose UTF-8 is checked once for
    /// all of them, when an event first needs it; `None` outside a chunk.
    pub(crate) in_chunk: Option<InChunk<'a>>,
    pub(crate) topic: &'a str,
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) timestamp_ms: Option<i64>,
    pub(crate) headers: &'a [Header],
}

/// The values of a chunk, concatenated, with their UTF-8 check: done once for all of
/// them (one long SIMD scan costs less than a short one per event), and only when an event
/// first asks for its value as text (a plugin that never does pays nothing).
///
/// With them, the host's reading of each event's fields (the `scan` import), asked for once
/// per chunk, when an event is first parsed.
#[derive(Debug)]
pub(crate) struct ChunkValues<'a> {
    bytes: &'a [u8],
    /// The number of events of the chunk.
    events: usize,
    text: OnceLock<Option<&'a str>>,
    fields: OnceLock<Option<Scanned>>,
}

/// The host's reading of a chunk's events: for each event, its fields' first number in
/// `spans` and their count (`None`: not read by the host).
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    events: Vec<Option<(u32, u32)>>,
    spans: Vec<u32>,
}

impl Scanned {
    /// The host's answer, in the WIT layout; `None` when its lists do not match `events`
    /// events (the host breaking the contract: the plugin reads the values itself).
    // Natively only the tests make one: the host's answer comes through the Wasm import.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn new(counts: &[i32], spans: Vec<u32>, events: usize) -> Option<Self> {
        if counts.len() != events {
            return None;
        }
        let mut at = 0u32;
        let events = counts
            .iter()
            .map(|&n| {
                let n = u32::try_from(n).ok()?;
                let first = at;
                at = at.checked_add(n.checked_mul(4)?)?;
                Some((first, n))
            })
            .collect();
        (at as usize == spans.len()).then_some(Scanned { events, spans })
    }

    fn of(&self, event: usize) -> Option<&[u32]> {
        let (first, count) = (*self.events.get(event)?)?;
        self.spans.get(first as usize..(first + count * 4) as usize)
    }
}

impl<'a> ChunkValues<'a> {
    pub(crate) fn new(bytes: &'a [u8], events: usize) -> Self {
        ChunkValues {
            bytes,
            events,
            text: OnceLock::new(),
            fields: OnceLock::new(),
        }
    }

    /// The values with the host's reading of their fields already at hand (for tests).
    #[cfg(test)]
    pub(crate) fn scanned(bytes: &'a [u8], scanned: Scanned) -> Self {
        let values = ChunkValues::new(bytes, scanned.events.len());
        let _ = values.fields.set(Some(scanned));
        values
    }

    #[inline(always)]
    fn text(&self) -> Option<&'a str> {
        *self
            .text
            .get_or_init(|| simdutf8::basic::from_utf8(self.bytes).ok())
    }

    /// Where the fields of event `event` lie in its value, if the host read them.
    #[inline(always)]
    fn fields(&self, event: usize) -> Option<&[u32]> {
        self.fields
            .get_or_init(|| crate::scan::fields(self.events))
            .as_ref()?
            .of(event)
    }
}

/// Where an event's value lies in its chunk's values, and which event of the chunk it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InChunk<'a> {
    pub(crate) values: &'a ChunkValues<'a>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) event: usize,
}

impl<'a> Event<'a> {
    /// An event with the given value and no key, headers or timestamp, on partition 0 at
    /// offset 0 of topic `""`. For unit tests and benchmarks; the host builds the real ones.
    pub fn new(value: &'a [u8]) -> Self {
        Event {
            key: None,
            value: Some(value),
            in_chunk: None,
            topic: "",
            partition: 0,
            offset: 0,
            timestamp_ms: None,
            headers: &[],
        }
    }

    /// This event with a key.
    pub fn with_key(mut self, key: &'a [u8]) -> Self {
        self.key = Some(key);
        self
    }

    /// This event with the given topic, partition and offset.
    pub fn with_position(mut self, topic: &'a str, partition: i32, offset: i64) -> Self {
        self.topic = topic;
        self.partition = partition;
        self.offset = offset;
        self
    }

    /// This event with a Kafka timestamp, in milliseconds since the Unix epoch.
    pub fn with_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// This event with headers.
    pub fn with_headers(mut self, headers: &'a [Header]) -> Self {
        self.headers = headers;
        self
    }

    /// The record key; `None` for a null key.
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The record value; `None` for a null value (a tombstone).
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    /// The topic the event was read from.
    pub fn topic(&self) -> &'a str {
        self.topic
    }

    /// The partition the event was read from.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The event's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The Kafka timestamp in milliseconds since the Unix epoch, if the record has one.
    pub fn timestamp_ms(&self) -> Option<i64> {
        self.timestamp_ms
    }

    /// All headers, in the order the producer wrote them.
    pub fn headers(&self) -> &'a [Header] {
        self.headers
    }

    /// The value of the first header with this name. `Some(None)` means the header is
    /// present with a null value.
    pub fn header(&self, name: &str) -> Option<Option<&'a [u8]>> {
        self.headers
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.value.as_deref())
    }

    /// The value as UTF-8 text. A null value is rejected with [`codes::NULL_VALUE`], invalid
    /// UTF-8 with [`codes::INVALID_UTF8`].
    pub fn value_str(&self) -> Result<&'a str, Rejection> {
        if let Some(text) = self.chunk_text() {
            return Ok(text);
        }
        let bytes = self.value_bytes()?;
        std::str::from_utf8(bytes).map_err(|e| {
            Rejection::new(codes::INVALID_UTF8, format!("the value is not UTF-8: {e}"))
        })
    }

    /// Parses the value as JSON into `T`.
    ///
    /// Fields of `T` may borrow from the event (`&'a str`, `Cow<'a, str>` with
    /// `#[serde(borrow)]`, `&'a serde_json::value::RawValue`). Fields of the JSON that `T`
    /// does not name are ignored, unless `T` says otherwise.
    ///
    /// The SDK parses with its own fast path first (fewer loops and calls, which cost more
    /// in a plugin) and hands whatever it does not handle to serde_json, so values and
    /// errors are always serde_json's.
    ///
    /// Errors become rejections: a syntax error, or a value of the wrong overall shape, is
    /// [`codes::MALFORMED_JSON`]; a field of the wrong type is
    /// [`codes::INVALID_FIELD_TYPE`] naming the field (`items[2].price` for nested ones);
    /// a null value is [`codes::NULL_VALUE`].
    #[inline(always)]
    pub fn json<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        let text = self.json_text()?;
        // The fast path (see `json.rs`) decides most values, from the host's reading of
        // the fields where there is one; whatever it leaves goes to serde_json, without
        // path tracking (which allocates for every field name); only a value that fails
        // is parsed a third time to find the offending field.
        let mut complete = false;
        let fast = match self.scanned() {
            Some(spans) => crate::json::from_spans(text, spans, &mut complete),
            None => crate::json::from_str(text, &mut complete),
        };
        match fast {
            Ok(value) if complete => Ok(value),
            _ => slow_json(text),
        }
    }

    /// Where the value's fields lie, if the host read them.
    #[inline(always)]
    fn scanned(&self) -> Option<&'a [u32]> {
        let at = self.in_chunk?;
        at.values.fields(at.event)
    }

    /// The value as text for the JSON parsers. UTF-8 is checked once for the whole value
    /// with SIMD (WebAssembly SIMD in a plugin), not string by string inside the parser;
    /// in a plugin, once for the whole chunk.
    #[inline(always)]
    fn json_text(&self) -> Result<&'a str, Rejection> {
        match self.chunk_text() {
            Some(text) => Ok(text),
            None => self.check_json_text(),
        }
    }

    /// The value as text, if its chunk is valid UTF-8 and the value is cut from it at
    /// character boundaries (then it is valid UTF-8 itself; `str::get` checks the
    /// boundaries).
    #[inline(always)]
    fn chunk_text(&self) -> Option<&'a str> {
        let at = self.in_chunk?;
        at.values.text()?.get(at.start..at.end)
    }

    #[inline(never)]
    fn check_json_text(&self) -> Result<&'a str, Rejection> {
        let bytes = self.value_bytes()?;
        simdutf8::basic::from_utf8(bytes).map_err(|_| {
            Rejection::new(
                codes::MALFORMED_JSON,
                "malformed JSON value: not valid UTF-8",
            )
        })
    }

    fn value_bytes(&self) -> Result<&'a [u8], Rejection> {
        self.value
            .ok_or_else(|| Rejection::new(codes::NULL_VALUE, "the event has a null value"))
    }
}

/// serde_json's reading of what the fast path left.
#[inline(never)]
fn slow_json<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, Rejection> {
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(error) => Err(explain::<T>(text.as_bytes(), error)),
    }
}

/// Parses `bytes` again with path tracking to name the field behind `error`.
#[cold]
fn explain<'a, T: Deserialize<'a>>(bytes: &'a [u8], error: serde_json::Error) -> Rejection {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(tracked) => path_error(tracked),
        Ok(_) => Rejection::new(
            codes::MALFORMED_JSON,
            format!("malformed JSON value: {error}"),
        ),
    }
}

fn path_error(error: serde_path_to_error::Error<serde_json::Error>) -> Rejection {
    let path = error.path().to_string();
    let inner = error.into_inner();
    let at_root = path == ".";
    match inner.classify() {
        serde_json::error::Category::Data if !at_root => Rejection::new(
            codes::INVALID_FIELD_TYPE,
            format!("field `{path}` has the wrong type: {inner}"),
        )
        .with_field(path),
        _ => Rejection::new(
            codes::MALFORMED_JSON,
            format!("malformed JSON value: {inner}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Item<'a> {
        #[serde(borrow)]
        name: Cow<'a, str>,
        quantity: i32,
    }

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Order<'a> {
        #[serde(borrow)]
        items: Vec<Item<'a>>,
    }

    #[test]
    fn wrong_field_type_names_the_field() {
        let event = Event::new(
            br#"{"items":[{"name":"a","quantity":1},{"name":"b","quantity":"several"}]}"#,
        );
        let err = event.json::<Order<'_>>().unwrap_err();
        assert_eq!(err.code(), codes::INVALID_FIELD_TYPE);
        assert_eq!(err.field(), Some("items[1].quantity"));
        assert!(err.message().contains("several"), "{}", err.message());
    }

    #[test]
    fn syntax_errors_and_wrong_shapes_are_malformed() {
        for bad in [
            &b"{\"items\": ["[..],
            b"\"text\"",
            b"42",
            b"{} trailing",
            b"",
        ] {
            let err = Event::new(bad).json::<Order<'_>>().unwrap_err();
            assert_eq!(
                err.code(),
                codes::MALFORMED_JSON,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
            assert_eq!(err.field(), None);
        }
    }

    #[test]
    fn null_value_and_invalid_utf8_are_rejected() {
        let mut event = Event::new(b"");
        event.value = None;
        assert_eq!(
            event.json::<Order<'_>>().unwrap_err().code(),
            codes::NULL_VALUE
        );
        assert_eq!(
            Event::new(&[0xff, 0xfe]).value_str().unwrap_err().code(),
            codes::INVALID_UTF8
        );
    }

    #[test]
    fn headers_are_found_by_name() {
        let headers = [
            Header {
                name: "a".into(),
                value: Some(b"1".to_vec()),
            },
            Header {
                name: "b".into(),
                value: None,
            },
        ];
        let event = Event::new(b"{}").with_headers(&headers);
        assert_eq!(event.header("a"), Some(Some(&b"1"[..])));
        assert_eq!(event.header("b"), Some(None));
        assert_eq!(event.header("c"), None);
    }
}
