//! Deterministic clickstream events, for demos, tests and benchmarks: the 18-field schema of
//! the retail tutorial, or the 5-field events of the real-time analytics tutorial. The same
//! seed gives the same events.

use std::fmt::Write;

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorConfig {
    /// Seed of the pseudo-random sequence.
    pub seed: u64,
    /// Share of events (0.0 to 1.0) that break one validation rule.
    pub invalid_share: f64,
    /// Share of events (0.0 to 1.0) whose event time is 30 to 90 seconds behind the others
    /// (mobile devices and flaky networks deliver late).
    pub late_share: f64,
    /// Share of events (0.0 to 1.0) that repeat one of the last 20 events exactly
    /// (at-least-once producers resend).
    pub duplicate_share: f64,
    /// Event time of the first event, seconds since the Unix epoch. Event time moves on
    /// one second every ten events.
    pub start_epoch_seconds: i64,
    /// Which events.
    pub shape: Shape,
}

/// The shape of generated events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// The retail tutorial's 18 fields (`event_time`, sessions, products, prices...).
    #[default]
    Retail,
    /// The analytics tutorial's 5 fields: `event_id`, `user_id` (50 users), `event_type`
    /// (page_view, add_to_cart, purchase), `timestamp` (RFC 3339 with milliseconds) and
    /// `page`. An invalid event has a `timestamp` that is not a time.
    Analytics,
    /// Profile updates of the analytics tutorial's 50 users, keyed by `user_id` (the
    /// other side of its stream-stream join, or a compacted lookup topic): `user_id`,
    /// `tier` (bronze, silver, gold, platinum), `country` (two-letter code) and
    /// `updated_at` (RFC 3339 with milliseconds, on the events' clock). The first 50 give
    /// every user a profile, in order; later ones change a random user's tier or country.
    /// An invalid update has an `updated_at` that is not a time.
    Profiles,
    /// The retail shape's product catalog, keyed by `product_id` (a compacted lookup
    /// topic): `product_id`, `product_name`, `category` and `list_price` (a JSON number),
    /// one product after another, round and round. An invalid entry has a negative
    /// `list_price`.
    Products,
    /// Profiles of the retail shape's 50,000 users (`user_0` to `user_49999`), keyed by
    /// `user_id` (a compacted lookup topic): `user_id`, `tier`, `country` and `updated_at`,
    /// as in `profiles`. The first 50,000 give every user a profile, in order; later ones
    /// change a random user's tier or country.
    Customers,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            seed: 42,
            invalid_share: 0.05,
            late_share: 0.0,
            duplicate_share: 0.0,
            start_epoch_seconds: 1_767_960_000,
            shape: Shape::Retail,
        }
    }
}

/// What kind of event was generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A valid event, on time.
    Valid,
    /// A valid event whose event time is 30 to 90 seconds late.
    Late,
    /// An event that breaks one validation rule.
    Invalid,
    /// An exact copy of a recent event.
    Duplicate,
}

/// One generated event: its Kafka key (the session) and its JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedEvent {
    /// Kafka key: the session id, so that a session stays in order on one partition.
    pub key: String,
    /// The JSON value.
    pub value: String,
    /// What kind of event it is.
    pub kind: EventKind,
}

/// How many recent events a duplicate is drawn from.
const RECENT: usize = 20;

/// Event types with their weights (per thousand), in funnel order.
const EVENT_TYPES: [(&str, u64); 7] = [
    ("page_view", 400),
    ("search", 150),
    ("product_view", 200),
    ("add_to_cart", 100),
    ("remove_from_cart", 30),
    ("checkout_start", 70),
    ("purchase", 50),
];
const DEVICES: [&str; 3] = ["desktop", "mobile", "tablet"];
const BROWSERS: [&str; 5] = ["Chrome", "Safari", "Firefox", "Edge", "Samsung Internet"];
const SOURCES: [&str; 5] = ["direct", "organic_search", "paid_search", "email", "social"];
const PRODUCTS: [(&str, &str, &str, &str); 4] = [
    ("P100", "Trail Mug", "drinkware", "18.00"),
    ("P200", "Camp Kettle", "cookware", "42.50"),
    ("P300", "Wool Socks", "apparel", "12.99"),
    ("P400", "Headlamp", "gear", "29.95"),
];
const QUERIES: [&str; 4] = ["trail mug", "kettle", "warm socks", "headlamp"];
/// A cart quantity, by a draw in `0..3`.
const QUANTITIES: [&str; 3] = ["1", "2", "3"];
const ANALYTICS_TYPES: [&str; 3] = ["page_view", "add_to_cart", "purchase"];
/// Users of the analytics events and profiles: `user_1` to `user_50`.
const ANALYTICS_USERS: u64 = 50;
/// Users of the retail events and customers: `user_0` to `user_49999`.
const RETAIL_USERS: u64 = 50_000;
const TIERS: [&str; 4] = ["bronze", "silver", "gold", "platinum"];
const COUNTRIES: [&str; 7] = ["US", "DE", "FR", "GB", "JP", "BR", "IN"];
const ANALYTICS_PAGES: [&str; 6] = [
    "/home",
    "/products",
    "/product/1",
    "/product/2",
    "/cart",
    "/checkout",
];

/// An endless, deterministic sequence of clickstream event values (JSON text).
#[derive(Debug, Clone)]
pub struct Generator {
    rng: SplitMix64,
    config: GeneratorConfig,
    sequence: u64,
    recent: std::collections::VecDeque<GeneratedEvent>,
}

impl Generator {
    /// A generator with this configuration.
    pub fn new(config: GeneratorConfig) -> Self {
        Generator {
            rng: SplitMix64(config.seed),
            config,
            sequence: 0,
            recent: Default::default(),
        }
    }

    /// The same generator, its events numbered from `first` (`evt_…` ids; event times
    /// follow the number).
    pub fn numbered_from(mut self, first: u64) -> Self {
        self.sequence = first;
        self
    }

    /// The next event.
    pub fn next_event(&mut self) -> GeneratedEvent {
        if !self.recent.is_empty() && self.rng.chance(self.config.duplicate_share) {
            let pick = self.rng.below(self.recent.len() as u64) as usize;
            let mut copy = self.recent[pick].clone();
            copy.kind = EventKind::Duplicate;
            return copy;
        }
        let (key, value, kind) = self.fresh_event();
        let event = GeneratedEvent { key, value, kind };
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(event.clone());
        event
    }

    fn fresh_event(&mut self) -> (String, String, EventKind) {
        let n = self.sequence;
        self.sequence += 1;
        let common = Common::draw(&mut self.rng, &self.config, n);
        let invalid_share = self.config.invalid_share;
        match self.config.shape {
            Shape::Retail => retail_event(&mut self.rng, invalid_share, &common),
            Shape::Analytics => analytics_event(&mut self.rng, invalid_share, &common),
            Shape::Profiles => profile_update(&mut self.rng, invalid_share, &common, 1),
            Shape::Products => product_entry(&mut self.rng, invalid_share, &common),
            Shape::Customers => profile_update(&mut self.rng, invalid_share, &common, 0),
        }
    }
}

impl Iterator for Generator {
    type Item = GeneratedEvent;

    fn next(&mut self) -> Option<GeneratedEvent> {
        Some(self.next_event())
    }
}

/// What every event draws first, in this order, whatever its shape.
struct Common {
    /// The event's sequence number.
    n: u64,
    user: u64,
    session: u64,
    event_type: &'static str,
    /// Id, name, category and price.
    product: (&'static str, &'static str, &'static str, &'static str),
    /// Event time, seconds since the Unix epoch.
    time: i64,
    late: bool,
}

impl Common {
    fn draw(r: &mut SplitMix64, config: &GeneratorConfig, n: u64) -> Self {
        let user = r.below(RETAIL_USERS);
        let session = user * 16 + r.below(16);
        let event_type = weighted_event_type(r.below(1000));
        let product = PRODUCTS[r.below(PRODUCTS.len() as u64) as usize];
        let mut time = config.start_epoch_seconds + (n / 10) as i64;
        let late = r.chance(config.late_share);
        if late {
            time -= 30 + r.below(61) as i64;
        }
        Common {
            n,
            user,
            session,
            event_type,
            product,
            time,
            late,
        }
    }

    fn kind(&self, invalid: bool) -> EventKind {
        match (invalid, self.late) {
            (true, _) => EventKind::Invalid,
            (false, true) => EventKind::Late,
            (false, false) => EventKind::Valid,
        }
    }
}

/// The event type a draw in `0..1000` falls on, by the weights of [`EVENT_TYPES`].
fn weighted_event_type(mut pick: u64) -> &'static str {
    EVENT_TYPES
        .iter()
        .find(|(_, w)| {
            let hit = pick < *w;
            pick = pick.saturating_sub(*w);
            hit
        })
        .map_or("page_view", |(t, _)| *t)
}

/// An event of the analytics tutorial, keyed by user.
fn analytics_event(
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
fn profile_update(
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
fn product_entry(
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
fn retail_event(r: &mut SplitMix64, invalid_share: f64, c: &Common) -> (String, String, EventKind) {
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

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch.
fn rfc3339(epoch_seconds: i64) -> String {
    let days = epoch_seconds.div_euclid(86_400);
    let secs = epoch_seconds.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A small, fast, seedable pseudo-random generator (also used by tests that need
/// reproducible randomness).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.below(1_000_000) as f64) < p * 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_960_000), "2026-01-09T12:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn same_seed_same_events_and_valid_json() {
        let a: Vec<GeneratedEvent> = Generator::new(GeneratorConfig::default())
            .take(200)
            .collect();
        let b: Vec<GeneratedEvent> = Generator::new(GeneratorConfig::default())
            .take(200)
            .collect();
        assert_eq!(a, b);
        let parsed = a
            .iter()
            .filter(|e| serde_json::from_str::<serde_json::Value>(&e.value).is_ok())
            .count();
        assert!(parsed >= 190, "{parsed}");
        let clean = Generator::new(GeneratorConfig {
            invalid_share: 0.0,
            ..GeneratorConfig::default()
        });
        for e in clean.take(500) {
            assert_eq!(e.kind, EventKind::Valid);
            let v: serde_json::Value = serde_json::from_str(&e.value).unwrap();
            assert_eq!(v["session_id"], e.key.as_str());
            assert!(
                v["user_id"].is_string() && v["event_time"].as_str().unwrap().ends_with('Z'),
                "{e:?}"
            );
        }
    }

    /// Profile updates: every user gets a profile first, in order, then updates of random
    /// users on the events' clock; each is keyed by its user; invalid ones have no time.
    #[test]
    fn profiles_cover_every_user_first_then_update_them() {
        let profiles = |invalid_share| {
            Generator::new(GeneratorConfig {
                shape: Shape::Profiles,
                invalid_share,
                ..GeneratorConfig::default()
            })
        };
        let clean: Vec<GeneratedEvent> = profiles(0.0).take(400).collect();
        let users: Vec<String> = clean.iter().map(|e| e.key.clone()).collect();
        let first: Vec<String> = (1..=50).map(|u| format!("user_{u}")).collect();
        assert_eq!(users[..50], first[..]);
        let mut later = users[50..].to_vec();
        later.sort();
        later.dedup();
        assert!(
            later.len() > 30,
            "later updates spread over users: {later:?}"
        );
        assert!(later.iter().all(|u| first.contains(u)), "{later:?}");
        for e in &clean {
            assert_eq!(e.kind, EventKind::Valid);
            let v: serde_json::Value = serde_json::from_str(&e.value).unwrap();
            assert_eq!(v["user_id"], e.key.as_str());
            assert!(TIERS.contains(&v["tier"].as_str().unwrap()), "{e:?}");
            assert!(COUNTRIES.contains(&v["country"].as_str().unwrap()), "{e:?}");
            let at = v["updated_at"].as_str().unwrap();
            assert!(
                at.starts_with("2026-01-09T12:") && at.ends_with(".000Z"),
                "{at}"
            );
        }
        let invalid: Vec<GeneratedEvent> = profiles(1.0).take(5).collect();
        for e in invalid {
            assert_eq!(e.kind, EventKind::Invalid);
            assert!(e.value.contains(r#""updated_at":"not-a-time""#), "{e:?}");
        }
    }

    /// The catalog goes round by product id; customers cover every retail user first, and
    /// every retail event's user and product are keys of those tables.
    #[test]
    fn products_and_customers_are_keyed_by_the_retail_shapes_ids() {
        let shape = |shape, invalid_share| {
            Generator::new(GeneratorConfig {
                shape,
                invalid_share,
                ..GeneratorConfig::default()
            })
        };
        let products: Vec<GeneratedEvent> = shape(Shape::Products, 0.0).take(8).collect();
        let ids: Vec<&str> = products.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(ids, ["P100", "P200", "P300", "P400"].repeat(2));
        let v: serde_json::Value = serde_json::from_str(&products[1].value).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"product_id": "P200", "product_name": "Camp Kettle",
                "category": "cookware", "list_price": 42.5})
        );
        let bad = shape(Shape::Products, 1.0).next_event();
        assert_eq!(bad.kind, EventKind::Invalid);
        assert!(bad.value.ends_with(r#""list_price":-18.00}"#), "{bad:?}");

        let customers: Vec<GeneratedEvent> = shape(Shape::Customers, 0.0).take(50_010).collect();
        for (u, e) in customers[..50_000].iter().enumerate() {
            assert_eq!(e.key, format!("user_{u}"));
        }
        let last: serde_json::Value = serde_json::from_str(&customers[50_009].value).unwrap();
        assert_eq!(last["user_id"], customers[50_009].key.as_str());
        assert!(TIERS.contains(&last["tier"].as_str().unwrap()));
        assert!(COUNTRIES.contains(&last["country"].as_str().unwrap()));
        let keys: std::collections::HashSet<&str> =
            customers.iter().map(|e| e.key.as_str()).collect();
        for e in shape(Shape::Retail, 0.0).take(500) {
            let v: serde_json::Value = serde_json::from_str(&e.value).unwrap();
            assert!(keys.contains(v["user_id"].as_str().unwrap()), "{e:?}");
            if let Some(p) = v["product_id"].as_str() {
                assert!(ids.contains(&p), "{e:?}");
            }
        }
    }

    /// FNV-1a over the key, value and kind of the first 2,000 events.
    fn fingerprint(config: GeneratorConfig) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for e in Generator::new(config).take(2000) {
            let bytes = e.key.bytes().chain([0]).chain(e.value.bytes());
            for b in bytes.chain([0, e.kind as u8]) {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    /// The exact stream of each shape, with and without late, invalid (every rule) and
    /// duplicate events: a change that alters any event (an extra draw, a field moved)
    /// fails here.
    #[test]
    fn seed_42_streams_are_pinned() {
        let first = Generator::new(GeneratorConfig::default()).next_event();
        assert_eq!(first.key, "sess_406611");
        assert_eq!(
            first.value,
            concat!(
                r#"{"event_id":"evt_000000000","event_time":"2026-01-09T12:00:00Z","user_id":"user_25413","#,
                r#""session_id":"sess_406611","event_type":"remove_from_cart","#,
                r#""page_url":"https://retail.example/products/P100","referrer_url":null,"#,
                r#""product_id":"P100","product_name":"Trail Mug","category":"drinkware","price":18.00,"#,
                r#""cart_id":"cart_406611","quantity":2,"#,
                r#""device_type":"mobile","browser":"Edge","traffic_source":"direct"}"#,
            )
        );
        let shares = GeneratorConfig {
            invalid_share: 0.5,
            late_share: 0.3,
            duplicate_share: 0.1,
            ..GeneratorConfig::default()
        };
        let analytics = |config| GeneratorConfig {
            shape: Shape::Analytics,
            ..config
        };
        let fingerprints = [
            fingerprint(GeneratorConfig::default()),
            fingerprint(shares.clone()),
            fingerprint(analytics(GeneratorConfig::default())),
            fingerprint(analytics(shares)),
        ];
        assert_eq!(
            fingerprints,
            [
                0xd723_e39d_e9b0_c8b3,
                0x1863_357c_550b_7426,
                0x3351_0d8a_0c04_2408,
                0x8b32_f5fe_59dc_d2b3,
            ],
            "{fingerprints:#x?}"
        );
    }

    #[test]
    fn late_and_duplicate_events_are_marked() {
        let config = GeneratorConfig {
            late_share: 0.2,
            duplicate_share: 0.1,
            invalid_share: 0.0,
            ..GeneratorConfig::default()
        };
        let events: Vec<GeneratedEvent> = Generator::new(config).take(2000).collect();
        let count = |k| events.iter().filter(|e| e.kind == k).count();
        assert!(
            (150..250).contains(&count(EventKind::Duplicate)),
            "{}",
            count(EventKind::Duplicate)
        );
        assert!(
            (300..450).contains(&count(EventKind::Late)),
            "{}",
            count(EventKind::Late)
        );
        let id = |e: &GeneratedEvent| {
            serde_json::from_str::<serde_json::Value>(&e.value).unwrap()["event_id"].clone()
        };
        for (i, e) in events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EventKind::Duplicate)
        {
            assert!(
                events[..i]
                    .iter()
                    .rev()
                    .take(40)
                    .any(|p| p.kind != EventKind::Duplicate && id(p) == id(e))
            );
        }
    }
}
