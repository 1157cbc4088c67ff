//! The lookup tables of a pipeline between batches: each brought to its source's newest
//! version when due ([`LookupTables::refresh`]), or rebuilt at exactly the versions a
//! planned batch recorded ([`LookupTables::at`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::{Loader, LookupError};
use super::{Lookups, Table, Version};

/// One table and where it comes from.
struct Entry {
    name: String,
    interval: Duration,
    loader: Box<dyn Loader>,
    /// `None` before the first load, and after a failed one (rebuilt whole next time).
    table: Option<Arc<Table>>,
    /// When it was last brought to its newest version.
    refreshed: Option<Instant>,
}

impl Entry {
    /// Brings the table to its source's newest version; after a failure it is rebuilt
    /// whole next time.
    fn refresh(&mut self) -> Result<(), LookupError> {
        let table = self
            .table
            .get_or_insert_with(|| Arc::new(self.loader.empty()));
        // Batches that saw the old version keep it: the loader copies a shared table
        // before changing it.
        match self.loader.refresh(table) {
            Ok(changed) => {
                if changed {
                    let t = &**table;
                    tracing::debug!(lookup = %self.name, version = ?t.version(), keys = t.len(), bytes = t.bytes(), "refreshed a lookup table");
                }
                self.refreshed = Some(Instant::now());
                Ok(())
            }
            Err(error) => {
                self.table = None;
                Err(error)
            }
        }
    }
}

/// Every lookup table of a pipeline, by name.
#[derive(Default)]
pub struct LookupTables {
    entries: Vec<Entry>,
    /// Refreshes that failed since the process started.
    failures: u64,
}

impl std::fmt::Debug for LookupTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        f.debug_struct("LookupTables")
            .field("tables", &names)
            .finish_non_exhaustive()
    }
}

impl LookupTables {
    /// The tables `(name, refresh interval, loader)`; nothing is loaded yet.
    pub fn new(loaders: Vec<(String, Duration, Box<dyn Loader>)>) -> Self {
        let entries = loaders
            .into_iter()
            .map(|(name, interval, loader)| Entry {
                name,
                interval,
                loader,
                table: None,
                refreshed: None,
            })
            .collect();
        LookupTables {
            entries,
            failures: 0,
        }
    }

    /// Whether the pipeline has no lookup table.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Brings every table whose `refresh-interval` has passed to its source's newest
    /// version; returns the tables a batch sees. A failure is counted, and the table is
    /// rebuilt whole at the next attempt.
    pub fn refresh(&mut self) -> Result<Lookups, LookupError> {
        for entry in &mut self.entries {
            let due = entry
                .refreshed
                .is_none_or(|at| at.elapsed() >= entry.interval);
            if entry.table.is_some() && !due {
                continue;
            }
            entry.refresh().inspect_err(|_| self.failures += 1)?;
        }
        Ok(self.lookups())
    }

    /// The tables at exactly `versions`, as a planned batch recorded them: a replay sees
    /// the reference data the first attempt saw. A table the batch did not record (added
    /// to the configuration since) is at its newest version.
    pub fn at(&mut self, versions: &BTreeMap<String, Version>) -> Result<Lookups, LookupError> {
        for name in versions.keys() {
            if !self.entries.iter().any(|e| &e.name == name) {
                tracing::warn!(lookup = %name, "the batch being replayed used a lookup table that is no longer configured");
            }
        }
        for entry in &mut self.entries {
            let Some(version) = versions.get(&entry.name) else {
                tracing::warn!(lookup = %entry.name, "the batch being replayed did not use this lookup table: it sees the newest version");
                entry.refresh().inspect_err(|_| self.failures += 1)?;
                continue;
            };
            // The next batch brings it to the newest version.
            entry.refreshed = None;
            if entry.table.as_ref().is_some_and(|t| t.version() == version) {
                continue;
            }
            entry.table = None;
            let table = entry
                .loader
                .at(version)
                .inspect_err(|_| self.failures += 1)?;
            tracing::info!(lookup = %entry.name, ?version, keys = table.len(), "rebuilt a lookup table at the version the planned batch recorded");
            entry.table = Some(Arc::new(table));
        }
        Ok(self.lookups())
    }

    /// The tables as they are now.
    pub fn lookups(&self) -> Lookups {
        let tables = self
            .entries
            .iter()
            .filter_map(|e| Some((e.name.clone(), e.table.clone()?)))
            .collect();
        Lookups::new(tables)
    }

    /// Keys and bytes of every table loaded, by name.
    pub fn sizes(&self) -> BTreeMap<String, (usize, usize)> {
        let loaded = self
            .entries
            .iter()
            .filter_map(|e| Some((e, e.table.as_ref()?)));
        loaded
            .map(|(e, t)| (e.name.clone(), (t.len(), t.bytes())))
            .collect()
    }

    /// Records skipped since the process started, by table: without a key, or with a
    /// value that is not a JSON object (its key deleted).
    pub fn skipped(&self) -> BTreeMap<String, u64> {
        let entries = self.entries.iter();
        entries
            .map(|e| (e.name.clone(), e.loader.skipped()))
            .collect()
    }

    /// Refreshes that failed since the process started.
    pub fn failures(&self) -> u64 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::load::MemoryLookup;

    fn tables(log: &MemoryLookup, interval: Duration, max: u64) -> LookupTables {
        let loader: Box<dyn Loader> = Box::new(log.loader("profiles", max));
        LookupTables::new(vec![("profiles".into(), interval, loader)])
    }

    fn value(lookups: &Lookups, key: &str) -> Option<String> {
        let table = lookups.table("profiles")?;
        table
            .get(key.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    fn at(offset: i64) -> Version {
        Version::Topic {
            offsets: BTreeMap::from([(0, offset)]),
        }
    }

    #[test]
    fn a_refresh_brings_what_is_new_and_a_batch_keeps_what_it_saw() {
        let log = MemoryLookup::default();
        log.append("u1", Some(r#"{"tier":"gold"}"#));
        let mut tables = tables(&log, Duration::ZERO, 1 << 20);
        let first = tables.refresh().unwrap();
        assert_eq!(first.versions()["profiles"], at(1));
        log.append("u1", Some(r#"{"tier":"silver"}"#));
        log.append("u2", Some("{}"));
        log.append("u2", None);
        let second = tables.refresh().unwrap();
        assert_eq!(second.versions()["profiles"], at(4));
        assert_eq!(
            value(&second, "u1").as_deref(),
            Some(r#"{"tier":"silver"}"#)
        );
        assert_eq!(value(&second, "u2"), None, "a tombstone deletes");
        // The first batch's tables were not changed under it.
        assert_eq!(value(&first, "u1").as_deref(), Some(r#"{"tier":"gold"}"#));
        assert_eq!(tables.sizes()["profiles"].0, 1);
    }

    #[test]
    fn a_refresh_with_nothing_new_shares_the_table_the_last_batch_holds() {
        let log = MemoryLookup::default();
        log.append("u1", Some(r#"{"tier":"gold"}"#));
        let mut tables = tables(&log, Duration::ZERO, 1 << 20);
        let first = tables.refresh().unwrap();
        let second = tables.refresh().unwrap();
        let shared = |a: &Lookups, b: &Lookups| {
            Arc::ptr_eq(&a.tables()["profiles"], &b.tables()["profiles"])
        };
        assert!(shared(&first, &second), "nothing new: not copied");
        log.append("u2", Some("{}"));
        let third = tables.refresh().unwrap();
        assert!(!shared(&second, &third), "a change copies the held table");
        assert_eq!(value(&second, "u2"), None);
    }

    #[test]
    fn a_value_that_is_not_a_json_object_deletes_the_key_and_is_counted() {
        let log = MemoryLookup::default();
        log.append("u1", Some(r#"{"tier":"gold"}"#));
        log.append("u2", Some(r#"{"tier":"silver"}"#));
        let mut tables = tables(&log, Duration::ZERO, 1 << 20);
        assert_eq!(tables.refresh().unwrap().versions()["profiles"], at(2));
        log.append("u1", Some("platinum"));
        log.append("u2", Some("[1]"));
        log.append("u2", Some(r#"{"tier":"bronze"}"#));
        let refreshed = tables.refresh().unwrap();
        assert_eq!(value(&refreshed, "u1"), None, "never the old value");
        assert_eq!(
            value(&refreshed, "u2").as_deref(),
            Some(r#"{"tier":"bronze"}"#)
        );
        assert_eq!(tables.skipped()["profiles"], 2);
        assert_eq!(tables.sizes()["profiles"].0, 1);
    }

    #[test]
    fn a_table_is_kept_for_its_refresh_interval() {
        let log = MemoryLookup::default();
        log.append("u1", Some("{}"));
        let mut tables = tables(&log, Duration::from_secs(3600), 1 << 20);
        assert_eq!(tables.refresh().unwrap().versions()["profiles"], at(1));
        log.append("u2", Some("{}"));
        assert_eq!(tables.refresh().unwrap().versions()["profiles"], at(1));
    }

    #[test]
    fn a_replay_sees_the_recorded_version_and_the_next_batch_the_newest() {
        let log = MemoryLookup::default();
        log.append("u1", Some(r#"{"v":1}"#));
        log.append("u1", Some(r#"{"v":2}"#));
        let mut tables = tables(&log, Duration::from_secs(3600), 1 << 20);
        let versions = BTreeMap::from([("profiles".to_string(), at(1))]);
        let replayed = tables.at(&versions).unwrap();
        assert_eq!(value(&replayed, "u1").as_deref(), Some(r#"{"v":1}"#));
        assert_eq!(replayed.versions(), versions);
        // A table the plan did not record is at its newest.
        let newest = tables.at(&BTreeMap::new()).unwrap();
        assert_eq!(value(&newest, "u1").as_deref(), Some(r#"{"v":2}"#));
        // After a replay the next batch refreshes, whatever the interval.
        tables.at(&versions).unwrap();
        assert_eq!(tables.refresh().unwrap().versions()["profiles"], at(2));
    }

    #[test]
    fn a_table_over_max_bytes_fails_and_is_counted() {
        let log = MemoryLookup::default();
        log.append("u1", Some(r#"{"tier":"gold"}"#));
        let mut tables = tables(&log, Duration::ZERO, 10);
        let error = tables.refresh().unwrap_err();
        assert!(
            matches!(&error, LookupError::TooLarge { table, max: 10, .. } if table == "profiles"),
            "{error}"
        );
        assert!(error.to_string().contains("max-bytes"), "{error}");
        assert!(!error.is_transient());
        assert_eq!(tables.failures(), 1);
        let beyond = BTreeMap::from([("profiles".to_string(), at(5))]);
        assert!(tables.at(&beyond).is_err());
        assert_eq!(tables.failures(), 2);
    }
}
