//! The `lookup` import: how a plugin reads the batch's lookup tables by key.
//!
//! Each instance's store holds a [`Reader`]: the stage's name, the tables it is granted,
//! and the [`Lookups`] of the batch being processed, set once per `process` call (never per
//! lookup) from [`crate::plugin::Runtime::lookups`]. A lookup of a table not granted, or not
//! present, answers a `lookup-error` naming the table and the stage; it never traps.
//!
//! [`check`] is what a pipeline calls at load to refuse a stage granted a table that no
//! `[[lookups]]` declares.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::bindings::sluice::plugin::lookup::{Fields, LookupError};
use super::config::StageConfig;
use crate::lookup::fields::{find, prefetch};
use crate::lookup::{Lookups, Table};

/// Codes of a `lookup-error` (see `wit/plugin.wit`).
pub mod codes {
    /// The stage was not granted the table.
    pub const NOT_GRANTED: &str = "not_granted";
    /// The stage was granted the table, but the batch has no table of that name.
    pub const UNKNOWN_TABLE: &str = "unknown_table";
    /// Lookups are not answered here (in `init`, outside a batch).
    pub const UNAVAILABLE: &str = "unavailable";
    /// A value of the table is not a JSON object (`lookup-fields`).
    pub const MALFORMED_VALUE: &str = "malformed_value";
}

/// How many keys ahead of the one whose fields `lookup-fields` reads its value is loaded.
const PREFETCH_AHEAD: usize = 4;

/// What one instance may read: set up at instantiation, given its tables per call.
#[derive(Debug)]
pub(crate) struct Reader {
    stage: Arc<str>,
    granted: Arc<[String]>,
    /// The tables of the batch being processed; `None` outside `process`.
    batch: Option<Lookups>,
}

impl Reader {
    /// A reader for `stage`, granted `granted`, outside any batch.
    pub(crate) fn new(stage: Arc<str>, granted: Arc<[String]>) -> Self {
        Reader {
            stage,
            granted,
            batch: None,
        }
    }

    /// Makes `lookups` what the calls until [`Reader::end`] read.
    pub(crate) fn begin(&mut self, lookups: Lookups) {
        self.batch = Some(lookups);
    }

    /// Lets go of the batch's tables (an idle instance must not keep old versions alive).
    pub(crate) fn end(&mut self) {
        self.batch = None;
    }

    /// The table `name`, if this stage may read it now.
    fn table(&self, name: &str) -> Result<&Table, LookupError> {
        let error = |code: &str, message: String| LookupError {
            code: code.into(),
            table: name.into(),
            message,
        };
        let stage = &*self.stage;
        let Some(batch) = &self.batch else {
            return Err(error(
                codes::UNAVAILABLE,
                format!(
                    "stage `{stage}` looked up table `{name}` outside `process`: lookups are \
                     answered only while a batch is processed, not in `init`"
                ),
            ));
        };
        if !self.granted.iter().any(|g| g == name) {
            return Err(error(
                codes::NOT_GRANTED,
                format!(
                    "stage `{stage}` is not granted lookup table `{name}`: add it to the \
                     stage's `[stages.grants] lookups`"
                ),
            ));
        }
        batch.table(name).ok_or_else(|| {
            error(
                codes::UNKNOWN_TABLE,
                format!(
                    "stage `{stage}` is granted lookup table `{name}`, but no table of that \
                     name is loaded (declare it in `[[lookups]]`, or give `--lookup \
                     {name}=FILE.jsonl` to `sluice try`)"
                ),
            )
        })
    }

    /// `lookup`: the value of one key.
    pub(crate) fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, LookupError> {
        Ok(self.table(table)?.get(key).map(<[u8]>::to_vec))
    }

    /// `lookup-many`: the values of several keys, in order.
    pub(crate) fn get_many(
        &self,
        table: &str,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<Vec<u8>>>, LookupError> {
        let table = self.table(table)?;
        Ok(keys
            .iter()
            .map(|k| table.get(k).map(<[u8]>::to_vec))
            .collect())
    }

    /// `lookup-fields`: fields `names` of the values of several keys, key-major.
    pub(crate) fn get_fields(
        &self,
        table: &str,
        names: &[String],
        keys: &[Vec<u8>],
    ) -> Result<Fields, LookupError> {
        let values = self.table(table)?;
        let mut out = Fields {
            found: Vec::with_capacity(keys.len()),
            lengths: Vec::with_capacity(keys.len() * names.len()),
            values: Vec::new(),
        };
        let mut spans = vec![None; names.len()];
        // Every key's value first: a chunk's keys are scattered over the table, so each is
        // a cache miss, and short independent probes let the CPU overlap them. Then each
        // value's fields, with the values a few keys ahead already being loaded.
        let found: Vec<Option<&[u8]>> = keys.iter().map(|key| values.get(key)).collect();
        for (i, (key, value)) in keys.iter().zip(&found).enumerate() {
            if let Some(Some(ahead)) = found.get(i + PREFETCH_AHEAD) {
                prefetch(ahead);
            }
            let Some(value) = value else {
                out.found.push(false);
                out.lengths.extend(std::iter::repeat_n(-1, names.len()));
                continue;
            };
            find(value, names, &mut spans).map_err(|e| LookupError {
                code: codes::MALFORMED_VALUE.into(),
                table: table.into(),
                message: format!(
                    "the value of key {:?} in lookup table `{table}` cannot be read: {e}",
                    String::from_utf8_lossy(key)
                ),
            })?;
            out.found.push(true);
            for span in &spans {
                match span {
                    Some(span) => {
                        // A table's value is far below 2 GiB (`max-bytes` of the table).
                        out.lengths.push(span.len() as i32);
                        out.values.extend_from_slice(&value[span.clone()]);
                    }
                    None => out.lengths.push(-1),
                }
            }
        }
        Ok(out)
    }
}

/// Stages granted lookup tables that nothing declares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("lookup tables granted but not declared in [[lookups]]: {}", list(.0))]
pub struct Undeclared(
    /// Each (stage, table) granted but not declared, in stage order.
    pub Vec<(String, String)>,
);

fn list(missing: &[(String, String)]) -> String {
    missing
        .iter()
        .map(|(stage, table)| format!("stage `{stage}` is granted `{table}`"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Refuses stages granted a lookup table that is not among `declared` (the `[[lookups]]`
/// names), naming every such grant at once.
pub fn check<'a>(
    stages: impl IntoIterator<Item = &'a StageConfig>,
    declared: &BTreeSet<&str>,
) -> Result<(), Undeclared> {
    let missing: Vec<(String, String)> = stages
        .into_iter()
        .flat_map(|s| {
            s.grants
                .lookups
                .iter()
                .filter(|t| !declared.contains(t.as_str()))
                .map(|t| (s.name.clone(), t.clone()))
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Undeclared(missing))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::checkpoint::lookups::Version;

    fn lookups() -> Lookups {
        let mut profiles = Table::new(Version::File { digest: "d".into() });
        profiles.insert(b"u1", br#"{"tier":"gold"}"#);
        Lookups::new(BTreeMap::from([("profiles".into(), Arc::new(profiles))]))
    }

    fn reader(granted: &[&str]) -> Reader {
        let granted: Vec<String> = granted.iter().map(|g| g.to_string()).collect();
        Reader::new("enrich".into(), granted.into())
    }

    #[test]
    fn granted_tables_answer_present_and_absent_keys() {
        let mut r = reader(&["profiles"]);
        r.begin(lookups());
        assert_eq!(
            r.get("profiles", b"u1").unwrap().as_deref(),
            Some(&br#"{"tier":"gold"}"#[..])
        );
        assert_eq!(r.get("profiles", b"u2").unwrap(), None);
        let many = r
            .get_many("profiles", &[b"u2".to_vec(), b"u1".to_vec()])
            .unwrap();
        assert_eq!(many, vec![None, Some(br#"{"tier":"gold"}"#.to_vec())]);
    }

    #[test]
    fn tables_not_granted_or_not_loaded_are_errors_naming_table_and_stage() {
        let mut r = reader(&["products"]);
        r.begin(lookups());
        let e = r.get("profiles", b"u1").unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.table.as_str()),
            ("not_granted", "profiles")
        );
        assert!(e.message.contains("`enrich`") && e.message.contains("`profiles`"));
        let e = r.get_many("products", &[b"p1".to_vec()]).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.table.as_str()),
            ("unknown_table", "products")
        );
        assert!(e.message.contains("`enrich`"), "{}", e.message);
    }

    #[test]
    fn fields_of_several_keys_come_key_major_with_absent_ones_marked() {
        let mut r = reader(&["profiles"]);
        let mut profiles = lookups().table("profiles").unwrap().clone();
        profiles.insert(b"u2", br#"{"country":"DE","tier":null,"n":{"a":[1]}}"#);
        profiles.insert(b"bad", b"[1]");
        r.begin(Lookups::new(BTreeMap::from([(
            "profiles".into(),
            Arc::new(profiles),
        )])));
        let names = ["tier".to_string(), "country".to_string(), "n".to_string()];
        let keys = [b"u1".to_vec(), b"u9".to_vec(), b"u2".to_vec()];
        let fields = r.get_fields("profiles", &names, &keys).unwrap();
        assert_eq!(fields.found, [true, false, true]);
        assert_eq!(fields.lengths, [6, -1, -1, -1, -1, -1, 4, 4, 9]);
        assert_eq!(fields.values, br#""gold"null"DE"{"a":[1]}"#);
        let none = r.get_fields("profiles", &[], &keys).unwrap();
        assert_eq!((none.found.len(), none.lengths.len()), (3, 0));
        let e = r
            .get_fields("profiles", &names, &[b"bad".to_vec()])
            .unwrap_err();
        assert_eq!(e.code, "malformed_value");
        assert!(e.message.contains("\"bad\""), "{}", e.message);
        let e = r.get_fields("products", &names, &keys).unwrap_err();
        assert_eq!(e.code, "not_granted");
    }

    /// Many keys (more than the values loaded ahead), present and absent in turn: each
    /// key's entries are those it gets when asked alone.
    #[test]
    fn fields_of_many_keys_are_each_keys_own() {
        let mut r = reader(&["profiles"]);
        let mut profiles = lookups().table("profiles").unwrap().clone();
        for n in 0..20 {
            let value = format!(r#"{{"tier":"t{n}","n":{n},"o":{{"n":1}}}}"#);
            profiles.insert(format!("k{n}").as_bytes(), value.as_bytes());
        }
        r.begin(Lookups::new(BTreeMap::from([(
            "profiles".into(),
            Arc::new(profiles),
        )])));
        let names = ["n".to_string(), "tier".to_string()];
        let keys: Vec<Vec<u8>> = (0..30)
            .map(|n| format!("k{}", if n % 3 == 2 { 100 + n } else { n }).into_bytes())
            .collect();
        let all = r.get_fields("profiles", &names, &keys).unwrap();
        let (mut lengths, mut values) = (Vec::new(), Vec::new());
        for (i, key) in keys.iter().enumerate() {
            let one = r
                .get_fields("profiles", &names, std::slice::from_ref(key))
                .unwrap();
            assert_eq!(all.found[i], one.found[0], "key {i}");
            lengths.extend(one.lengths);
            values.extend(one.values);
        }
        assert_eq!((all.lengths, all.values), (lengths, values));
        assert_eq!(all.found.iter().filter(|&&f| f).count(), 14);
    }

    #[test]
    fn lookups_outside_a_batch_are_unavailable() {
        let mut r = reader(&["profiles"]);
        assert_eq!(r.get("profiles", b"u1").unwrap_err().code, "unavailable");
        r.begin(lookups());
        assert!(r.get("profiles", b"u1").unwrap().is_some());
        r.end();
        assert_eq!(r.get("profiles", b"u1").unwrap_err().code, "unavailable");
    }

    #[test]
    fn check_names_every_grant_of_an_undeclared_table() {
        let stage = |name: &str, tables: &[&str]| {
            let mut s: StageConfig =
                toml::from_str(&format!("name = \"{name}\"\nplugin = \"p.wasm\"\n")).unwrap();
            s.grants.lookups = tables.iter().map(|t| t.to_string()).collect();
            s
        };
        let stages = [
            stage("a", &["profiles"]),
            stage("b", &["products", "prices"]),
            stage("c", &[]),
        ];
        let declared = BTreeSet::from(["profiles", "products"]);
        assert_eq!(check(&stages[..1], &declared), Ok(()));
        let error = check(&stages, &BTreeSet::from(["products"])).unwrap_err();
        assert_eq!(
            error.0,
            vec![
                ("a".to_string(), "profiles".to_string()),
                ("b".to_string(), "prices".to_string())
            ]
        );
        assert!(
            error.to_string().contains("stage `b` is granted `prices`"),
            "{error}"
        );
        assert!(check(&stages, &declared).is_err());
    }
}
