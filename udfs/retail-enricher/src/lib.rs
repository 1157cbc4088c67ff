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
//! Each event makes at most two single lookups: the SDK judges one event at a time, so a
//! batched `lookup_many` per chunk is not available to a `Processor`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use sluice_guest::{Event, IntoVerdict, Params, Processor, Rejection, Verdict};

/// A field name, borrowed from the event unless it has escapes.
#[derive(Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(transparent)]
struct Name<'a>(#[serde(borrow)] Cow<'a, str>);

/// A field's value: the event's own JSON text, written back as it came, or a value added
/// from a table.
#[derive(Serialize)]
#[serde(untagged)]
enum Field<'a> {
    Raw(&'a RawValue),
    Added(Value),
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&RawValue>::deserialize(d).map(Field::Raw)
    }
}

impl Field<'_> {
    /// The value as a string, when it is one without escapes (as ids are).
    fn as_str(&self) -> Option<Cow<'_, str>> {
        match self {
            Field::Raw(raw) => serde_json::from_str::<Cow<'_, str>>(raw.get()).ok(),
            Field::Added(value) => value.as_str().map(Cow::Borrowed),
        }
    }

    /// Whether it is the same JSON value as `value`.
    fn is(&self, value: &Value) -> bool {
        match self {
            Field::Raw(raw) => serde_json::from_str::<Value>(raw.get()).is_ok_and(|v| &v == value),
            Field::Added(added) => added == value,
        }
    }
}

/// The event's fields, sorted by name (as serde_json's own map writes them). Only the two
/// keys are decoded: the rest stays the event's text, so a rewrite copies it rather than
/// parsing and printing every value.
type Fields<'a> = BTreeMap<Name<'a>, Field<'a>>;

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
        let mut fields: Fields<'_> = event.json()?;
        let field = |fields: &Fields<'_>, name: &'static str| {
            let value = fields.get(&Name(Cow::Borrowed(name)))?.as_str()?;
            Some(value.into_owned())
        };
        let mut added = Vec::with_capacity(4);
        if let Some(user) = field(&fields, "user_id")
            && let Some(p) = sluice_guest::lookup::<Profile>(&self.profiles, &user)?
        {
            added.extend([("tier", p.tier), ("country", p.country)]);
        }
        if let Some(product) = field(&fields, "product_id")
            && let Some(p) = sluice_guest::lookup::<Product>(&self.products, &product)?
        {
            added.extend([("category", p.category), ("list_price", p.list_price)]);
        }
        let mut changed = false;
        for (name, value) in added {
            let name = Name(Cow::Borrowed(name));
            if let Some(value) = value.filter(|v| !v.is_null())
                && !fields.get(&name).is_some_and(|f| f.is(&value))
            {
                fields.insert(name, Field::Added(value));
                changed = true;
            }
        }
        Ok(if changed {
            Verdict::rewrite_json(&fields)
        } else {
            Verdict::Keep
        })
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
            Ok(Verdict::Rewrite(v)) => Ok(serde_json::from_slice(&v).unwrap()),
            Ok(Verdict::Keep) => Ok(value),
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
    fn escaped_names_and_values_are_read_and_written_back() {
        tables();
        let text = r#"{"user_id":"user_\u0031","say \"hi\"":"a\nb","n":2.50,"product_id":"P100"}"#;
        let Verdict::Rewrite(bytes) = enricher().enrich(&Event::new(text.as_bytes())).unwrap()
        else {
            panic!("not rewritten")
        };
        let out = String::from_utf8(bytes).unwrap();
        assert!(
            out.contains(r#""n":2.50"#),
            "values are copied as they came: {out}"
        );
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value,
            json!({"user_id": "user_1", "say \"hi\"": "a\nb", "n": 2.5, "product_id": "P100",
                "tier": "gold", "country": "DE", "category": "drinkware", "list_price": 18.0})
        );
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
