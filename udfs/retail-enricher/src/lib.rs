//! Enriches retail clickstream events from two lookup tables:
//! - `tier` and `country` from the user's profile (table `profiles`, keyed by `user_id`;
//!   `sluice produce --shape customers` feeds it);
//! - `category` and `list_price` from the product catalog (table `products`, keyed by
//!   `product_id`; `sluice produce --shape products` feeds it).
//!
//! A key the table lacks (or an event without `user_id` or `product_id`) leaves those
//! fields absent: the event is never rejected for it. An event that gains nothing is kept
//! unchanged. A lookup the host refuses (a table the stage is not granted) rejects the
//! event with `lookup_failed` and the host's message; an event whose value is not a JSON
//! object is rejected with `malformed_json`.
//!
//! Parameters: `profiles-table` and `products-table` rename the tables (defaults
//! `profiles` and `products`). The stage must be granted both:
//! `grants = { lookups = ["profiles", "products"] }`.
//!
//! The enricher answers with a patch of the fields it adds (the host applies it while it
//! encodes the event, so the event is neither printed again here nor parsed again there),
//! and announces its lookups ahead ([`Processor::prefetch`]), so the SDK asks the host for
//! a whole chunk's keys in one call per table. It asks for the four fields it copies, not
//! for whole values ([`lookup_fields`]): the host reads the tables' JSON, the plugin never
//! parses it, and copies each field's text into the patch as it came.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_guest::{
    Event, Fields as TableFields, IntoVerdict, Lookups, Params, Patch, Processor, Rejection,
    Verdict, codes, lookup_fields,
};

/// The fields of an event this plugin reads, as their JSON text: the two keys, and the
/// four it may add (to leave alone those that already have the value).
#[derive(Clone, Copy, Default)]
struct Fields<'a>([Option<&'a str>; 6]);

const USER_ID: usize = 0;
const PRODUCT_ID: usize = 1;
/// The fields this plugin adds, by their index in [`Fields`], and where they come from.
const TIER: usize = 2;
const COUNTRY: usize = 3;
const CATEGORY: usize = 4;
const LIST_PRICE: usize = 5;

/// How serde reads them; the rest of the event is skipped.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow)]
    user_id: Option<&'a RawValue>,
    #[serde(borrow)]
    product_id: Option<&'a RawValue>,
    #[serde(borrow)]
    tier: Option<&'a RawValue>,
    #[serde(borrow)]
    country: Option<&'a RawValue>,
    #[serde(borrow)]
    category: Option<&'a RawValue>,
    #[serde(borrow)]
    list_price: Option<&'a RawValue>,
}

impl<'a> Fields<'a> {
    /// The event's fields; a value that is not a JSON object is `malformed_json`.
    fn of(event: &Event<'a>) -> Result<Self, Rejection> {
        if !event.value_str()?.trim_start().starts_with('{') {
            return Err(Rejection::new(
                codes::MALFORMED_JSON,
                "the value is not a JSON object",
            ));
        }
        let w: Wire<'a> = event.json()?;
        let text = |raw: Option<&'a RawValue>| raw.map(RawValue::get);
        Ok(Fields([
            text(w.user_id),
            text(w.product_id),
            text(w.tier),
            text(w.country),
            text(w.category),
            text(w.list_price),
        ]))
    }

    /// A key field's text, when it is a string (as ids are): borrowed from the event when
    /// it has no escapes (serde_json would copy it into a `String`). The text is a JSON
    /// value the SDK read, so a string without a backslash is its characters in quotes.
    fn key(&self, i: usize) -> Option<Cow<'a, str>> {
        let text = self.0[i]?;
        match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
            Some(inner) if !inner.as_bytes().contains(&b'\\') => Some(Cow::Borrowed(inner)),
            _ => serde_json::from_str(text).ok(),
        }
    }

    /// Where each field lies in `value`, to find them again without reading it.
    fn spans(&self, value: &str) -> [Option<(usize, usize)>; 6] {
        let base = value.as_ptr() as usize;
        self.0.map(|f| {
            f.map(|f| {
                (
                    f.as_ptr() as usize - base,
                    f.as_ptr() as usize - base + f.len(),
                )
            })
        })
    }

    /// The fields at `spans` of `value`.
    fn at(value: &'a str, spans: &[Option<(usize, usize)>; 6]) -> Option<Self> {
        let mut fields = Fields::default();
        for (field, span) in fields.0.iter_mut().zip(spans) {
            if let Some((from, to)) = *span {
                *field = Some(value.get(from..to)?);
            }
        }
        Some(fields)
    }
}

/// The fields of a profile this plugin copies, and where they go in [`Fields`].
const PROFILE: [(&str, usize); 2] = [("tier", TIER), ("country", COUNTRY)];
/// The fields of a product this plugin copies.
const PRODUCT: [(&str, usize); 2] = [("category", CATEGORY), ("list_price", LIST_PRICE)];

/// What `prefetch` read of one event, for `process` to use rather than read it again:
/// the event's partition, offset and value (its address), and its fields' spans (`None`
/// for an event it could not read, kept so that the next events stay matched).
type Read = ((i32, i64, usize), Option<[Option<(usize, usize)>; 6]>);

/// The enricher, with the names of its tables.
pub struct RetailEnricher {
    profiles: String,
    products: String,
    /// What `prefetch` read of the chunk's events, in order.
    read: VecDeque<Read>,
}

impl RetailEnricher {
    /// Adds what the tables know about the event's user and product.
    pub fn enrich(&self, event: &Event<'_>) -> Result<Verdict, Rejection> {
        self.enrich_fields(Fields::of(event)?)
    }

    fn enrich_fields(&self, fields: Fields<'_>) -> Result<Verdict, Rejection> {
        let mut patch = Patch::new();
        let mut copy = |from: Option<TableFields<'_>>, copies: &[(&str, usize)]| {
            let Some(from) = from else { return };
            for &(name, i) in copies {
                let own = fields.0[i].map(str::trim);
                if let Some(value) = from.get(name).filter(|v| !v.is_null())
                    && own != Some(value.text())
                {
                    patch.set_field(name, value);
                }
            }
        };
        if let Some(user) = fields.key(USER_ID) {
            lookup_fields(&self.profiles, user.as_ref(), &names(&PROFILE), |f| {
                copy(f, &PROFILE)
            })?;
        }
        if let Some(product) = fields.key(PRODUCT_ID) {
            lookup_fields(&self.products, product.as_ref(), &names(&PRODUCT), |f| {
                copy(f, &PRODUCT)
            })?;
        }
        Ok(Verdict::patch(patch))
    }

    /// The fields `prefetch` read of `event`, if it is the next one it read.
    fn prefetched<'a>(&mut self, event: &Event<'a>) -> Option<Fields<'a>> {
        let (at, spans) = self.read.pop_front()?;
        if at != place(event) {
            self.read.clear();
            return None;
        }
        Fields::at(event.value_str().ok()?, &spans?)
    }
}

/// Where `event` is: its partition, offset and the address of its value.
fn place(event: &Event<'_>) -> (i32, i64, usize) {
    let value = event.value().map_or(0, |v| v.as_ptr() as usize);
    (event.partition(), event.offset(), value)
}

/// The names of the fields `copies` copies.
fn names<const N: usize>(copies: &[(&'static str, usize); N]) -> [&'static str; N] {
    copies.map(|(name, _)| name)
}

impl Processor for RetailEnricher {
    fn init(params: &Params) -> Result<Self, String> {
        params.only(&["profiles-table", "products-table"])?;
        Ok(RetailEnricher {
            profiles: params.get("profiles-table").unwrap_or("profiles").into(),
            products: params.get("products-table").unwrap_or("products").into(),
            read: VecDeque::new(),
        })
    }

    /// Reads the event's keys once: announced for the chunk's lookups, and kept for
    /// `process` (the SDK processes a chunk's events in the order it prefetched them).
    fn prefetch(&mut self, event: &Event<'_>, lookups: &mut Lookups) {
        // An event that cannot be read is rejected by `process`; nothing to ask for here.
        let (Ok(fields), Ok(value)) = (Fields::of(event), event.value_str()) else {
            self.read.push_back((place(event), None));
            return;
        };
        if let Some(user) = fields.key(USER_ID) {
            lookups.want_fields(&self.profiles, user.as_ref(), &names(&PROFILE));
        }
        if let Some(product) = fields.key(PRODUCT_ID) {
            lookups.want_fields(&self.products, product.as_ref(), &names(&PRODUCT));
        }
        self.read
            .push_back((place(event), Some(fields.spans(value))));
    }

    fn process(&mut self, event: &Event<'_>) -> Verdict {
        let verdict = match self.prefetched(event) {
            Some(fields) => self.enrich_fields(fields),
            None => self.enrich(event),
        };
        verdict.into_verdict()
    }
}

sluice_guest::export!(processor RetailEnricher);

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use sluice_guest::testing::{self, Table};

    use super::*;

    fn enricher() -> RetailEnricher {
        RetailEnricher::init(&Params::new(vec![])).unwrap()
    }

    fn tables() {
        testing::lookups([
            (
                "profiles",
                Table::new().json("user_1", &json!({"user_id": "user_1", "tier": "gold", "country": "DE", "updated_at": "2026-01-09T12:00:00.000Z"})),
            ),
            (
                "products",
                Table::new().json("P100", &json!({"product_id": "P100", "product_name": "Trail Mug", "category": "drinkware", "list_price": 18.0})),
            ),
        ]);
    }

    fn enriched(value: Value) -> Result<Value, String> {
        let bytes = value.to_string().into_bytes();
        match enricher().enrich(&Event::new(&bytes)) {
            Ok(Verdict::Patch(patch)) => {
                Ok(serde_json::from_slice(&patch.apply(&bytes).unwrap()).unwrap())
            }
            Ok(Verdict::Keep) => Ok(value),
            Ok(Verdict::Rewrite(_)) => panic!("the enricher patches, never rewrites"),
            Ok(Verdict::Reject(r)) | Err(r) => Err(format!("{}: {}", r.code(), r.message())),
        }
    }

    #[test]
    fn adds_the_users_and_the_products_fields() {
        tables();
        let event =
            json!({"event_id": "e1", "user_id": "user_1", "product_id": "P100", "category": "old"});
        assert_eq!(
            enriched(event).unwrap(),
            json!({"event_id": "e1", "user_id": "user_1", "product_id": "P100",
                "tier": "gold", "country": "DE", "category": "drinkware", "list_price": 18.0})
        );
    }

    #[test]
    fn missing_keys_leave_the_fields_absent() {
        tables();
        let unknown = json!({"user_id": "user_9", "product_id": "P999"});
        let bytes = unknown.to_string().into_bytes();
        assert_eq!(
            enricher().enrich(&Event::new(&bytes)).unwrap(),
            Verdict::Keep
        );
        let anonymous = json!({"product_id": "P100"});
        assert_eq!(
            enriched(anonymous).unwrap(),
            json!({"product_id": "P100", "category": "drinkware", "list_price": 18.0})
        );
    }

    #[test]
    fn escaped_names_and_values_are_read_and_only_the_new_fields_patched() {
        tables();
        let text = r#"{"user_id":"user_\u0031","say \"hi\"":"a\nb","n":2.50,"product_id":"P100","tier":"gold"}"#;
        let Verdict::Patch(patch) = enricher().enrich(&Event::new(text.as_bytes())).unwrap() else {
            panic!("not patched")
        };
        assert_eq!(
            patch.fields().collect::<Vec<_>>(),
            vec![
                ("country", r#""DE""#),
                ("category", r#""drinkware""#),
                ("list_price", "18.0")
            ],
            "the tier the event already has is left alone"
        );
        let out = String::from_utf8(patch.apply(text.as_bytes()).unwrap()).unwrap();
        assert!(
            out.contains(r#""n":2.50"#),
            "values are kept as they came: {out}"
        );
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value,
            json!({"user_id": "user_1", "say \"hi\"": "a\nb", "n": 2.5, "product_id": "P100",
                "tier": "gold", "country": "DE", "category": "drinkware", "list_price": 18.0})
        );
    }

    #[test]
    fn a_chunk_asks_for_each_key_once_per_table_and_is_answered_alike() {
        tables();
        let values = [
            json!({"user_id": "user_1", "product_id": "P100"}),
            json!({"user_id": "user_1", "product_id": "P999"}),
            json!({"user_id": 7}),
            json!({"product_id": "P100", "category": "drinkware"}),
        ];
        let bytes: Vec<Vec<u8>> = values.iter().map(|v| v.to_string().into_bytes()).collect();
        let events: Vec<Event<'_>> = bytes.iter().map(|b| Event::new(b)).collect();
        let singly: Vec<Verdict> = events
            .iter()
            .map(|e| enricher().enrich(e).unwrap())
            .collect();
        assert_eq!(
            testing::host_calls().lookup_fields,
            5,
            "one call per lookup, alone"
        );
        tables();
        let chunked = testing::process_chunk(&mut enricher(), &events);
        assert_eq!(
            testing::host_calls(),
            testing::HostCalls {
                lookup_fields: 2,
                ..testing::HostCalls::default()
            },
            "one call per table for the chunk"
        );
        assert_eq!(chunked, singly);
        let kinds: Vec<bool> = singly
            .iter()
            .map(|v| matches!(v, Verdict::Patch(_)))
            .collect();
        assert_eq!(kinds, [true, true, false, true]);
    }

    #[test]
    fn a_refused_lookup_rejects_and_bad_json_is_malformed() {
        tables();
        testing::deny("products");
        let error = enriched(json!({"user_id": "user_1", "product_id": "P100"})).unwrap_err();
        assert!(error.starts_with("lookup_failed: not_granted: "), "{error}");
        testing::lookups([("profiles", Table::new().raw("user_2", "{not json"))]);
        let error = enriched(json!({"user_id": "user_2"})).unwrap_err();
        assert!(
            error.starts_with("lookup_failed: malformed_value: "),
            "{error}"
        );
        assert!(error.contains("\"user_2\""), "{error}");
        let broken = enricher().enrich(&Event::new(b"[1]")).unwrap_err();
        assert_eq!(broken.code(), sluice_guest::codes::MALFORMED_JSON);
    }
}
