//! Some fields of looked-up values, read by the host ([`lookup_fields`]): the cheapest way
//! to copy what a lookup table knows into an event, because the plugin parses no table
//! JSON and only the fields it asks for cross the boundary.

use std::fmt;
use std::ops::Range;

use serde::Deserialize;

use crate::keys::KeySet;
use crate::lookup::{LookupError, codes};
use crate::same::same_str;

/// The answer of one `lookup-fields` call, in the WIT layout: `keys × names` entries,
/// key-major.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Answer {
    /// For each key, whether the table has it.
    pub(crate) found: Vec<bool>,
    /// For each entry, the length of its JSON text in `values`, or -1 when absent.
    pub(crate) lengths: Vec<i32>,
    /// The entries' texts, concatenated.
    pub(crate) values: Vec<u8>,
}

/// One table's answers for a chunk's keys, readable by key.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    names: Vec<String>,
    keys: KeySet,
    /// For each key (in the order of `keys`), its first entry in `spans`, or `None` when
    /// the table lacks it.
    first: Vec<Option<usize>>,
    /// Where each entry's text lies in `text`.
    spans: Vec<Option<Range<u32>>>,
    text: String,
}

impl Answers {
    /// The answer of a call with `names` and `keys`; an answer of the wrong shape (or
    /// text that is not UTF-8) is the host breaking the contract, reported as an error.
    pub(crate) fn new(
        table: &str,
        names: Vec<String>,
        keys: KeySet,
        answer: Answer,
    ) -> Result<Self, LookupError> {
        let broken = |what: &str| {
            LookupError::new(
                codes::UNAVAILABLE,
                table,
                format!("the host's answer to lookup-fields of table `{table}` is broken: {what}"),
            )
        };
        let n = keys.keys().len();
        if answer.found.len() != n || answer.lengths.len() != n * names.len() {
            return Err(broken("its lists do not match the keys and names"));
        }
        let text = String::from_utf8(answer.values).map_err(|_| broken("not UTF-8"))?;
        let mut spans = Vec::with_capacity(answer.lengths.len());
        let mut at = 0u32;
        for &len in &answer.lengths {
            spans.push((len >= 0).then(|| {
                let from = at;
                at += len as u32;
                from..at
            }));
        }
        if at as usize != text.len() {
            return Err(broken("its lengths do not add up to its values"));
        }
        let width = names.len();
        let first = answer
            .found
            .iter()
            .enumerate()
            .map(|(k, &found)| found.then_some(k * width))
            .collect();
        Ok(Answers {
            names,
            keys,
            first,
            spans,
            text,
        })
    }

    /// Whether it answers every one of `names`.
    pub(crate) fn covers(&self, names: &[&str]) -> bool {
        names
            .iter()
            .all(|n| self.names.iter().any(|m| same_str(m, n)))
    }

    /// The fields of `key`'s value: `None` if the key was not asked, `Some(None)` if the
    /// table lacks it.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<Fields<'_>>> {
        let first = self.first[self.keys.find(key)?];
        Some(first.map(|first| Fields {
            answers: self,
            spans: &self.spans[first..first + self.names.len()],
        }))
    }
}

/// Some top-level fields of one looked-up value, as the host read them: each field's JSON
/// text, borrowed from the answer.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    answers: &'a Answers,
    spans: &'a [Option<Range<u32>>],
}

impl<'a> Fields<'a> {
    /// Field `name`, if the value has it (a field whose value is `null` is there).
    pub fn get(&self, name: &str) -> Option<Field<'a>> {
        let n = self.answers.names.iter().position(|m| same_str(m, name))?;
        let span = self.spans[n].clone()?;
        Some(Field(
            &self.answers.text[span.start as usize..span.end as usize],
        ))
    }
}

impl fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for name in &self.answers.names {
            if let Some(field) = self.get(name) {
                map.entry(name, &field.text());
            }
        }
        map.finish()
    }
}

/// One field of a looked-up value: its JSON text (`"gold"`, `18.5`, `null`), as the table
/// has it. [`crate::Patch::set_field`] copies it into an event as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a>(&'a str);

impl<'a> Field<'a> {
    /// The field's JSON text.
    pub fn text(&self) -> &'a str {
        self.0
    }

    /// Whether the field's value is `null`.
    pub fn is_null(&self) -> bool {
        self.0 == "null"
    }

    /// The field's value, parsed from its JSON text.
    pub fn parse<T: Deserialize<'a>>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0)
    }
}

/// `read` of fields `names` of the value of `key` in `table` (`None` when the table lacks
/// the key), read by the host: the plugin parses no table JSON. Answered from the chunk's
/// prefetched fields when [`crate::Lookups::want_fields`] asked for them, otherwise with a
/// host call of its own.
///
/// ```
/// use serde_json::json;
/// use sluice_guest::testing::{self, Table};
/// use sluice_guest::{Patch, lookup_fields};
///
/// testing::lookups([("profiles", Table::new().json("u1", &json!({"tier": "gold", "n": 3})))]);
/// let mut patch = Patch::new();
/// lookup_fields("profiles", "u1", &["tier", "country"], |fields| {
///     let fields = fields.expect("the table has u1");
///     assert!(fields.get("country").is_none());
///     if let Some(tier) = fields.get("tier") {
///         patch.set_field("tier", tier);
///     }
/// })
/// .unwrap();
/// assert_eq!(patch.fields().collect::<Vec<_>>(), [("tier", "\"gold\"")]);
/// ```
pub fn lookup_fields<R>(
    table: &str,
    key: impl AsRef<[u8]>,
    names: &[&str],
    read: impl FnOnce(Option<Fields<'_>>) -> R,
) -> Result<R, LookupError> {
    let key = key.as_ref();
    let mut read = Some(read);
    let mut once = |fields: Option<Fields<'_>>| read.take().map(|read| read(fields));
    if let Some(answer) = crate::lookup::prefetched_fields(table, key, names, &mut once) {
        return answer.map(|r| r.expect("read once"));
    }
    let owned: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut keys = KeySet::with_room(1);
    keys.announce(key);
    let answer = crate::lookup::imp::lookup_fields(table, &owned, keys.keys())?;
    let answers = Answers::new(table, owned, keys, answer)?;
    let fields = answers.get(key).expect("the key was asked");
    Ok(once(fields).expect("read once"))
}

/// What the host answers to `lookup-fields`, computed from whole values: for the native
/// twin of the host ([`crate::testing`]) and for plugins built against the `0.1` contract,
/// whose hosts lack the call.
#[cfg(any(not(target_arch = "wasm32"), feature = "wit-0-1"))]
pub(crate) fn project(
    table: &str,
    names: &[String],
    keys: &[Vec<u8>],
    values: Vec<Option<Vec<u8>>>,
) -> Result<Answer, LookupError> {
    let mut answer = Answer::default();
    for (key, value) in keys.iter().zip(values) {
        let Some(value) = value else {
            answer.found.push(false);
            answer.lengths.extend(std::iter::repeat_n(-1, names.len()));
            continue;
        };
        let object: std::collections::HashMap<String, &serde_json::value::RawValue> =
            serde_json::from_slice(&value)
                .map_err(|e| crate::lookup::malformed_value(table, key, &e))?;
        answer.found.push(true);
        for name in names {
            match object.get(name) {
                Some(text) => {
                    answer.lengths.push(text.get().len() as i32);
                    answer.values.extend_from_slice(text.get().as_bytes());
                }
                None => answer.lengths.push(-1),
            }
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verdict;
    use crate::testing::{self, HostCalls, Table};

    fn tables() {
        testing::lookups([(
            "profiles",
            Table::new()
                .json("u1", &json!({"tier": "gold", "n": 2.5, "z": null}))
                .raw("bad", "[1]"),
        )]);
    }

    #[test]
    fn reads_the_fields_asked_for_and_misses_absent_keys() {
        tables();
        let texts = lookup_fields("profiles", "u1", &["tier", "n", "z", "x"], |f| {
            let f = f.unwrap();
            ["tier", "n", "z", "x"].map(|n| f.get(n).map(|v| (v.text().to_string(), v.is_null())))
        })
        .unwrap();
        assert_eq!(
            texts,
            [
                Some(("\"gold\"".to_string(), false)),
                Some(("2.5".to_string(), false)),
                Some(("null".to_string(), true)),
                None
            ]
        );
        let n: f64 = lookup_fields("profiles", "u1", &["n"], |f| {
            f.unwrap().get("n").unwrap().parse().unwrap()
        })
        .unwrap();
        assert_eq!(n, 2.5);
        assert!(
            lookup_fields("profiles", "u9", &["tier"], |f| f.is_none()).unwrap(),
            "an absent key"
        );
        assert_eq!(
            testing::host_calls(),
            HostCalls {
                lookup_fields: 3,
                ..HostCalls::default()
            }
        );
    }

    /// Asks for `names` in prefetch and `asked` in process.
    struct Copier {
        names: &'static [&'static str],
        asked: &'static [&'static str],
    }

    impl crate::Processor for Copier {
        fn init(_: &crate::Params) -> Result<Self, String> {
            unreachable!()
        }

        fn prefetch(&mut self, event: &crate::Event<'_>, lookups: &mut crate::Lookups) {
            lookups.want_fields("profiles", event.value().unwrap_or_default(), self.names);
        }

        fn process(&mut self, event: &crate::Event<'_>) -> crate::Verdict {
            let mut patch = crate::Patch::new();
            lookup_fields("profiles", event.value().unwrap(), self.asked, |f| {
                for name in self.asked {
                    if let Some(field) = f.and_then(|f| f.get(name)) {
                        patch.set_field(name, field);
                    }
                }
            })
            .unwrap();
            crate::Verdict::patch(patch)
        }
    }

    #[test]
    fn a_chunk_prefetches_once_per_table_and_other_names_cost_a_call() {
        tables();
        let events = [
            crate::Event::new(b"u1"),
            crate::Event::new(b"u9"),
            crate::Event::new(b"u1"),
        ];
        let mut copier = Copier {
            names: &["tier", "z"],
            asked: &["z", "tier"],
        };
        let verdicts = testing::process_chunk(&mut copier, &events);
        assert_eq!(testing::host_calls().lookup_fields, 1);
        let Verdict::Patch(patch) = &verdicts[0] else {
            panic!("{verdicts:?}")
        };
        assert_eq!(
            patch.fields().collect::<Vec<_>>(),
            [("z", "null"), ("tier", "\"gold\"")]
        );
        assert_eq!((&verdicts[1], &verdicts[2]), (&Verdict::Keep, &verdicts[0]));
        tables();
        copier.asked = &["n"];
        testing::process_chunk(&mut copier, &events);
        assert_eq!(
            testing::host_calls().lookup_fields,
            4,
            "a name not prefetched: a call per event"
        );
    }

    #[test]
    fn errors_are_the_tables() {
        tables();
        let e = lookup_fields("profiles", "bad", &["tier"], |_| ()).unwrap_err();
        assert_eq!(e.code(), codes::MALFORMED_VALUE);
        let e = lookup_fields("products", "p1", &["tier"], |_| ()).unwrap_err();
        assert_eq!(e.code(), codes::UNKNOWN_TABLE);
    }

    #[test]
    fn an_answer_of_the_wrong_shape_is_an_error() {
        let keys = || {
            let mut keys = KeySet::with_room(1);
            keys.announce(b"k");
            keys
        };
        let names = || vec!["a".to_string()];
        let answer = |found: Vec<bool>, lengths: Vec<i32>, values: &[u8]| Answer {
            found,
            lengths,
            values: values.to_vec(),
        };
        let ok = Answers::new("t", names(), keys(), answer(vec![true], vec![1], b"1")).unwrap();
        assert_eq!(ok.get(b"k").unwrap().unwrap().get("a").unwrap().text(), "1");
        for bad in [
            answer(vec![], vec![1], b"1"),
            answer(vec![true], vec![1, 1], b"11"),
            answer(vec![true], vec![2], b"1"),
            answer(vec![true], vec![1], b"\xff"),
        ] {
            assert!(Answers::new("t", names(), keys(), bad).is_err());
        }
    }
}
