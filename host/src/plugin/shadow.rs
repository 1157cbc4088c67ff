//! Shadow mode: a candidate version of a stage runs beside the active one, on the same
//! events, without affecting any output. Each batch reports where the two verdicts differ,
//! per pair of verdicts (e.g. `kept -> rejected:invalid_price`), with counts and the
//! positions of a few such events, so a rule change's effect on live traffic is known
//! before it is activated.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Plugin;
use super::chain::{self, Fate, Judged};
use crate::record::Record;

/// Positions kept per disagreement.
const SAMPLES: usize = 5;

/// One kind of disagreement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// Events judged this way.
    pub count: u64,
    /// `topic/partition@offset` of the first few.
    pub samples: Vec<String>,
}

/// How a shadow version's verdicts compare with the active version's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ShadowReport {
    /// sha256 of the shadow module.
    pub digest: String,
    /// Events both judged.
    pub events: u64,
    /// Events on which they agree (kept or rewritten by both, rejected with the same code
    /// by both, or failed on by both).
    pub agreed: u64,
    /// Where they differ, keyed `<active verdict> -> <shadow verdict>`.
    pub disagreements: BTreeMap<String, Disagreement>,
}

impl ShadowReport {
    /// Adds `other` (of the same shadow) to this report.
    pub fn merge(&mut self, other: ShadowReport) {
        if self.digest.is_empty() {
            self.digest = other.digest;
        }
        self.events += other.events;
        self.agreed += other.agreed;
        for (key, d) in other.disagreements {
            let mine = self.disagreements.entry(key).or_default();
            mine.count += d.count;
            let room = SAMPLES.saturating_sub(mine.samples.len());
            mine.samples.extend(d.samples.into_iter().take(room));
        }
    }
}

fn label(fate: &Fate) -> String {
    match fate {
        Fate::Kept | Fate::Rewritten => "kept".into(),
        Fate::Rejected { rejection, .. } => format!("rejected:{}", rejection.code),
        Fate::Failed { .. } => "failed".into(),
    }
}

/// Runs `shadow` on what stage `stage` of `stages` saw of `records` (the batch's records
/// before any stage), and compares with `outcomes`, the active chain's outcomes for the
/// same records.
pub fn compare(
    stages: &[Plugin],
    stage: usize,
    shadow: &Plugin,
    records: &[Record],
    outcomes: &[Judged],
    chunk_size: usize,
) -> ShadowReport {
    // The events as they reached the stage: after the stages before it.
    let reached: Vec<(usize, Record)> = if stage == 0 {
        records.iter().cloned().enumerate().collect()
    } else {
        chain::run(&stages[..stage], records.to_vec(), chunk_size)
            .into_iter()
            .enumerate()
            .filter(|(_, o)| matches!(o.fate, Fate::Kept | Fate::Rewritten))
            .map(|(i, o)| (i, o.record))
            .collect()
    };
    let (indices, inputs): (Vec<usize>, Vec<Record>) = reached.into_iter().unzip();
    let judged = chain::run(std::slice::from_ref(shadow), inputs, chunk_size);
    let mut report = ShadowReport {
        digest: shadow.digest().to_string(),
        ..ShadowReport::default()
    };
    for (i, theirs) in indices.into_iter().zip(judged) {
        let ours = match &outcomes[i].fate {
            Fate::Rejected { stage: s, .. } | Fate::Failed { stage: s, .. } if *s == stage => {
                label(&outcomes[i].fate)
            }
            _ => "kept".to_string(),
        };
        let theirs_label = label(&theirs.fate);
        report.events += 1;
        if ours == theirs_label {
            report.agreed += 1;
            continue;
        }
        let d = report
            .disagreements
            .entry(format!("{ours} -> {theirs_label}"))
            .or_default();
        d.count += 1;
        if d.samples.len() < SAMPLES {
            d.samples.push(theirs.record.position());
        }
    }
    report
}
