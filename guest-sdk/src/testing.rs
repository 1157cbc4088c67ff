//! Native twins of what the host provides, for plugin unit tests (not on `wasm32`).
//!
//! [`lookups`] sets the lookup tables that [`crate::lookup`] and its siblings read on the
//! current thread, so an enrichment plugin is tested natively, without a host:
//!
//! ```
//! use serde_json::json;
//! use sluice_guest::testing::{self, Table};
//!
//! testing::lookups([
//!     ("profiles", Table::new().json("u1", &json!({"tier": "gold", "country": "DE"}))),
//!     ("products", Table::new()),
//! ]);
//! let value: Option<serde_json::Value> = sluice_guest::lookup("profiles", "u1").unwrap();
//! assert_eq!(value.unwrap()["country"], "DE");
//! // A table not set answers like a table the host has not loaded.
//! let error = sluice_guest::lookup_raw("prices", "p1").unwrap_err();
//! assert_eq!(error.code(), sluice_guest::lookup_codes::UNKNOWN_TABLE);
//! ```
//!
//! Every table set is readable: grants are the host's business, and a stage not granted a
//! table gets a [`LookupError`] with code `not_granted`, which [`deny`] imitates.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::lookup::{LookupError, codes};

/// One lookup table of a test: keys and their JSON values.
#[derive(Debug, Clone, Default)]
pub struct Table {
    entries: HashMap<Vec<u8>, Vec<u8>>,
}

impl Table {
    /// An empty table.
    pub fn new() -> Self {
        Table::default()
    }

    /// Sets `key` to `value`, serialised as JSON.
    pub fn json(mut self, key: impl AsRef<[u8]>, value: &impl Serialize) -> Self {
        let value = serde_json::to_vec(value).expect("a test value serialises to JSON");
        self.entries.insert(key.as_ref().to_vec(), value);
        self
    }

    /// Sets `key` to `value`, as given (for values that are not valid JSON).
    pub fn raw(mut self, key: impl AsRef<[u8]>, value: impl Into<Vec<u8>>) -> Self {
        self.entries.insert(key.as_ref().to_vec(), value.into());
        self
    }
}

#[derive(Default)]
struct Twin {
    tables: BTreeMap<String, Table>,
    denied: BTreeSet<String>,
    calls: HostCalls,
}

/// The host calls lookups made on the current thread since the tables were last set
/// ([`lookups`]): what [`crate::Processor::prefetch`] saves shows here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCalls {
    /// Calls of `lookup`, one key each.
    pub lookup: u64,
    /// Calls of `lookup-many`.
    pub lookup_many: u64,
    /// Calls of `lookup-fields`.
    pub lookup_fields: u64,
}

/// The host calls lookups made on this thread since the tables were last set.
pub fn host_calls() -> HostCalls {
    TWIN.with_borrow(|twin| twin.calls)
}

/// Judges `events` as the host sends them, as one chunk: the lookups each event announces
/// ([`crate::Processor::prefetch`]) are asked for together first, then each event is
/// processed.
pub fn process_chunk<P: crate::Processor>(
    plugin: &mut P,
    events: &[crate::Event<'_>],
) -> Vec<crate::Verdict> {
    crate::__private::judge_with(plugin, events)
}

thread_local! {
    static TWIN: RefCell<Twin> = RefCell::new(Twin::default());
}

/// Makes `tables` (and only them) what lookups on the current thread read; forgets any
/// [`deny`].
pub fn lookups<N: Into<String>>(tables: impl IntoIterator<Item = (N, Table)>) {
    TWIN.with_borrow_mut(|twin| {
        *twin = Twin {
            tables: tables.into_iter().map(|(n, t)| (n.into(), t)).collect(),
            denied: BTreeSet::new(),
            calls: HostCalls::default(),
        }
    });
}

/// Makes lookups of `table` on the current thread fail as they do for a stage not granted
/// it (code `not_granted`).
pub fn deny(table: &str) {
    TWIN.with_borrow_mut(|twin| twin.denied.insert(table.to_string()));
}

fn with_table<R>(name: &str, read: impl FnOnce(&Table) -> R) -> Result<R, LookupError> {
    TWIN.with_borrow(|twin| {
        if twin.denied.contains(name) {
            return Err(LookupError::new(
                codes::NOT_GRANTED,
                name,
                format!("this stage is not granted lookup table `{name}` (testing::deny)"),
            ));
        }
        let table = twin.tables.get(name).ok_or_else(|| {
            LookupError::new(
                codes::UNKNOWN_TABLE,
                name,
                format!("no lookup table `{name}` is set (testing::lookups)"),
            )
        })?;
        Ok(read(table))
    })
}

pub(crate) fn lookup(table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, LookupError> {
    TWIN.with_borrow_mut(|twin| twin.calls.lookup += 1);
    with_table(table, |t| t.entries.get(key).cloned())
}

pub(crate) fn lookup_many(
    table: &str,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, LookupError> {
    TWIN.with_borrow_mut(|twin| twin.calls.lookup_many += 1);
    with_table(table, |t| {
        keys.iter().map(|k| t.entries.get(k).cloned()).collect()
    })
}

pub(crate) fn lookup_fields(
    table: &str,
    names: &[String],
    keys: &[Vec<u8>],
) -> Result<crate::fields::Answer, LookupError> {
    TWIN.with_borrow_mut(|twin| twin.calls.lookup_fields += 1);
    let values = with_table(table, |t| {
        keys.iter().map(|k| t.entries.get(k).cloned()).collect()
    })?;
    crate::fields::project(table, names, keys, values)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::{Rejection, lookup, lookup_many};

    #[derive(Debug, Deserialize, PartialEq)]
    struct Profile {
        tier: String,
    }

    fn profiles() -> Table {
        Table::new()
            .json("u1", &json!({"tier": "gold"}))
            .raw("bad", "{not json")
    }

    #[test]
    fn typed_lookups_parse_values_and_miss_absent_keys() {
        lookups([("profiles", profiles())]);
        let gold = Profile {
            tier: "gold".into(),
        };
        assert_eq!(lookup::<Profile>("profiles", "u1").unwrap(), Some(gold));
        assert_eq!(lookup::<Profile>("profiles", b"u9").unwrap(), None);
        let many: Vec<Option<Profile>> = lookup_many("profiles", &["u9", "u1"]).unwrap();
        assert_eq!(many.len(), 2);
        assert!(many[0].is_none() && many[1].is_some());
    }

    #[test]
    fn malformed_values_unknown_and_denied_tables_are_errors() {
        lookups([("profiles", profiles())]);
        let e = lookup::<Profile>("profiles", "bad").unwrap_err();
        assert_eq!((e.code(), e.table()), (codes::MALFORMED_VALUE, "profiles"));
        assert!(e.message().contains("\"bad\""), "{e}");
        let e = lookup_many::<Profile, _>("profiles", &["u1", "bad"]).unwrap_err();
        assert_eq!(e.code(), codes::MALFORMED_VALUE);
        let e = lookup::<Profile>("products", "p1").unwrap_err();
        assert_eq!(e.code(), codes::UNKNOWN_TABLE);
        deny("profiles");
        let e = lookup::<Profile>("profiles", "u1").unwrap_err();
        assert_eq!(e.code(), codes::NOT_GRANTED);
        let rejection = Rejection::from(e);
        assert_eq!(rejection.code(), crate::lookup::LOOKUP_FAILED);
        assert!(rejection.message().starts_with("not_granted: "));
    }
}
