//! [`Patch`]: fields to add to or replace in an event's value, the cheapest way to enrich.

use std::cell::RefCell;
use std::fmt;

use serde::Serialize;

use crate::verdict::Rejection;

/// Fields to add to an event's value (a JSON object), or to replace in it: what an
/// enrichment answers with [`Verdict::Patch`](crate::Verdict::Patch). The host applies the
/// fields where it reads the value, so neither the plugin nor the host prints the whole
/// value again, and the host parses it once.
///
/// ```
/// use sluice_guest::{Patch, Verdict};
///
/// let mut patch = Patch::new();
/// patch.set("tier", "gold").unwrap();
/// patch.set("list_price", &18.5).unwrap();
/// let verdict = Verdict::patch(patch);
/// let Verdict::Patch(patch) = &verdict else { unreachable!() };
/// let value = patch.apply(br#"{"user_id":"u1","tier":"silver"}"#).unwrap();
/// assert_eq!(value, br#"{"user_id":"u1","tier":"gold","list_price":18.5}"#);
/// // An empty patch keeps the event.
/// assert_eq!(Verdict::patch(Patch::new()), Verdict::Keep);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Patch {
    names: String,
    values: Vec<u8>,
    /// For each field, the end of its name in `names` and of its value in `values`.
    ends: Vec<(u32, u32)>,
}

/// Bytes of names, bytes of values and fields a patch makes room for when it gets its
/// first field.
const NAMES_ROOM: usize = 48;
const VALUES_ROOM: usize = 96;
const FIELDS_ROOM: usize = 4;

/// The buffers of one patch: its names, values and ends.
type Buffers = (String, Vec<u8>, Vec<(u32, u32)>);

/// The most spare buffers kept: a chunk's worth of patches (the SDK holds a chunk's
/// verdicts until it answers).
const MOST_SPARE: usize = 4096;

/// The largest buffers kept (names and values together, in bytes): a plugin that patches
/// a few large values keeps no more of the plugin's memory than small patches would.
const LARGEST_SPARE: usize = 4096;

thread_local! {
    /// Buffers of patches that were dropped (after the SDK copied them into its answer),
    /// emptied, for the next patches: making three buffers for each patch and freeing them
    /// again took ~10% of the retail enricher's time.
    static SPARE: RefCell<Vec<Buffers>> = const { RefCell::new(Vec::new()) };
}

impl Drop for Patch {
    fn drop(&mut self) {
        if self.ends.capacity() == 0
            || self.names.capacity() + self.values.capacity() > LARGEST_SPARE
        {
            return;
        }
        let (mut names, mut values, mut ends) = (
            std::mem::take(&mut self.names),
            std::mem::take(&mut self.values),
            std::mem::take(&mut self.ends),
        );
        names.clear();
        values.clear();
        ends.clear();
        // A patch dropped while the thread ends finds no spare buffers left: freed then.
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < MOST_SPARE {
                spare.push((names, values, ends));
            }
        });
    }
}

impl Patch {
    /// A patch of no fields.
    pub fn new() -> Self {
        Patch::default()
    }

    /// Sets field `name` to `value` as JSON, replacing what an earlier `set` of the same
    /// name gave. A value that cannot be JSON (a map with non-string keys) is a
    /// [`Rejection`] with code `rewrite_failed`.
    pub fn set<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> Result<(), Rejection> {
        if self.sets(name) {
            let mut rest: Vec<(String, String)> = self
                .fields()
                .filter(|(n, _)| *n != name)
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            let new = serde_json::to_string(value).map_err(failed)?;
            rest.push((name.to_string(), new));
            *self = Patch::default();
            for (n, v) in rest {
                self.push(&n, v.as_bytes());
            }
            return Ok(());
        }
        self.make_room(0);
        let at = self.values.len();
        if let Err(e) = serde_json::to_writer(&mut self.values, value) {
            self.values.truncate(at);
            return Err(failed(e));
        }
        self.names.push_str(name);
        self.ends
            .push((self.names.len() as u32, self.values.len() as u32));
        Ok(())
    }

    /// Sets field `name` to `value`, JSON text as it is (a value read from the event or
    /// from a lookup table, copied without being parsed and printed again), replacing what
    /// an earlier `set` of the same name gave.
    pub fn set_raw(&mut self, name: &str, value: &serde_json::value::RawValue) {
        if self.sets(name) {
            // Rare: through `set`, which rebuilds the fields.
            let _ = self.set(name, value);
            return;
        }
        self.push(name, value.get().as_bytes());
    }

    /// Sets field `name` to a field of a looked-up value ([`crate::lookup_fields`]),
    /// copied as the table has it, replacing what an earlier `set` of the same name gave.
    pub fn set_field(&mut self, name: &str, field: crate::Field<'_>) {
        if self.sets(name) {
            // Rare: through `set`, which rebuilds the fields.
            if let Ok(value) = serde_json::value::RawValue::from_string(field.text().into()) {
                let _ = self.set(name, &value);
            }
            return;
        }
        self.push(name, field.text().as_bytes());
    }

    /// Before the first field: spare buffers if there are, else room for a typical
    /// enrichment's few fields at once (growing each buffer from nothing took ~4% of the
    /// retail enricher's run in reallocations).
    fn make_room(&mut self, json: usize) {
        if self.ends.capacity() != 0 {
            return;
        }
        if let Some(spare) = SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten() {
            (self.names, self.values, self.ends) = spare;
        }
        self.names.reserve(NAMES_ROOM);
        self.values.reserve(VALUES_ROOM.max(json));
        self.ends.reserve(FIELDS_ROOM);
    }

    fn push(&mut self, name: &str, json: &[u8]) {
        self.make_room(json.len());
        self.names.push_str(name);
        self.values.extend_from_slice(json);
        self.ends
            .push((self.names.len() as u32, self.values.len() as u32));
    }

    /// Whether it sets field `name`.
    pub fn sets(&self, name: &str) -> bool {
        let mut from = 0;
        self.ends.iter().any(|&(n, _)| {
            let n = n as usize;
            let found = crate::same::same_str(&self.names[from..n], name);
            from = n;
            found
        })
    }

    /// Whether it sets no field.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Number of fields it sets.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Its fields, in order: each name and its value's JSON text.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let mut from = (0usize, 0usize);
        self.ends.iter().map(move |&(n, v)| {
            let (n, v) = (n as usize, v as usize);
            let field = (
                &self.names[from.0..n],
                std::str::from_utf8(&self.values[from.1..v]).expect("serde_json writes UTF-8"),
            );
            from = (n, v);
            field
        })
    }

    /// `value` (a JSON object) with the patch applied, as the host applies it: each field
    /// in its place (a patched one with its new value), then the new fields in order. For
    /// tests; the host does this itself, without printing the value.
    pub fn apply(&self, value: &[u8]) -> Result<Vec<u8>, Rejection> {
        let object: Vec<(String, Box<serde_json::value::RawValue>)> =
            serde_json::from_slice::<RawObject>(value)
                .map_err(|e| {
                    Rejection::new(
                        crate::codes::MALFORMED_JSON,
                        format!("a patch needs a JSON object value: {e}"),
                    )
                })?
                .0;
        let mut out = Vec::with_capacity(value.len() + self.values.len() + 16);
        out.push(b'{');
        let field = |out: &mut Vec<u8>, name: &str, json: &str| {
            if out.len() > 1 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, name).expect("a string serialises");
            out.push(b':');
            out.extend_from_slice(json.as_bytes());
        };
        for (name, raw) in &object {
            let json = self
                .fields()
                .find(|(n, _)| n == name)
                .map_or(raw.get(), |(_, v)| v);
            field(&mut out, name, json);
        }
        for (name, json) in self.fields() {
            if !object.iter().any(|(n, _)| n == name) {
                field(&mut out, name, json);
            }
        }
        out.push(b'}');
        Ok(out)
    }

    /// Makes room in `out` for `times` patches of this one's size: sized once from a
    /// chunk's first patch, as if every later event had one like it, instead of growing
    /// five lists field by field.
    #[cfg(not(feature = "wit-0-1"))]
    pub(crate) fn reserve_like(
        &self,
        times: usize,
        out: &mut crate::bindings::sluice::plugin::types::Patches,
    ) {
        let fields = self.ends.len() * times;
        out.events.reserve(fields);
        out.name_lengths.reserve(fields);
        out.value_lengths.reserve(fields);
        out.names.reserve(self.names.len() * times);
        out.values.reserve(self.values.len() * times);
    }

    /// The columns of the WIT `patches` record this patch adds to, for event `event`.
    #[cfg(not(feature = "wit-0-1"))]
    pub(crate) fn append_to(
        &self,
        event: u32,
        out: &mut crate::bindings::sluice::plugin::types::Patches,
    ) {
        let mut from = (0u32, 0u32);
        for &(n, v) in &self.ends {
            out.events.push(event);
            out.name_lengths.push(n - from.0);
            out.value_lengths.push(v - from.1);
            from = (n, v);
        }
        out.names.push_str(&self.names);
        out.values.extend_from_slice(&self.values);
    }
}

fn failed(e: serde_json::Error) -> Rejection {
    Rejection::new(
        "rewrite_failed",
        format!("the patched value could not be serialised as JSON: {e}"),
    )
}

impl fmt::Debug for Patch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.fields()).finish()
    }
}

/// A JSON object's fields in order, each value as its own text.
struct RawObject(Vec<(String, Box<serde_json::value::RawValue>)>);

impl<'de> serde::Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawObject, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(RawObject(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_patch_lends_its_emptied_buffers_to_the_next() {
        let spare = || {
            SPARE.with_borrow(|s| {
                s.iter()
                    .map(|b| b.0.len() + b.1.len() + b.2.len())
                    .collect::<Vec<_>>()
            })
        };
        let before = spare();
        let mut first = Patch::new();
        first.set("tier", "gold").unwrap();
        first.set("list_price", &18.5).unwrap();
        drop(first);
        assert_eq!(
            spare(),
            [&before[..], &[0]].concat(),
            "its buffers kept, emptied"
        );
        let mut next = Patch::new();
        let de = serde_json::value::RawValue::from_string("\"DE\"".into()).unwrap();
        next.set_raw("country", &de);
        assert_eq!(spare(), before, "taken by the next patch");
        assert_eq!(next.fields().collect::<Vec<_>>(), [("country", "\"DE\"")]);
        assert_eq!(next.apply(b"{}").unwrap(), br#"{"country":"DE"}"#);
        drop(Patch::new());
        assert_eq!(
            spare(),
            before,
            "a patch without fields has no buffers to lend"
        );
        let mut large = Patch::new();
        large.set("blob", &"x".repeat(LARGEST_SPARE)).unwrap();
        drop(large);
        assert_eq!(spare(), before, "nor does a large one keep them");
    }

    #[test]
    fn setting_a_name_again_replaces_its_value() {
        let mut patch = Patch::new();
        patch.set("a", &1).unwrap();
        patch.set("b", "x").unwrap();
        patch.set("a", &[2, 3]).unwrap();
        assert_eq!(
            patch.fields().collect::<Vec<_>>(),
            vec![("b", "\"x\""), ("a", "[2,3]")]
        );
        assert_eq!(patch.len(), 2);
        let bad = std::collections::HashMap::from([((1, 2), 3)]);
        assert_eq!(patch.set("c", &bad).unwrap_err().code(), "rewrite_failed");
        assert_eq!(patch.len(), 2, "a failed set leaves the patch as it was");
        assert_eq!(
            patch.apply(br#"{"a":0,"z":"\n"}"#).unwrap(),
            br#"{"a":[2,3],"z":"\n","b":"x"}"#
        );
        assert!(patch.apply(b"[1]").is_err());
    }
}
