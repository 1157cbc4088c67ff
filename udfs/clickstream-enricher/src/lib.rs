//! Enriches retail clickstream events by rewriting their value:
//! - `browser` and `device_type` are normalised to lower-case canonical names
//!   (`"Google Chrome"` → `chrome`, `"Phone"` → `mobile`);
//! - `page_path` is derived from `page_url` (no scheme, host, query or fragment);
//! - `funnel_step` is derived from `event_type` (page_view 1 … purchase 6).
//!
//! Every other field is kept as it is. A value that is not a JSON object is rejected with
//! `malformed_json`.

use serde_json::{Map, Value};
use sluice_guest::{Event, Rejection, Verdict};

/// Rewrites one event's value with normalised and derived fields.
pub fn enrich(event: &Event<'_>) -> Result<Verdict, Rejection> {
    let mut fields: Map<String, Value> = event.json()?;
    normalise(&mut fields, "browser", browser);
    normalise(&mut fields, "device_type", device_type);
    if let Some(Value::String(url)) = fields.get("page_url") {
        let path = page_path(url).to_string();
        fields.insert("page_path".into(), Value::String(path));
    }
    if let Some(step) = fields
        .get("event_type")
        .and_then(Value::as_str)
        .and_then(funnel_step)
    {
        fields.insert("funnel_step".into(), Value::from(step));
    }
    Ok(Verdict::rewrite_json(&fields))
}

sluice_guest::export!(enrich);

fn normalise(
    fields: &mut Map<String, Value>,
    name: &str,
    canonical: fn(&str) -> Option<&'static str>,
) {
    if let Some(Value::String(raw)) = fields.get_mut(name) {
        let lower = raw.trim().to_lowercase();
        *raw = canonical(&lower).map_or(lower, str::to_string);
    }
}

fn browser(lower: &str) -> Option<&'static str> {
    Some(match lower {
        "chrome" | "google chrome" | "chrome mobile" | "chromium" => "chrome",
        "safari" | "mobile safari" | "safari mobile" => "safari",
        "firefox" | "mozilla firefox" | "firefox mobile" => "firefox",
        "edge" | "microsoft edge" | "msedge" => "edge",
        "opera" | "opera mini" => "opera",
        "samsung internet" | "samsung browser" => "samsung_internet",
        _ => return None,
    })
}

fn device_type(lower: &str) -> Option<&'static str> {
    Some(match lower {
        "mobile" | "phone" | "smartphone" | "mobile phone" => "mobile",
        "desktop" | "pc" | "laptop" | "computer" => "desktop",
        "tablet" | "ipad" => "tablet",
        _ => return None,
    })
}

/// The path of a URL or of a path with a query: `https://shop/a/b?q=1#x` → `/a/b`.
pub fn page_path(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = if url.contains("://") {
        after_scheme.find('/').map_or("/", |i| &after_scheme[i..])
    } else {
        after_scheme
    };
    let end = path.find(['?', '#']).unwrap_or(path.len());
    match &path[..end] {
        "" => "/",
        p => p,
    }
}

/// Position of an event type in the purchase funnel.
pub fn funnel_step(event_type: &str) -> Option<u8> {
    Some(match event_type {
        "page_view" => 1,
        "search" => 2,
        "product_view" => 3,
        "add_to_cart" | "remove_from_cart" => 4,
        "checkout_start" => 5,
        "purchase" => 6,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_derived() {
        assert_eq!(page_path("https://retail.oleander.dev/"), "/");
        assert_eq!(page_path("https://retail.oleander.dev"), "/");
        assert_eq!(page_path("https://shop/a/b?q=1#x"), "/a/b");
        assert_eq!(page_path("/search?q=mug"), "/search");
        assert_eq!(page_path(""), "/");
    }

    #[test]
    fn names_are_normalised() {
        let verdict = enrich(&Event::new(
            br#"{"browser":" Google Chrome ","device_type":"Phone","page_url":"/p?x=1","event_type":"purchase","extra":1}"#,
        ))
        .unwrap();
        let Verdict::Rewrite(bytes) = verdict else {
            panic!("not rewritten: {verdict:?}")
        };
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["browser"], "chrome");
        assert_eq!(v["device_type"], "mobile");
        assert_eq!(v["page_path"], "/p");
        assert_eq!(v["funnel_step"], 6);
        assert_eq!(v["extra"], 1);
    }
}
