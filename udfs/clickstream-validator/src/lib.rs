//! Validates retail clickstream events (the 18-field schema of the retail tutorial).
//!
//! Rules, checked in this order; the first violation rejects the event:
//! 1. the value is a JSON object whose known fields have the right JSON types
//!    (`malformed_json`, `invalid_field_type`; unknown fields are ignored);
//! 2. `event_id`, `event_time`, `user_id`, `session_id`, `event_type`, `page_url`,
//!    `device_type`, `browser`, `traffic_source` are present (`missing_required_field`) and
//!    not blank (`blank_required_field`);
//! 3. `event_time` is an RFC 3339 timestamp (`invalid_event_time`);
//! 4. `event_type` is one of the allowed types (`invalid_event_type`);
//! 5. the fields an event type needs are present and not blank
//!    (`missing_event_type_field`): search → `search_query`; product_view → `product_id`;
//!    add_to_cart and remove_from_cart → `product_id`, `cart_id`, `quantity`;
//!    checkout_start → `cart_id`; purchase → `order_id`;
//! 6. `quantity`, when present, is a JSON integer from 1 to 2147483647 (`invalid_quantity`);
//! 7. `price`, when present, is a number (or numeric string) ≥ 0 with at most two decimals
//!    that fits DECIMAL(10,2) (`invalid_price`).
//!
//! Parameter `allowed-event-types`: a comma-separated list replacing the default event types.

mod rfc3339;

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_guest::{Event, Params, Processor, Rejection, Verdict};

pub use rfc3339::is_rfc3339;

/// Rejection codes of this plugin (besides the SDK's `malformed_json` and
/// `invalid_field_type`).
pub mod codes {
    /// A required field is absent or null.
    pub const MISSING_REQUIRED_FIELD: &str = "missing_required_field";
    /// A required string field is empty or only white space.
    pub const BLANK_REQUIRED_FIELD: &str = "blank_required_field";
    /// `event_time` is not an RFC 3339 timestamp.
    pub const INVALID_EVENT_TIME: &str = "invalid_event_time";
    /// `event_type` is not one of the allowed types.
    pub const INVALID_EVENT_TYPE: &str = "invalid_event_type";
    /// A field that this event type needs is absent, null or blank.
    pub const MISSING_EVENT_TYPE_FIELD: &str = "missing_event_type_field";
    /// `quantity` is not an integer ≥ 1 that fits a 32-bit int.
    pub const INVALID_QUANTITY: &str = "invalid_quantity";
    /// `price` is negative, has more than two decimals, or does not fit DECIMAL(10,2).
    pub const INVALID_PRICE: &str = "invalid_price";
}

/// Declares [`DEFAULT_EVENT_TYPES`] and `is_default_event_type`, a string `match` over the
/// same list (compares of whole words rather than one string at a time).
macro_rules! default_event_types {
    ($($name:literal),* $(,)?) => {
        /// The event types accepted when `allowed-event-types` is not given.
        pub const DEFAULT_EVENT_TYPES: [&str; [$($name),*].len()] = [$($name),*];

        fn is_default_event_type(event_type: &str) -> bool {
            matches!(event_type, $($name)|*)
        }
    };
}

default_event_types![
    "page_view",
    "search",
    "product_view",
    "add_to_cart",
    "remove_from_cart",
    "checkout_start",
    "purchase",
];

/// The fields of a clickstream event this plugin looks at. Strings borrow from the event
/// where they have no escapes.
#[derive(Deserialize)]
struct Click<'a> {
    #[serde(borrow)]
    event_id: Option<Text<'a>>,
    #[serde(borrow)]
    event_time: Option<Text<'a>>,
    #[serde(borrow)]
    user_id: Option<Text<'a>>,
    #[serde(borrow)]
    session_id: Option<Text<'a>>,
    #[serde(borrow)]
    event_type: Option<Text<'a>>,
    #[serde(borrow)]
    page_url: Option<Text<'a>>,
    #[serde(borrow)]
    search_query: Option<Text<'a>>,
    #[serde(borrow)]
    product_id: Option<Text<'a>>,
    #[serde(borrow)]
    cart_id: Option<Text<'a>>,
    #[serde(borrow)]
    order_id: Option<Text<'a>>,
    #[serde(borrow)]
    quantity: Option<&'a RawValue>,
    #[serde(borrow)]
    price: Option<&'a RawValue>,
    #[serde(borrow)]
    device_type: Option<Text<'a>>,
    #[serde(borrow)]
    browser: Option<Text<'a>>,
    #[serde(borrow)]
    traffic_source: Option<Text<'a>>,
    // referrer_url, product_name and category are optional strings that no rule reads;
    // declaring them keeps their type checked.
    #[serde(borrow, rename = "referrer_url")]
    _referrer_url: Option<Text<'a>>,
    #[serde(borrow, rename = "product_name")]
    _product_name: Option<Text<'a>>,
    #[serde(borrow, rename = "category")]
    _category: Option<Text<'a>>,
}

/// A string field of the event: borrowed from the event's bytes unless it has escapes.
///
/// (serde borrows a `Cow<str>` field marked `#[serde(borrow)]`, but not one inside an
/// `Option`: that one would be copied into a new `String` for every event.)
struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }

            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// The validation rules, with their configured event types.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// The `allowed-event-types` parameter; `None` means [`DEFAULT_EVENT_TYPES`].
    custom_event_types: Option<Vec<String>>,
}

impl Processor for Rules {
    fn init(params: &Params) -> Result<Self, String> {
        params.only(&["allowed-event-types"])?;
        let mut rules = Rules::default();
        if let Some(types) = params.list("allowed-event-types") {
            if types.is_empty() {
                return Err("parameter `allowed-event-types` lists no event type".into());
            }
            rules.custom_event_types = Some(types);
        }
        Ok(rules)
    }

    fn process(&mut self, event: &Event<'_>) -> Verdict {
        match self.check(event) {
            Ok(()) => Verdict::Keep,
            Err(rejection) => Verdict::Reject(rejection),
        }
    }
}

sluice_guest::export!(processor Rules);

impl Rules {
    /// Whether `event_type` is one of the allowed types.
    fn allows(&self, event_type: &str) -> bool {
        match &self.custom_event_types {
            Some(types) => types.iter().any(|t| t == event_type),
            None => is_default_event_type(event_type),
        }
    }

    /// Checks one event; `Err` carries the first violation.
    pub fn check(&self, event: &Event<'_>) -> Result<(), Rejection> {
        let value = event.value().unwrap_or_default();
        if value.first() != Some(&b'{')
            && value
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|&b| b != b'{')
        {
            return Err(Rejection::new(
                sluice_guest::codes::MALFORMED_JSON,
                "the value is not a JSON object",
            ));
        }
        event
            .json::<Click<'_>>()
            .and_then(|click| self.check_click(&click))
    }

    /// The rules after parsing.
    fn check_click(&self, click: &Click<'_>) -> Result<(), Rejection> {
        let required = [
            ("event_id", &click.event_id),
            ("event_time", &click.event_time),
            ("user_id", &click.user_id),
            ("session_id", &click.session_id),
            ("event_type", &click.event_type),
            ("page_url", &click.page_url),
            ("device_type", &click.device_type),
            ("browser", &click.browser),
            ("traffic_source", &click.traffic_source),
        ];
        for (name, value) in required {
            match value {
                None => {
                    return Err(Rejection::new(
                        codes::MISSING_REQUIRED_FIELD,
                        format!("{name} is required"),
                    )
                    .with_field(name));
                }
                Some(v) if is_blank(v) => {
                    return Err(Rejection::new(
                        codes::BLANK_REQUIRED_FIELD,
                        format!("{name} must not be blank"),
                    )
                    .with_field(name));
                }
                Some(_) => {}
            }
        }

        let event_time = click.event_time.as_deref().unwrap_or_default();
        if !is_rfc3339(event_time) {
            return Err(Rejection::new(
                codes::INVALID_EVENT_TIME,
                format!("event_time {event_time:?} is not an RFC 3339 timestamp"),
            )
            .with_field("event_time"));
        }

        let event_type = click.event_type.as_deref().unwrap_or_default();
        if !self.allows(event_type) {
            let allowed = match &self.custom_event_types {
                Some(types) => types.join(", "),
                None => DEFAULT_EVENT_TYPES.join(", "),
            };
            return Err(Rejection::new(
                codes::INVALID_EVENT_TYPE,
                format!("event_type {event_type:?} is not one of {allowed}"),
            )
            .with_field("event_type"));
        }

        for &name in fields_needed_by(event_type) {
            let present = match name {
                "search_query" => non_blank(&click.search_query),
                "product_id" => non_blank(&click.product_id),
                "cart_id" => non_blank(&click.cart_id),
                "order_id" => non_blank(&click.order_id),
                "quantity" => click.quantity.is_some(),
                _ => unreachable!("no rule names {name}"),
            };
            if !present {
                return Err(Rejection::new(
                    codes::MISSING_EVENT_TYPE_FIELD,
                    format!("{event_type} events need a non-blank {name}"),
                )
                .with_field(name));
            }
        }

        if let Some(raw) = click.quantity {
            check_quantity(raw.get())?;
        }
        if let Some(raw) = click.price {
            check_price(raw.get())?;
        }
        Ok(())
    }
}

fn non_blank(value: &Option<Text<'_>>) -> bool {
    value.as_deref().is_some_and(|v| !is_blank(v))
}

/// Whether `s` is empty or only white space (Unicode's, as `str::trim`). Values that start
/// with a visible ASCII character, nearly all of them, are decided by their first byte.
fn is_blank(s: &str) -> bool {
    match s.as_bytes().first() {
        None => true,
        Some(b) if b.is_ascii_graphic() => false,
        Some(_) => s.trim().is_empty(),
    }
}

fn fields_needed_by(event_type: &str) -> &'static [&'static str] {
    match event_type {
        "search" => &["search_query"],
        "product_view" => &["product_id"],
        "add_to_cart" | "remove_from_cart" => &["product_id", "cart_id", "quantity"],
        "checkout_start" => &["cart_id"],
        "purchase" => &["order_id"],
        _ => &[],
    }
}

fn check_quantity(raw: &str) -> Result<(), Rejection> {
    let reject = |why: &str| {
        Err(
            Rejection::new(codes::INVALID_QUANTITY, format!("quantity {raw} {why}"))
                .with_field("quantity"),
        )
    };
    if raw.starts_with('"') {
        return reject("must be a JSON integer, not a string");
    }
    match raw.parse::<i64>() {
        Ok(q) if q < 1 => reject("must be at least 1"),
        Ok(q) if q > i64::from(i32::MAX) => reject("does not fit a 32-bit integer"),
        Ok(_) => Ok(()),
        Err(_) => reject("must be an integer"),
    }
}

/// Largest number of integer digits of a DECIMAL(10,2).
const PRICE_INTEGER_DIGITS: usize = 8;
/// Largest number of decimals of a DECIMAL(10,2).
const PRICE_SCALE: i64 = 2;

fn check_price(raw: &str) -> Result<(), Rejection> {
    let reject = |why: &str| {
        Err(Rejection::new(codes::INVALID_PRICE, format!("price {raw} {why}")).with_field("price"))
    };
    // A numeric string ("18.00") is accepted, as Spark's JSON reader does for decimals.
    // `raw` is the JSON text of the value, without white space around it.
    let text = match raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => inner.trim(),
        None => raw,
    };
    let Some(decimal) = Decimal::parse(text) else {
        return reject("is not a number");
    };
    if decimal.negative && !decimal.is_zero() {
        return reject("must not be negative");
    }
    if decimal.scale > PRICE_SCALE {
        return reject("has more than two decimals");
    }
    if decimal.integer_digits() > PRICE_INTEGER_DIGITS {
        return reject("does not fit DECIMAL(10,2)");
    }
    Ok(())
}

/// An exponent `[+-]?[0-9]+` whose value is at most 1000 either way.
fn parse_exponent(b: &[u8]) -> Option<i64> {
    let (negative, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let value = digits.iter().try_fold(0i64, |n, &d| {
        let n = n * 10 + i64::from(d.is_ascii_digit().then(|| d - b'0')?);
        (n <= 1000).then_some(n)
    })?;
    Some(if negative { -value } else { value })
}

/// A decimal number as its count of significant digits and a scale:
/// value = digits × 10^-scale.
#[derive(Debug, PartialEq)]
struct Decimal {
    negative: bool,
    /// Number of significant digits, without leading or trailing zeros (0 for zero).
    significant: usize,
    scale: i64,
}

impl Decimal {
    /// Parses JSON number syntax: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    /// (leading zeros are tolerated, as in numeric strings). One pass over the mantissa,
    /// without copying: this runs for every event with a price.
    fn parse(text: &str) -> Option<Decimal> {
        let b = text.as_bytes();
        let negative = b.first() == Some(&b'-');
        let mut at = usize::from(negative);
        // The mantissa's digits, integer part then fraction, numbered from 0.
        let mut digits = 0usize;
        let mut first_nonzero = None;
        let mut last_nonzero = 0usize;
        let mut point = None;
        while let Some(&c) = b.get(at) {
            match c {
                b'0' => {}
                b'1'..=b'9' => {
                    first_nonzero.get_or_insert(digits);
                    last_nonzero = digits;
                }
                b'.' if point.is_none() && digits > 0 => {
                    point = Some(digits);
                    at += 1;
                    continue;
                }
                _ => break,
            }
            digits += 1;
            at += 1;
        }
        let int_digits = point.unwrap_or(digits);
        let frac_digits = digits - int_digits;
        if int_digits == 0 || (point.is_some() && frac_digits == 0) {
            return None;
        }
        let exponent = match b.get(at) {
            None => 0,
            Some(b'e' | b'E') => parse_exponent(&b[at + 1..])?,
            Some(_) => return None,
        };
        let Some(first_nonzero) = first_nonzero else {
            return Some(Decimal {
                negative,
                significant: 0,
                scale: 0,
            });
        };
        let trailing = digits - 1 - last_nonzero;
        Some(Decimal {
            negative,
            significant: last_nonzero + 1 - first_nonzero,
            scale: frac_digits as i64 - exponent - trailing as i64,
        })
    }

    fn is_zero(&self) -> bool {
        self.significant == 0
    }

    /// Digits before the decimal point.
    fn integer_digits(&self) -> usize {
        (self.significant as i64 - self.scale).max(0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_normalised() {
        let d = |s| Decimal::parse(s).unwrap();
        assert_eq!(
            d("18.0"),
            Decimal {
                negative: false,
                significant: 2,
                scale: 0
            }
        );
        assert_eq!(
            d("0012.3400e1"),
            Decimal {
                negative: false,
                significant: 4,
                scale: 1
            }
        );
        assert_eq!(d("100").significant, 1);
        assert_eq!(d("0.0").significant, 0);
        assert_eq!(d("0.000").scale, 0);
        assert_eq!(d("18.50").scale, 1);
        assert_eq!(d("180").scale, -1);
        assert_eq!(d("180").integer_digits(), 3);
        assert_eq!(d("0.001").scale, 3);
        assert_eq!(d("1.5e2").integer_digits(), 3);
        assert_eq!(d("12345678.99").integer_digits(), 8);
        assert_eq!(d("123456789").integer_digits(), 9);
        assert!(d("-0.00").is_zero());
        assert_eq!(d("1e-1000").scale, 1000);
        assert_eq!(d("-0012.3400E+1").integer_digits(), 3);
        assert_eq!(d("0.50").significant, 1);
        for bad in [
            "", "-", "1.", ".5", "1e", "abc", "1.2.3", "--1", "1e1001", "1e+", "1e--1", "1.5x",
            "1e5.0", "+1", "1 ",
        ] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_default_event_types_are_the_documented_list() {
        let rules = Rules::default();
        for t in DEFAULT_EVENT_TYPES {
            assert!(rules.allows(t), "{t}");
        }
        for t in ["", "Page_view", "page_vie", "page_views", "purchase "] {
            assert!(!rules.allows(t), "{t}");
        }
        let custom = Rules {
            custom_event_types: Some(vec!["click".into()]),
        };
        assert!(custom.allows("click") && !custom.allows("page_view"));
    }

    #[test]
    fn blank_means_empty_or_white_space() {
        for blank in ["", " ", "\t\n", "\u{3000}", " \u{a0} "] {
            assert!(is_blank(blank), "{blank:?}");
        }
        for text in ["a", " a", "\u{3000}x", "é", "-"] {
            assert!(!is_blank(text), "{text:?}");
        }
    }

    #[test]
    fn price_and_quantity_limits() {
        assert!(check_price("18.0").is_ok());
        assert!(check_price("\"18.00\"").is_ok());
        assert!(check_price("99999999.99").is_ok());
        assert!(check_price("0").is_ok());
        assert!(check_price("100000000").is_err());
        assert!(check_price("-1").is_err());
        assert!(check_price("1.234").is_err());
        assert!(check_price("\"cheap\"").is_err());
        assert!(check_quantity("1").is_ok());
        assert!(check_quantity("2147483647").is_ok());
        assert!(check_quantity("2147483648").is_err());
        assert!(check_quantity("0").is_err());
        assert!(check_quantity("1.5").is_err());
        assert!(check_quantity("\"several\"").is_err());
    }
}
