//! Looks up the keys each event names and answers with what the host returned.
//!
//! An event is `{"table": "profiles", "keys": ["u1", "u2"]}`. Parameters:
//! - `mode`: `single` (one `lookup` per key, the default), `many` (one `lookup-many` per
//!   event) or `none` (no lookup: the benchmark's baseline);
//! - `keep`: `true` keeps every event instead of rewriting it (the benchmark, so that the
//!   modes differ only in their lookups);
//! - `init-table`: a table to look up in `init`, whose error `init` fails with.
//!
//! The rewritten value is `{"values": [V, ...]}`, one entry per key: the table's JSON value
//! or `null`. A lookup error rejects the event with code `lookup_failed` and the host's
//! message.

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_guest::{Event, Params, Processor, Rejection, Verdict};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Single,
    Many,
    None,
}

struct Probe {
    mode: Mode,
    keep: bool,
}

#[derive(Deserialize)]
struct Ask<'a> {
    #[serde(borrow)]
    table: &'a str,
    #[serde(borrow)]
    keys: Vec<&'a str>,
}

impl Probe {
    fn answer(&self, event: &Event<'_>) -> Result<Verdict, Rejection> {
        let ask: Ask<'_> = event.json()?;
        let values = match self.mode {
            Mode::Single => ask
                .keys
                .iter()
                .map(|k| sluice_guest::lookup_raw(ask.table, k))
                .collect::<Result<Vec<_>, _>>()?,
            Mode::Many => sluice_guest::lookup_many_raw(ask.table, &ask.keys)?,
            Mode::None => vec![None; ask.keys.len()],
        };
        if self.keep {
            return Ok(Verdict::Keep);
        }
        let values: Vec<Option<&RawValue>> = values
            .iter()
            .map(|v| v.as_deref().and_then(|v| serde_json::from_slice(v).ok()))
            .collect();
        Ok(Verdict::rewrite_json(
            &serde_json::json!({ "values": values }),
        ))
    }
}

impl Processor for Probe {
    fn init(params: &Params) -> Result<Self, String> {
        params.only(&["mode", "keep", "init-table"])?;
        if let Some(table) = params.get("init-table") {
            sluice_guest::lookup_raw(table, "any").map_err(|e| e.to_string())?;
        }
        let mode = match params.get("mode").unwrap_or("single") {
            "single" => Mode::Single,
            "many" => Mode::Many,
            "none" => Mode::None,
            other => return Err(format!("mode {other:?}: expected single, many or none")),
        };
        Ok(Probe {
            mode,
            keep: params.parse_or("keep", false)?,
        })
    }

    fn process(&mut self, event: &Event<'_>) -> Verdict {
        sluice_guest::IntoVerdict::into_verdict(self.answer(event))
    }
}

sluice_guest::export!(processor Probe);
