//! The generator's cases: civil dates, seeds pinned, every shape's keys and kinds.

use super::shapes::{COUNTRIES, TIERS};
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
    let keys: std::collections::HashSet<&str> = customers.iter().map(|e| e.key.as_str()).collect();
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
