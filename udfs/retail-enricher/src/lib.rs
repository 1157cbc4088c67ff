//! Enriches retail clickstream events from two lookup tables:
//! - `tier` and `country` from the user's profile (table `profiles`, keyed by `user_id`;
//!   `sluice produce --shape customers` feeds it);
//! - `category` and `list_price` from the product catalog (table `products`, keyed by
//!   `product_id`; `sluice produce --shape products` feeds it).
//!
//! A key the table lacks (or an event without `user_id` or `product_id`) leaves those
//! fields absent: the event is never rejected for it. An event that gains nothing is kept
//! unchanged. A lookup the host refuses (a table the stage is not granted) rejects the
//! event with `lookup_failed` and the host's message; a value that is not a JSON object is
//! rejected with `malformed_json`.
//!
//! Parameters: `profiles-table` and `products-table` rename the tables (defaults
//! `profiles` and `products`). The stage must be granted both:
//! `grants = { lookups = ["profiles", "products"] }`.
//!
//! The enricher answers with a patch of the fields it adds (the host applies it while it
//! encodes the event, so the event is neither printed again here nor parsed again there),
//! and announces its lookups ahead ([`Processor::prefetch`]), so the SDK asks the host for
//! a whole chunk's keys in one call per table.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sluice_guest::{
    Event, IntoVerdict, Lookups, Params, Patch, Processor, Rejection, Verdict, codes,
};

/// The fields of an event this plugin reads: the two keys, and the four it may add (to
/// leave alone those that already have the value). The rest of the event is skipped.
#[derive(Deserialize)]
struct Fields<'a> {
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
        event.json()
    }

    /// A key field's text, when it is a string (as ids are).
    fn key(raw: Option<&'a RawValue>) -> Option<Cow<'a, str>> {
        serde_json::from_str(raw?.get()).ok()
    }
}

/// Whether the event's own value `raw` is the JSON value `value`.
fn same(raw: Option<&RawValue>, value: &Value) -> bool {
    raw.is_some_and(|raw| serde_json::from_str::<Value>(raw.get()).is_ok_and(|v| &v == value))
}

/// The fields of a profile this plugin copies.
#[derive(Deserialize)]
struct Profile {
    tier: Option<Value>,
    country: Option<Value>,
}

/// The fields of a product this plugin copies.
#[derive(Deserialize)]
struct Product {
    category: Option<Value>,
    list_price: Option<Value>,
}

/// The enricher, with the names of its tables.
pub struct RetailEnricher {
    profiles: String,
    products: String,
}

impl RetailEnricher {
    /// Adds what the tables know about the event's user and product.
    pub fn enrich(&self, event: &Event<'_>) -> Result<Verdict, Rejection> {
        let fields = Fields::of(event)?;
        let mut added = Vec::with_capacity(4);
        if let Some(user) = Fields::key(fields.user_id)
            && let Some(p) = sluice_guest::lookup::<Profile>(&self.profiles, user.as_ref())?
        {
            added.extend([
                ("tier", p.tier, fields.tier),
                ("country", p.country, fields.country),
            ]);
        }
        if let Some(product) = Fields::key(fields.product_id)
            && let Some(p) = sluice_guest::lookup::<Product>(&self.products, product.as_ref())?
        {
            added.extend([
                ("category", p.category, fields.category),
                ("list_price", p.list_price, fields.list_price),
            ]);
        }
        let mut patch = Patch::new();
        for (name, value, own) in added {
            if let Some(value) = value.filter(|v| !v.is_null())
                && !same(own, &value)
            {
                patch.set(name, &value)?;
            }
        }
        Ok(Verdict::patch(patch))
    }
}

impl Processor for RetailEnricher {
    fn init(params: &Params) -> Result<Self, String> {
        params.only(&["profiles-table", "products-table"])?;
        Ok(RetailEnricher {
            profiles: params.get("profiles-table").unwrap_or("profiles").into(),
            products: params.get("products-table").unwrap_or("products").into(),
        })
    }

    fn prefetch(&mut self, event: &Event<'_>, lookups: &mut Lookups) {
        // An event that cannot be read is rejected by `process`; nothing to ask for here.
        let Ok(fields) = Fields::of(event) else {
            return;
        };
        if let Some(user) = Fields::key(fields.user_id) {
            lookups.want(&self.profiles, user.as_ref());
        }
        if let Some(product) = Fields::key(fields.product_id) {
            lookups.want(&self.products, product.as_ref());
        }
    }

    fn process(&mut self, event: &Event<'_>) -> Verdict {
        self.enrich(event).into_verdict()
    }
}

sluice_guest::export!(processor RetailEnricher);

#[cfg(test)]
mod tests {
    use serde_json::json;
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
            testing::host_calls().lookup,
            5,
            "one call per lookup, alone"
        );
        tables();
        let chunked = testing::process_chunk(&mut enricher(), &events);
        assert_eq!(
            testing::host_calls(),
            testing::HostCalls {
                lookup: 0,
                lookup_many: 2
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
        let broken = enricher().enrich(&Event::new(b"[1]")).unwrap_err();
        assert_eq!(broken.code(), sluice_guest::codes::MALFORMED_JSON);
    }
}
