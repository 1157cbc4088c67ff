//! Recent dead letters, with their values, for a caller with the token
//! (`GET /dead-letters`): values can hold personal data, so unlike the counts (in `/status`
//! and `/metrics`) they are never shown to anyone who cannot also change the pipeline. The
//! last [`KEPT`] are kept in memory, each value cut at [`VALUE_BYTES`].

use std::collections::VecDeque;

use serde::Serialize;

use crate::record::{Reason, Record};

/// Dead letters kept.
pub const KEPT: usize = 50;
/// The most bytes of a value shown.
pub const VALUE_BYTES: usize = 1024;

/// One dead letter, as the console shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    /// The batch that sent it to the dead-letter output.
    pub batch_id: u64,
    /// Where it was read: `topic/partition@offset`.
    pub position: String,
    /// The stage (or `encode`, `event-time`) that refused it.
    pub stage: String,
    /// Why, as a code.
    pub code: String,
    /// Why, for people.
    pub message: String,
    /// Its value as text (invalid UTF-8 replaced), cut at [`VALUE_BYTES`].
    pub value: String,
}

impl DeadLetter {
    /// The sample of `record`, refused for `reason` in batch `batch_id`.
    pub fn of(batch_id: u64, record: &Record, reason: &Reason) -> DeadLetter {
        let value = record.value.as_deref().unwrap_or_default();
        let cut = &value[..value.len().min(VALUE_BYTES)];
        DeadLetter {
            batch_id,
            position: format!("{}/{}@{}", record.topic, record.partition, record.offset),
            stage: reason.stage.clone(),
            code: reason.code.clone(),
            message: reason.message.to_string(),
            value: String::from_utf8_lossy(cut).into_owned(),
        }
    }
}

/// The last [`KEPT`] samples, newest last.
#[derive(Debug, Default)]
pub struct DeadLetters(VecDeque<DeadLetter>);

impl DeadLetters {
    /// Adds a batch's dead letters, keeping the last [`KEPT`].
    pub fn add(&mut self, samples: impl IntoIterator<Item = DeadLetter>) {
        self.0.extend(samples);
        while self.0.len() > KEPT {
            self.0.pop_front();
        }
    }

    /// The samples, newest first.
    pub fn newest_first(&self) -> Vec<DeadLetter> {
        self.0.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admin::tests::{call, start_with};

    #[test]
    fn values_are_shown_only_with_the_token() {
        let (admin, _found) = start_with("token = \"s3cret\"");
        let admin = admin.unwrap();
        let reason = Reason {
            stage: "encode".into(),
            digest: None,
            code: "malformed_json".into(),
            message: "the value is not valid JSON".into(),
            field: None,
        };
        let record = Record::with_value(Arc::from("clicks"), 41, "{\"email\": \"a@b.c\"");
        admin.record_dead_letters(3, &[(record, reason)]);
        for token in ["", "guess"] {
            let refused = call(&admin, "GET", "/dead-letters", token, "");
            assert_eq!(refused.status, 401, "{}", refused.body);
            assert!(!refused.body.contains("a@b.c"));
        }
        let shown = call(&admin, "GET", "/dead-letters", "s3cret", "");
        assert_eq!(shown.status, 200, "{}", shown.body);
        let body: serde_json::Value = serde_json::from_str(&shown.body).unwrap();
        let letter = &body["dead_letters"][0];
        assert_eq!(letter["position"], "clicks/0@41");
        assert_eq!(letter["value"], "{\"email\": \"a@b.c\"");
        assert_eq!(letter["batch_id"], 3);
    }

    #[test]
    fn the_last_samples_are_kept_and_values_are_cut() {
        let mut kept = DeadLetters::default();
        let reason = Reason {
            stage: "rules".into(),
            digest: None,
            code: "invalid_price".into(),
            message: "price is negative".into(),
            field: None,
        };
        let long = format!("{{\"x\": \"{}\"}}", "é".repeat(VALUE_BYTES));
        let records: Vec<Record> = (0..KEPT as i64 + 5)
            .map(|offset| Record::with_value(Arc::from("clicks"), offset, long.clone()))
            .collect();
        kept.add(records.iter().map(|r| DeadLetter::of(7, r, &reason)));
        let kept = kept.newest_first();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept[0].position, format!("clicks/0@{}", KEPT + 4));
        assert_eq!(kept[KEPT - 1].position, "clicks/0@5");
        assert!(
            kept[0].value.len() <= VALUE_BYTES + 2,
            "cut, on a character or replaced"
        );
        assert_eq!(
            (kept[0].stage.as_str(), kept[0].code.as_str()),
            ("rules", "invalid_price")
        );
    }
}
