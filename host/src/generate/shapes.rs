//! The shapes of the real-time analytics tutorial and of the lookup tables: analytics
//! events, profile updates, products and customers.

use super::{Common, EventKind, PRODUCTS, RETAIL_USERS, SplitMix64, rfc3339};

const ANALYTICS_TYPES: [&str; 3] = ["page_view", "add_to_cart", "purchase"];
/// Users of the analytics events and profiles: `user_1` to `user_50`.
const ANALYTICS_USERS: u64 = 50;
pub(super) const TIERS: [&str; 4] = ["bronze", "silver", "gold", "platinum"];
pub(super) const COUNTRIES: [&str; 7] = ["US", "DE", "FR", "GB", "JP", "BR", "IN"];
const ANALYTICS_PAGES: [&str; 6] = [
    "/home",
    "/products",
    "/product/1",
    "/product/2",
    "/cart",
    "/checkout",
];

/// An event of the analytics tutorial, keyed by user.
pub(super) fn analytics_event(
    r: &mut SplitMix64,
    invalid_share: f64,
    c: &Common,
) -> (String, String, EventKind) {
    let invalid = r.chance(invalid_share);
    let n = c.n;
    let user = 1 + c.user % ANALYTICS_USERS;
    let ty = ANALYTICS_TYPES[r.below(3) as usize];
    let page = ANALYTICS_PAGES[r.below(6) as usize];
    let timestamp = if invalid {
        "not-a-time".to_string()
    } else {
        rfc3339(c.time).replace('Z', ".000Z")
    };
    let json = format!(
        "{{\"event_id\":\"evt_{n:09}\",\"user_id\":\"user_{user}\",\"event_type\":\"{ty}\",\"timestamp\":\"{timestamp}\",\"page\":\"{page}\"}}"
    );
    (format!("user_{user}"), json, c.kind(invalid))
}

/// A profile update of one of the users of the analytics tutorial (`first_user` 1: users
/// 1 to 50) or of the retail shape (`first_user` 0: users 0 to 49,999), keyed by user.
pub(super) fn profile_update(
    r: &mut SplitMix64,
    invalid_share: f64,
    c: &Common,
    first_user: u64,
) -> (String, String, EventKind) {
    let invalid = r.chance(invalid_share);
    let users = if first_user == 0 {
        RETAIL_USERS
    } else {
        ANALYTICS_USERS
    };
    // The first updates create the users' profiles in order; later ones pick a user.
    let user = first_user + if c.n < users { c.n } else { c.user % users };
    let tier = TIERS[r.below(TIERS.len() as u64) as usize];
    let country = COUNTRIES[r.below(COUNTRIES.len() as u64) as usize];
    let updated_at = if invalid {
        "not-a-time".to_string()
    } else {
        rfc3339(c.time).replace('Z', ".000Z")
    };
    let json = format!(
        "{{\"user_id\":\"user_{user}\",\"tier\":\"{tier}\",\"country\":\"{country}\",\"updated_at\":\"{updated_at}\"}}"
    );
    (format!("user_{user}"), json, c.kind(invalid))
}

/// An entry of the retail shape's product catalog, keyed by product.
pub(super) fn product_entry(
    r: &mut SplitMix64,
    invalid_share: f64,
    c: &Common,
) -> (String, String, EventKind) {
    let invalid = r.chance(invalid_share);
    let (id, name, category, price) = PRODUCTS[(c.n % PRODUCTS.len() as u64) as usize];
    let sign = if invalid { "-" } else { "" };
    let json = format!(
        "{{\"product_id\":\"{id}\",\"product_name\":\"{name}\",\"category\":\"{category}\",\"list_price\":{sign}{price}}}"
    );
    (id.to_string(), json, c.kind(invalid))
}
