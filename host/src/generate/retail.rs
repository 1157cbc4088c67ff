//! The retail tutorial's 18-field events, and the rule an invalid one breaks.

use std::fmt::Write;

use super::{Common, EventKind, SplitMix64, rfc3339};

const DEVICES: [&str; 3] = ["desktop", "mobile", "tablet"];
const BROWSERS: [&str; 5] = ["Chrome", "Safari", "Firefox", "Edge", "Samsung Internet"];
const SOURCES: [&str; 5] = ["direct", "organic_search", "paid_search", "email", "social"];
const QUERIES: [&str; 4] = ["trail mug", "kettle", "warm socks", "headlamp"];
/// A cart quantity, by a draw in `0..3`.
const QUANTITIES: [&str; 3] = ["1", "2", "3"];

/// The texts of a retail event that an invalid event may break.
struct RetailTexts {
    event_time: String,
    with_user: bool,
    quantity: &'static str,
    event_type: &'static str,
    price: &'static str,
}

/// How an invalid retail event breaks its rule.
#[derive(PartialEq, Eq)]
enum Broken {
    /// One of its texts.
    Text,
    /// Its JSON stops after `"event_time":`.
    CutShort,
}

impl RetailTexts {
    /// Breaks rule `rule` (a draw in `0..6`); rule 0, and a rule the event type cannot
    /// break (it has no quantity or no price), drop `user_id`.
    fn break_rule(&mut self, rule: u64, event_type: &str) -> Broken {
        let has_quantity = matches!(event_type, "add_to_cart" | "remove_from_cart");
        let has_price = has_quantity || matches!(event_type, "product_view" | "purchase");
        match rule {
            1 if has_quantity => self.quantity = "\"several\"",
            2 => self.event_time = "yesterday".into(),
            3 => self.event_type = "wishlist_add",
            4 if has_price => self.price = "-5.00",
            5 => return Broken::CutShort,
            _ => self.with_user = false,
        }
        Broken::Text
    }
}

/// An event of the retail tutorial, keyed by session.
pub(super) fn retail_event(
    r: &mut SplitMix64,
    invalid_share: f64,
    c: &Common,
) -> (String, String, EventKind) {
    let key = format!("sess_{}", c.session);
    let mut texts = RetailTexts {
        event_time: rfc3339(c.time),
        with_user: true,
        quantity: QUANTITIES[r.below(3) as usize],
        event_type: c.event_type,
        price: c.product.3,
    };
    let invalid = r.chance(invalid_share);
    if invalid && texts.break_rule(r.below(6), c.event_type) == Broken::CutShort {
        let json = format!("{{\"event_id\":\"evt_{:09}\",\"event_time\":", c.n);
        return (key, json, c.kind(invalid));
    }
    (key, retail_json(r, c, &texts), c.kind(invalid))
}

/// The JSON of a retail event: the fields every event has, then those of its type.
fn retail_json(r: &mut SplitMix64, c: &Common, texts: &RetailTexts) -> String {
    let device = DEVICES[r.below(3) as usize];
    let browser = BROWSERS[r.below(5) as usize];
    let source = SOURCES[r.below(5) as usize];
    let (n, session) = (c.n, c.session);
    let mut json = String::with_capacity(512);
    let _ = write!(
        json,
        "{{\"event_id\":\"evt_{n:09}\",\"event_time\":\"{}\",",
        texts.event_time
    );
    if texts.with_user {
        let _ = write!(json, "\"user_id\":\"user_{}\",", c.user);
    }
    let _ = write!(
        json,
        "\"session_id\":\"sess_{session}\",\"event_type\":\"{}\",\
         \"page_url\":\"https://retail.example/{}\",\"referrer_url\":null,",
        texts.event_type,
        page(c.event_type, c.product.0)
    );
    write_type_fields(&mut json, r, c, texts);
    let _ = write!(
        json,
        "\"device_type\":\"{device}\",\"browser\":\"{browser}\",\"traffic_source\":\"{source}\"}}"
    );
    json
}

/// The fields that only some event types have (a search draws its query).
fn write_type_fields(json: &mut String, r: &mut SplitMix64, c: &Common, texts: &RetailTexts) {
    let (product_id, product_name, category, _) = c.product;
    let (n, session, price) = (c.n, c.session, texts.price);
    match c.event_type {
        "search" => {
            let q = QUERIES[r.below(4) as usize];
            let _ = write!(json, "\"search_query\":\"{q}\",");
        }
        "product_view" | "add_to_cart" | "remove_from_cart" => {
            let _ = write!(
                json,
                "\"product_id\":\"{product_id}\",\"product_name\":\"{product_name}\",\"category\":\"{category}\",\"price\":{price},"
            );
            if c.event_type != "product_view" {
                let _ = write!(
                    json,
                    "\"cart_id\":\"cart_{session}\",\"quantity\":{},",
                    texts.quantity
                );
            }
        }
        "checkout_start" => {
            let _ = write!(json, "\"cart_id\":\"cart_{session}\",");
        }
        "purchase" => {
            let _ = write!(json, "\"order_id\":\"ord_{n:09}\",\"price\":{price},");
        }
        _ => {}
    }
}

fn page(event_type: &str, product_id: &str) -> String {
    match event_type {
        "search" => "search".into(),
        "product_view" | "add_to_cart" | "remove_from_cart" => format!("products/{product_id}"),
        "checkout_start" => "checkout".into(),
        "purchase" => "checkout/done".into(),
        _ => String::new(),
    }
}
