//! The lookup tables (`[[lookups]]`): keys, bytes and skipped records per lookup.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use super::{Families, gauge_of, raise_to};
use crate::progress::Progress;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LookupLabel {
    lookup: String,
}

/// The lookup tables (`[[lookups]]`).
pub(super) struct LookupMetrics {
    keys: Family<LookupLabel, Gauge>,
    bytes: Family<LookupLabel, Gauge>,
    skipped: Family<LookupLabel, Counter>,
    refresh_failures: Counter,
}

impl LookupMetrics {
    pub(super) fn register(f: &mut Families) -> Self {
        LookupMetrics {
            keys: f.add(
                "lookup_keys",
                "Keys of each lookup table the last batch saw",
                Family::default(),
            ),
            bytes: f.with_unit(
                "lookup",
                Unit::Bytes,
                "Bytes of keys and values of each lookup table the last batch saw",
                Family::default(),
            ),
            skipped: f.add(
                "lookup_skipped_records",
                "Records of each lookup table's source skipped: without a key, or with a value that is not a JSON object (its key deleted)",
                Family::default(),
            ),
            refresh_failures: f.add(
                "lookup_refresh_failures",
                "Lookup-table refreshes that failed (each a transient fault, retried)",
                Counter::default(),
            ),
        }
    }

    pub(super) fn record(&self, p: &Progress) {
        for (lookup, size) in &p.lookups {
            let label = LookupLabel {
                lookup: lookup.clone(),
            };
            self.keys.get_or_create(&label).set(gauge_of(size.keys));
            self.bytes.get_or_create(&label).set(gauge_of(size.bytes));
            raise_to(&self.skipped.get_or_create(&label), size.skipped);
        }
        raise_to(&self.refresh_failures, p.lookup_refresh_failures);
    }
}
