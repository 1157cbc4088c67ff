//! Fields of events that the table has no column for: what the pipeline does with them
//! (`[sink] unknown-fields`), and the bounded count of the ones dropped.
//!
//! A dropped field is never silent: each batch counts its drops per field name, and the
//! first [`MAX_FIELD_LABELS`] distinct names seen by the process keep a count (a label of
//! the progress line and of `sluice_dropped_fields_total`) of their own, each logged once
//! when first seen; later names are counted together under [`OTHER_FIELD`] (logged once),
//! so events with dynamic keys cannot make the counts or the logs grow without end. A
//! name longer than [`MAX_LABEL_BYTES`] is cut there (ending in `…`), so a single huge key
//! cannot either.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;

/// What happens to a field of an event that the table has no column for.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownFields {
    /// The row lands without the field; the drop is counted per field name (in the
    /// progress line's `dropped_fields` and in `sluice_dropped_fields_total`) and logged
    /// once per new field name. What a Kafka Connect Iceberg sink does (without its schema
    /// evolution), but counted.
    #[default]
    Drop,
    /// The whole event goes to the dead-letter output with the code `unknown_field`,
    /// naming the field.
    DeadLetter,
    /// The field becomes a new optional column, its type inferred from its values (see
    /// the book's "Schemas that move"), committed with the batch that needs it; rows
    /// written before read it as null. A value that outgrows its column's type widens it
    /// where Iceberg allows (`int` to `long`, `float` to `double`, decimal precision).
    /// Kafka Connect's `iceberg.tables.evolve-schema-enabled = true`.
    Add,
}

/// Distinct field names that keep a count of their own; later ones count under
/// [`OTHER_FIELD`].
pub const MAX_FIELD_LABELS: usize = 100;

/// The longest label a dropped field's name keeps, in bytes (its `…` included).
pub const MAX_LABEL_BYTES: usize = 128;

/// `name` cut to at most [`MAX_LABEL_BYTES`] bytes, at a character boundary, ending in `…`
/// when cut.
fn short(mut name: String) -> String {
    if name.len() <= MAX_LABEL_BYTES {
        return name;
    }
    let mut end = MAX_LABEL_BYTES - '…'.len_utf8();
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name.push('…');
    name
}

/// The label of the dropped fields past the first [`MAX_FIELD_LABELS`] names.
pub const OTHER_FIELD: &str = "_other";

/// The names of dropped fields a process has seen, bounded: which keep a label of their
/// own, and whether the overflow was logged.
#[derive(Debug, Default)]
pub struct DroppedFields {
    admitted: HashSet<String>,
    overflow_logged: bool,
}

impl DroppedFields {
    /// One batch's drops (count per field name) under bounded labels, logging each name
    /// the first time it is seen (and, once, that later names count under `_other`).
    pub fn label(&mut self, dropped: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        let mut labelled = BTreeMap::new();
        for (name, n) in dropped {
            let name = short(name);
            let label = if self.admitted.contains(&name) {
                name
            } else if self.admitted.len() < MAX_FIELD_LABELS {
                tracing::warn!(
                    field = %name,
                    "events carry a field `{name}` that the table has no column for: it is \
                     dropped and counted in `dropped_fields`; set `[sink] unknown-fields = \
                     \"dead-letter\"` to dead-letter such events instead"
                );
                self.admitted.insert(name.clone());
                name
            } else {
                if !self.overflow_logged {
                    self.overflow_logged = true;
                    tracing::warn!(
                        field = %name,
                        "more than {MAX_FIELD_LABELS} distinct fields the table has no column \
                         for were dropped (the latest: `{name}`): later names are counted \
                         together under `{OTHER_FIELD}` and not logged"
                    );
                }
                OTHER_FIELD.to_string()
            };
            *labelled.entry(label).or_default() += n;
        }
        labelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let mut fields = DroppedFields::default();
        let long = "é".repeat(5000);
        let labelled = fields.label(BTreeMap::from([(long.clone(), 2), (format!("{long}x"), 3)]));
        let (label, n) = labelled.iter().next().unwrap();
        assert_eq!((labelled.len(), *n), (1, 5), "{labelled:?}");
        assert!(
            label.len() <= MAX_LABEL_BYTES && label.ends_with('…'),
            "{label}"
        );
        assert!(long.starts_with(label.trim_end_matches('…')));
    }

    #[test]
    fn names_past_the_cap_count_under_other() {
        let mut fields = DroppedFields::default();
        let first: BTreeMap<String, u64> = (0..MAX_FIELD_LABELS)
            .map(|i| (format!("f{i:03}"), 1))
            .collect();
        assert_eq!(fields.label(first.clone()), first);
        let later = BTreeMap::from([
            ("f000".to_string(), 2),
            ("new_a".to_string(), 3),
            ("new_b".to_string(), 4),
        ]);
        assert_eq!(
            fields.label(later),
            BTreeMap::from([("f000".to_string(), 2), (OTHER_FIELD.to_string(), 7)])
        );
    }
}
