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

use serde::Deserialize;
use serde_json::{Map, Value};
use sluice_guest::{Event, IntoVerdict, Params, Processor, Rejection, Verdict};

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
        let mut fields: Map<String, Value> = event.json()?;
        let mut added = Vec::with_capacity(4);
        if let Some(user) = fields.get("user_id").and_then(Value::as_str)
            && let Some(p) = sluice_guest::lookup::<Profile>(&self.profiles, user)?
        {
            added.extend([("tier", p.tier), ("country", p.country)]);
        }
        if let Some(product) = fields.get("product_id").and_then(Value::as_str)
            && let Some(p) = sluice_guest::lookup::<Product>(&self.products, product)?
        {
            added.extend([("category", p.category), ("list_price", p.list_price)]);
        }
        let mut changed = false;
        for (name, value) in added {
            if let Some(value) = value.filter(|v| !v.is_null())
                && fields.get(name) != Some(&value)
            {
                fields.insert(name.into(), value);
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
    fn a_refused_lookup_rejects_and_bad_json_is_malformed() {
        tables();
        testing::deny("products");
        let error = enriched(json!({"user_id": "user_1", "product_id": "P100"})).unwrap_err();
        assert!(error.starts_with("lookup_failed: not_granted: "), "{error}");
        let broken = enricher().enrich(&Event::new(b"[1]")).unwrap_err();
        assert_eq!(broken.code(), sluice_guest::codes::MALFORMED_JSON);
    }
}
