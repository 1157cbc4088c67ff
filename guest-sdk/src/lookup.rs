//! Lookups: reading the pipeline's reference tables (`[[lookups]]`) by key, to enrich
//! events.
//!
//! A table maps a key to a JSON object. The host answers from one version of every table
//! for a whole batch, so the same key gives the same answer throughout a batch, and again
//! when the batch is replayed. A stage reads only the tables it is granted
//! (`[stages.grants] lookups = ["profiles"]`).
//!
//! Natively (unit tests), lookups read the tables set for the current thread with
//! [`crate::testing::lookups`].

use std::cell::RefCell;
use std::fmt;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::DeserializeOwned;

use crate::fields::{Answers as FieldAnswers, Fields};
use crate::keys::KeySet;
use crate::same::same_str;
use crate::verdict::Rejection;

/// Codes of a [`LookupError`].
pub mod codes {
    /// The stage was not granted the table (`[stages.grants] lookups`).
    pub const NOT_GRANTED: &str = "not_granted";
    /// The stage was granted the table, but no table of that name is loaded.
    pub const UNKNOWN_TABLE: &str = "unknown_table";
    /// Lookups are not answered here: in `init`, outside a batch.
    pub const UNAVAILABLE: &str = "unavailable";
    /// The value is not the JSON the plugin asked for (see [`crate::lookup`]).
    pub const MALFORMED_VALUE: &str = "malformed_value";
}

/// The rejection code of an event whose lookup failed (`?` on a [`LookupError`] in a
/// function returning `Result<_, Rejection>`).
pub const LOOKUP_FAILED: &str = "lookup_failed";

/// Why a lookup was not answered. An absent key is not an error: it is `Ok(None)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupError {
    code: String,
    table: String,
    message: String,
}

impl LookupError {
    pub(crate) fn new(code: &str, table: &str, message: String) -> Self {
        LookupError {
            code: code.into(),
            table: table.into(),
            message,
        }
    }

    /// Machine-readable reason: one of [`codes`] (later hosts may add others).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The table asked for.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Human-readable explanation, naming the table and the stage.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for LookupError {}

/// A failed lookup rejects the event with code [`LOOKUP_FAILED`] and the host's message.
impl From<LookupError> for Rejection {
    fn from(error: LookupError) -> Self {
        Rejection::new(LOOKUP_FAILED, error.to_string())
    }
}

/// The value of `key` in `table`, parsed from JSON as a `T`: `Ok(None)` when the table has
/// no such key.
///
/// ```
/// use serde::Deserialize;
/// use sluice_guest::testing::{self, Table};
///
/// #[derive(Deserialize)]
/// struct Profile {
///     tier: String,
/// }
///
/// testing::lookups([("profiles", Table::new().json("u1", &serde_json::json!({"tier": "gold"})))]);
/// let profile: Option<Profile> = sluice_guest::lookup("profiles", "u1").unwrap();
/// assert_eq!(profile.unwrap().tier, "gold");
/// assert!(sluice_guest::lookup::<Profile>("profiles", "u2").unwrap().is_none());
/// ```
pub fn lookup<T: DeserializeOwned>(
    table: &str,
    key: impl AsRef<[u8]>,
) -> Result<Option<T>, LookupError> {
    let key = key.as_ref();
    let read = |value: Option<&[u8]>| value.map(|v| parse(table, key, v)).transpose();
    if let Some(answer) = prefetched(table, key, read) {
        return answer?;
    }
    read(lookup_raw_uncached(table, key)?.as_deref())
}

/// The values of `keys` in `table`, in order, each parsed from JSON as a `T`: one host
/// call for all of them, cheaper per key than [`lookup`] from a few keys on.
pub fn lookup_many<T: DeserializeOwned, K: AsRef<[u8]>>(
    table: &str,
    keys: &[K],
) -> Result<Vec<Option<T>>, LookupError> {
    let values = lookup_many_raw(table, keys)?;
    keys.iter()
        .zip(values)
        .map(|(key, value)| value.map(|v| parse(table, key.as_ref(), &v)).transpose())
        .collect()
}

/// The value of `key` in `table` as bytes (a JSON object), unparsed.
pub fn lookup_raw(table: &str, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, LookupError> {
    let key = key.as_ref();
    match prefetched(table, key, |value| value.map(<[u8]>::to_vec)) {
        Some(answer) => answer,
        None => lookup_raw_uncached(table, key),
    }
}

/// `read` of the value of `key` in `table` as bytes, borrowed where the SDK holds it (a
/// prefetched answer, see [`crate::Processor::prefetch`]): nothing is copied, so a plugin
/// can parse the value into types that borrow from it (`&RawValue`, `&str`).
///
/// ```
/// use serde_json::json;
/// use sluice_guest::testing::{self, Table};
///
/// testing::lookups([("profiles", Table::new().json("u1", &json!({"tier": "gold"})))]);
/// let tier = sluice_guest::lookup_with("profiles", "u1", |value| {
///     value.map(|v| v.len())
/// });
/// assert_eq!(tier.unwrap(), Some(15));
/// ```
pub fn lookup_with<R>(
    table: &str,
    key: impl AsRef<[u8]>,
    read: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, LookupError> {
    let key = key.as_ref();
    let mut read = Some(read);
    let mut once = |value: Option<&[u8]>| read.take().map(|read| read(value));
    if let Some(answer) = prefetched(table, key, &mut once) {
        return answer.map(|r| r.expect("read once"));
    }
    let value = lookup_raw_uncached(table, key)?;
    Ok(once(value.as_deref()).expect("read once"))
}

/// The error of a table value that is not the JSON a plugin expects, for plugins that parse
/// values themselves ([`lookup_with`]): code `malformed_value`, naming the table and key.
pub fn malformed_value(table: &str, key: &[u8], error: &serde_json::Error) -> LookupError {
    LookupError::new(
        codes::MALFORMED_VALUE,
        table,
        format!(
            "the value of key {:?} in lookup table `{table}` is not the expected JSON: {error}",
            String::from_utf8_lossy(key)
        ),
    )
}

fn lookup_raw_uncached(table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, LookupError> {
    imp::lookup(table, key)
}

/// The keys a chunk's events announce they will look up ([`crate::Processor::prefetch`]),
/// each key once per table.
#[derive(Debug, Default)]
pub struct Lookups {
    tables: Vec<(String, FxHashSet<Vec<u8>>)>,
    /// The tables whose fields are wanted: the names (all asked for, in order) and keys.
    fields: Vec<(String, Vec<String>, KeySet)>,
    /// Keys a table's set makes room for at once: the chunk's events (growing the sets
    /// from nothing took ~1% of the retail enricher's run).
    room: usize,
}

impl Lookups {
    /// No announcements yet, for a chunk of `events` events.
    pub(crate) fn for_chunk(events: usize) -> Self {
        Lookups {
            room: events,
            ..Lookups::default()
        }
    }

    fn new_set(&self) -> FxHashSet<Vec<u8>> {
        FxHashSet::with_capacity_and_hasher(self.room, Default::default())
    }

    /// Announces a lookup of `key` in `table`.
    pub fn want(&mut self, table: &str, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        let keys = match self.tables.iter().position(|(t, _)| same_str(t, table)) {
            Some(i) => &mut self.tables[i].1,
            None => {
                let set = self.new_set();
                self.tables.push((table.to_string(), set));
                &mut self.tables.last_mut().expect("just pushed").1
            }
        };
        if !keys.contains(key) {
            keys.insert(key.to_vec());
        }
    }

    /// Announces a [`crate::lookup_fields`] of fields `names` of `key` in `table`: the
    /// host reads the fields of every key the chunk's events announce in one call per
    /// table (the names asked for by all the chunk's events).
    ///
    /// ```
    /// use sluice_guest::{Event, Lookups, Params, Patch, Processor, Verdict, lookup_fields};
    ///
    /// struct Tier;
    ///
    /// impl Processor for Tier {
    ///     fn init(_: &Params) -> Result<Self, String> {
    ///         Ok(Tier)
    ///     }
    ///
    ///     fn prefetch(&mut self, event: &Event<'_>, lookups: &mut Lookups) {
    ///         if let Some(user) = event.key() {
    ///             lookups.want_fields("profiles", user, &["tier"]);
    ///         }
    ///     }
    ///
    ///     fn process(&mut self, event: &Event<'_>) -> Verdict {
    ///         let mut patch = Patch::new();
    ///         // Answered from the chunk's prefetched fields.
    ///         let _ = lookup_fields("profiles", event.key().unwrap_or_default(), &["tier"], |f| {
    ///             if let Some(tier) = f.and_then(|f| f.get("tier")) {
    ///                 patch.set_field("tier", tier);
    ///             }
    ///         });
    ///         Verdict::patch(patch)
    ///     }
    /// }
    /// ```
    pub fn want_fields(&mut self, table: &str, key: impl AsRef<[u8]>, names: &[&str]) {
        let key = key.as_ref();
        let i = match self.fields.iter().position(|(t, ..)| same_str(t, table)) {
            Some(i) => i,
            None => {
                let set = KeySet::with_room(self.room);
                self.fields.push((table.to_string(), Vec::new(), set));
                self.fields.len() - 1
            }
        };
        let (_, wanted, keys) = &mut self.fields[i];
        for name in names {
            if !wanted.iter().any(|w| same_str(w, name)) {
                wanted.push(name.to_string());
            }
        }
        keys.announce(key);
    }

    /// Asks the host for every announced key (one call per table) and makes the answers
    /// what lookups read until the returned guard is dropped.
    pub(crate) fn fetch(self) -> Prefetched {
        let fields = self
            .fields
            .into_iter()
            .map(|(table, names, keys)| {
                let answers = imp::lookup_fields(&table, &names, keys.keys())
                    .and_then(|answer| FieldAnswers::new(&table, names, keys, answer));
                (table, answers)
            })
            .collect();
        PREFETCHED_FIELDS.with_borrow_mut(|p| *p = fields);
        let tables = self
            .tables
            .into_iter()
            .map(|(table, keys)| {
                let keys: Vec<Vec<u8>> = keys.into_iter().collect();
                let answers = imp::lookup_many(&table, &keys)
                    .map(|values| keys.into_iter().zip(values).collect());
                (table, answers)
            })
            .collect();
        PREFETCHED.with_borrow_mut(|p| *p = tables);
        Prefetched(())
    }
}

/// The answers of one chunk's announced lookups, by table: the values by key, or the error
/// the table's lookups give.
type Answers = Vec<(
    String,
    Result<FxHashMap<Vec<u8>, Option<Vec<u8>>>, LookupError>,
)>;

thread_local! {
    /// What [`Lookups::fetch`] got for the chunk being processed.
    static PREFETCHED: RefCell<Answers> = const { RefCell::new(Vec::new()) };
    /// The fields [`Lookups::fetch`] got for the chunk being processed, by table.
    static PREFETCHED_FIELDS: RefCell<Vec<(String, Result<FieldAnswers, LookupError>)>> =
        const { RefCell::new(Vec::new()) };
}

/// While alive, lookups read the chunk's prefetched answers; dropped, they are forgotten
/// (tables may change between batches).
pub(crate) struct Prefetched(());

impl Drop for Prefetched {
    fn drop(&mut self) {
        PREFETCHED.with_borrow_mut(Vec::clear);
        PREFETCHED_FIELDS.with_borrow_mut(Vec::clear);
    }
}

/// `read` of the prefetched fields `names` of `key` in `table`, if they were prefetched.
pub(crate) fn prefetched_fields<R>(
    table: &str,
    key: &[u8],
    names: &[&str],
    read: impl FnOnce(Option<Fields<'_>>) -> R,
) -> Option<Result<R, LookupError>> {
    PREFETCHED_FIELDS.with_borrow(|tables| {
        let (_, answers) = tables.iter().find(|(t, _)| same_str(t, table))?;
        match answers {
            Ok(answers) if answers.covers(names) => Some(Ok(read(answers.get(key)?))),
            Ok(_) => None,
            Err(e) => Some(Err(e.clone())),
        }
    })
}

/// `read` of the prefetched answer for `key` in `table`, if it was prefetched.
fn prefetched<R>(
    table: &str,
    key: &[u8],
    read: impl FnOnce(Option<&[u8]>) -> R,
) -> Option<Result<R, LookupError>> {
    PREFETCHED.with_borrow(|tables| {
        let (_, answers) = tables.iter().find(|(t, _)| same_str(t, table))?;
        match answers {
            Ok(values) => Some(Ok(read(values.get(key)?.as_deref()))),
            Err(e) => Some(Err(e.clone())),
        }
    })
}

/// The values of `keys` in `table` as bytes, in order, unparsed: one host call.
pub fn lookup_many_raw<K: AsRef<[u8]>>(
    table: &str,
    keys: &[K],
) -> Result<Vec<Option<Vec<u8>>>, LookupError> {
    let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_ref().to_vec()).collect();
    imp::lookup_many(table, &keys)
}

fn parse<T: DeserializeOwned>(table: &str, key: &[u8], value: &[u8]) -> Result<T, LookupError> {
    serde_json::from_slice(value).map_err(|e| malformed_value(table, key, &e))
}

#[cfg(target_arch = "wasm32")]
pub(crate) mod imp {
    use super::LookupError;
    use crate::bindings::sluice::plugin::lookup as wit;
    #[cfg(not(feature = "wit-0-1"))]
    use crate::fields::Answer;

    fn error(e: wit::LookupError) -> LookupError {
        LookupError {
            code: e.code,
            table: e.table,
            message: e.message,
        }
    }

    pub(super) fn lookup(table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, LookupError> {
        wit::lookup(table, key).map_err(error)
    }

    pub(super) fn lookup_many(
        table: &str,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<Vec<u8>>>, LookupError> {
        wit::lookup_many(table, keys).map_err(error)
    }

    #[cfg(not(feature = "wit-0-1"))]
    pub(crate) fn lookup_fields(
        table: &str,
        names: &[String],
        keys: &[Vec<u8>],
    ) -> Result<Answer, LookupError> {
        let f = wit::lookup_fields(table, names, keys).map_err(error)?;
        Ok(Answer {
            found: f.found,
            lengths: f.lengths,
            values: f.values,
        })
    }

    /// The `0.1` contract has no `lookup-fields`: the plugin reads whole values.
    #[cfg(feature = "wit-0-1")]
    pub(crate) fn lookup_fields(
        table: &str,
        names: &[String],
        keys: &[Vec<u8>],
    ) -> Result<crate::fields::Answer, LookupError> {
        let values = lookup_many(table, keys)?;
        crate::fields::project(table, names, keys, values)
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod imp {
    pub(crate) use crate::testing::{lookup, lookup_fields, lookup_many};
}
