//! Deterministic clickstream events, for demos, tests and benchmarks: the 18-field schema of
//! the retail tutorial, or the 5-field events of the real-time analytics tutorial. The same
//! seed gives the same events. They are JSON text; [`avro`] writes the retail and analytics
//! events as Avro datums (`sluice produce --format avro`).

pub mod avro;
mod retail;
mod rng;
mod shapes;
#[cfg(test)]
mod tests;

use self::retail::retail_event;
pub use self::rng::SplitMix64;
use self::shapes::{analytics_event, product_entry, profile_update};

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
const PRODUCTS: [(&str, &str, &str, &str); 4] = [
    ("P100", "Trail Mug", "drinkware", "18.00"),
    ("P200", "Camp Kettle", "cookware", "42.50"),
    ("P300", "Wool Socks", "apparel", "12.99"),
    ("P400", "Headlamp", "gear", "29.95"),
];
/// Users of the retail events and customers: `user_0` to `user_49999`.
const RETAIL_USERS: u64 = 50_000;

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
