//! Stream-stream joins (`[[joins]]`): the pipeline's on-time, deduplicated events (the
//! left side) joined with the records of a second topic (the right side) on equal keys,
//! within a time bound: a right record at `tr` matches a left event at `tl` when
//! `tl - before <= tr <= tl + after`.
//!
//! Both sides are kept in the state, by key. Per batch, each on-time right record is
//! matched against the left rows held, then held itself; then each on-time left event is
//! matched against the right rows held (those of this batch included), then held. Every
//! pair is so emitted once, in the batch where its second record arrives.
//!
//! Each side has its own watermark: the left one is the pipeline's (`[event-time]`), the
//! right one is the join's, over the right topic's partitions, moved like the left one
//! (the minimum over partitions that are not idle, `right-max-delay` behind). A right side
//! whose partitions are all idle (or that has sent nothing for `idle-timeout`, or has no
//! partition) follows the left watermark instead: it stops holding the left rows, and
//! moves with the events' time, not the wall clock's, so a backfill expires state as fast
//! as it reads. At the end
//! of a batch, a left row leaves the state once the right watermark is past `tl + after`
//! (no right record that could match it can still come: it would be late), and a right
//! row once the left watermark is past `tr + before`. A left-outer join emits a left row
//! that matched nothing, with the right columns null, when it leaves. Late right records
//! (behind the right watermark before the batch) are late data, handled as
//! `[event-time] late` says.
//!
//! Each side holds at most `max-rows` rows (see [`JoinConfig::max_rows`]). Past it, the
//! oldest rows of that side leave early, as if the other side's watermark had passed
//! them: a left row of a left-outer join is emitted with the right columns null, any
//! other row is dropped; either way it is counted ([`JoinOperator::evicted`]) and
//! logged. The bound is a function of the state, so a replayed batch evicts the same rows.
//!
//! Rows are numbered in arrival order (a per-join counter in the state), so a replayed
//! batch numbers them the same: the ids key the rows on a topic, and tell the saved rows
//! a delta changes (a left row of a left-outer join changes when it first matches).

pub mod config;
pub mod side;

use self::config::{JoinConfig, JoinKind};
use self::side::{Row, Side};
pub use self::side::{SavedJoin, SavedJoinRef, SavedJoinRow, SavedJoinRowRef};
use super::config::EventTimeConfig;
use super::extract::{ExtractError, Extractor, Scalar, event_time};
use super::outcome::{Arrival, StateSize};
use super::watermark::{Clock, Watermark, WhenIdle};
use super::window::PackedKey;
use crate::units::{Micros, Millis};

/// What a join reads from a left event.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinInput {
    /// The key values; `None` when one is missing or null (it matches nothing).
    pub key: Option<PackedKey>,
    /// The JSON text of each left field, in order.
    pub values: PackedKey,
}

/// The id of a join row, from its record's position: the same in every run and every
/// process (a replay, or a group whose members each join their own partitions, gives each
/// row the id one process gives it), and the key of the rows it joins into on Kafka.
/// xxHash64 of the topic, partition and offset; never 0 (0 is "no id").
pub fn row_id(topic: &str, partition: i32, offset: i64) -> u64 {
    use std::hash::Hasher;
    let mut hash = twox_hash::XxHash64::with_seed(0);
    hash.write(topic.as_bytes());
    hash.write(&partition.to_le_bytes());
    hash.write(&offset.to_le_bytes());
    hash.finish().max(1)
}

/// What a join reads from a right record.
#[derive(Debug, Clone, PartialEq)]
pub struct RightFields {
    /// Its event time.
    pub time: Micros,
    /// Its id from its position ([`row_id`]); 0 when read without one (the join then
    /// numbers its rows itself).
    pub id: u64,
    /// The key values.
    pub key: PackedKey,
    /// The JSON text of each right field, in order.
    pub values: PackedKey,
}

/// One joined row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct JoinRow {
    /// The left event's id.
    pub left_id: u64,
    /// The right record's id; `None` in a left-outer row.
    pub right_id: Option<u64>,
    /// The left fields' JSON texts.
    pub left: PackedKey,
    /// The right fields' JSON texts; `None` in a left-outer row.
    pub right: Option<PackedKey>,
}

/// The JSON text of a value read.
fn json_text(value: &Scalar) -> String {
    match value {
        Scalar::Str(s) => serde_json::Value::String(s.clone()).to_string(),
        Scalar::Num(_, text) | Scalar::Other(text) => text.clone(),
    }
}

/// The slots (in the event-time extractor) of the fields a join reads from left events.
#[derive(Debug, Clone)]
pub struct LeftSlots {
    on: Vec<usize>,
    fields: Vec<usize>,
}

impl LeftSlots {
    /// Slots for `config`, assigned by `slot`.
    pub fn new(config: &JoinConfig, mut slot: impl FnMut(&str) -> usize) -> Self {
        LeftSlots {
            on: config.on.iter().map(|f| slot(f)).collect(),
            fields: config.left_fields.iter().map(|f| slot(f.field())).collect(),
        }
    }

    /// The join input of an event whose fields are `values`.
    pub fn input(&self, values: &[Option<Scalar>]) -> JoinInput {
        let key = read_key(&self.on, values);
        let texts: Vec<Option<String>> = self
            .fields
            .iter()
            .map(|&i| values[i].as_ref().map(json_text))
            .collect();
        JoinInput {
            key,
            values: PackedKey::pack(texts.iter().map(Option::as_deref)),
        }
    }
}

fn read_key(slots: &[usize], values: &[Option<Scalar>]) -> Option<PackedKey> {
    let mut key = Vec::with_capacity(slots.len());
    for &i in slots {
        key.push(values[i].as_ref()?.text());
    }
    Some(PackedKey::pack(key.into_iter().map(Some)))
}

/// One join and its state.
#[derive(Debug, Clone)]
pub struct JoinOperator {
    config: JoinConfig,
    extractor: Extractor,
    time_slot: usize,
    key_slots: Vec<usize>,
    value_slots: Vec<usize>,
    clock: Clock,
    watermark: Watermark,
    /// The next number for a row whose record came without a position ([`row_id`]).
    next_id: u64,
    left: Side,
    right: Side,
    /// Rows evicted by `max-rows`: (left, right).
    evicted: (u64, u64),
}

impl JoinOperator {
    /// A join with empty state; its right watermark moves like `event_time`'s, with the
    /// join's own delay.
    pub fn new(config: &JoinConfig, event_time: &EventTimeConfig) -> Self {
        let mut extractor = Extractor::new([config.right_time_field.as_str()]);
        let time_slot = extractor.position(&config.right_time_field);
        let key_slots = config
            .right_on()
            .iter()
            .map(|f| extractor.position(f))
            .collect();
        let value_slots = config
            .right_fields
            .iter()
            .map(|f| extractor.position(f.field()))
            .collect();
        JoinOperator {
            config: config.clone(),
            extractor,
            time_slot,
            key_slots,
            value_slots,
            clock: Clock {
                delay: Micros::from_duration(config.right_max_delay),
                idle: Millis::from_duration(event_time.idle_timeout),
                max_future: Micros::from_duration(event_time.max_future),
                session_start: Millis(0),
            },
            watermark: Watermark::default(),
            next_id: 0,
            left: Side::default(),
            right: Side::default(),
            evicted: (0, 0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &JoinConfig {
        &self.config
    }

    /// Reads what the join needs from a right record. Safe to call from many threads.
    pub fn right_fields(&self, value: Option<&[u8]>) -> Result<RightFields, ExtractError> {
        let values = self.extractor.read(value)?;
        let time = event_time(
            &self.config.right_time_field,
            values[self.time_slot].as_ref(),
        )?;
        let key = read_key(&self.key_slots, &values).ok_or_else(|| ExtractError {
            code: "missing_join_key",
            message: format!(
                "the record has no value for every key field of join `{}` ({})",
                self.config.name,
                self.config.right_on().join(", ")
            ),
            field: None,
        })?;
        let texts: Vec<Option<String>> = self
            .value_slots
            .iter()
            .map(|&i| values[i].as_ref().map(json_text))
            .collect();
        Ok(RightFields {
            id: 0,
            time,
            key,
            values: PackedKey::pack(texts.iter().map(Option::as_deref)),
        })
    }

    /// The text of a right record's key field that `left_field` of `on` matches, if the
    /// record has one (for the source's key check).
    pub fn key_text(&self, value: Option<&[u8]>, left_field: &str) -> Option<String> {
        let i = self.config.on.iter().position(|f| f == left_field)?;
        let values = self.extractor.read(value).ok()?;
        Some(values.get(self.key_slots[i])?.as_ref()?.text().to_string())
    }

    /// Sets when this run started (see [`Clock::session_start`]).
    pub fn set_session_start(&mut self, start: Millis) {
        self.clock.session_start = start;
    }

    /// The right watermark at processing time `now`, the left one being `left`.
    pub fn watermark_at(&self, now: Millis, left: Option<Micros>) -> Option<Micros> {
        self.watermark
            .at_when_idle(now, self.clock, WhenIdle::Follow(left))
    }

    /// The right watermark reached.
    pub fn watermark(&self) -> Option<Micros> {
        self.watermark.current
    }

    /// Adds an assigned right partition (`topic/partition`) not known yet.
    pub fn register(&mut self, partition: &str, now: Millis) {
        self.watermark.register(partition, now);
    }

    /// Judges right records (`(partition, fields)` in batch order) against the right
    /// watermark at `now` (the left one being `left`): too far in the future, late, or on
    /// time; the on-time ones move the partitions' clocks. Returns the verdicts and the
    /// watermark they were judged by.
    pub fn judge(
        &mut self,
        records: &[(&str, &RightFields)],
        now: Millis,
        left: Option<Micros>,
    ) -> (Vec<Arrival>, Option<Micros>) {
        let before = self.watermark_at(now, left);
        let horizon = now.as_micros().saturating_add(self.clock.max_future);
        let mut verdicts = Vec::with_capacity(records.len());
        for &(partition, fields) in records {
            if fields.time > horizon {
                verdicts.push(Arrival::Future);
                continue;
            }
            self.watermark.observe(partition, fields.time, now);
            verdicts.push(if before.is_some_and(|w| fields.time < w) {
                Arrival::Late
            } else {
                Arrival::OnTime
            });
        }
        (verdicts, before)
    }

    /// Matches a batch's on-time right records, then its on-time left events (with their
    /// times), in order, and holds them; returns the pairs (and, in a left-outer join, the
    /// left events without a key, which match nothing).
    /// Each left event comes with its time and id.
    pub fn join(
        &mut self,
        left: &[(&JoinInput, Micros, u64)],
        right: &[&RightFields],
    ) -> Vec<JoinRow> {
        let mut out = Vec::new();
        for r in right {
            self.join_right(r, &mut out);
        }
        for &(l, time, id) in left {
            self.join_left(l, time, id, &mut out);
        }
        out
    }

    /// The time bounds (`before`, `after`), whether the join is left-outer, and the id of
    /// the next row held: `given` (its record's, see [`row_id`]), or the next number when
    /// the record came without one.
    fn next_match(&mut self, given: u64) -> (Micros, Micros, bool, u64) {
        let id = if given != 0 { given } else { self.next_id };
        self.next_id += 1;
        (
            Micros(self.config.before_micros()),
            Micros(self.config.after_micros()),
            self.config.kind == JoinKind::LeftOuter,
            id,
        )
    }

    /// Matches one right record against the left rows held (marking a left-outer row
    /// that first matches as changed), then holds it.
    fn join_right(&mut self, r: &RightFields, out: &mut Vec<JoinRow>) {
        let (before, after, outer, id) = self.next_match(r.id);
        // A left row at `tl` matches when tl - after <= tr <= tl + before.
        let (from, to) = (r.time.saturating_sub(after), r.time.saturating_add(before));
        let save = self.left.save;
        if let Some(rows) = self.left.rows.get_mut(&r.key) {
            let mut changed = false;
            for l in rows.iter_mut().filter(|l| l.time >= from && l.time <= to) {
                out.push(JoinRow {
                    left_id: l.id,
                    right_id: Some(id),
                    left: l.values.clone(),
                    right: Some(r.values.clone()),
                });
                if outer && !l.matched {
                    l.matched = true;
                    l.changed_in = save;
                    changed = true;
                }
            }
            if changed {
                self.left.changed.insert(r.key.clone());
            }
        }
        let row = Row {
            id,
            time: r.time,
            values: r.values.clone(),
            matched: false,
            changed_in: 0,
        };
        self.right.insert(r.key.clone(), row);
    }

    /// Matches one left event at `time` against the right rows held (those of this batch
    /// included), then holds it; a left-outer event without a key is emitted at once.
    fn join_left(&mut self, l: &JoinInput, time: Micros, given: u64, out: &mut Vec<JoinRow>) {
        let (before, after, outer, id) = self.next_match(given);
        let Some(key) = &l.key else {
            if outer {
                out.push(JoinRow {
                    left_id: id,
                    right_id: None,
                    left: l.values.clone(),
                    right: None,
                });
            }
            return;
        };
        let (from, to) = (time.saturating_sub(before), time.saturating_add(after));
        let mut matched = false;
        if let Some(rows) = self.right.rows.get(key) {
            for r in rows.iter().filter(|r| r.time >= from && r.time <= to) {
                matched = true;
                out.push(JoinRow {
                    left_id: id,
                    right_id: Some(r.id),
                    left: l.values.clone(),
                    right: Some(r.values.clone()),
                });
            }
        }
        let row = Row {
            id,
            time,
            values: l.values.clone(),
            matched: outer && matched,
            changed_in: 0,
        };
        self.left.insert(key.clone(), row);
    }

    /// Ends a batch: the right watermark moves on (with `flush`, past every left row held),
    /// and the rows the other side's watermark is past leave the state; in a left-outer
    /// join the left rows that matched nothing are returned, right columns null.
    pub fn finish(
        &mut self,
        left_watermark: Option<Micros>,
        now: Millis,
        flush: bool,
    ) -> Vec<JoinRow> {
        let after = Micros(self.config.after_micros());
        let to = if flush {
            self.left
                .last_time()
                .map(|t| t.saturating_add(after).saturating_add(Micros(1)))
        } else {
            None
        };
        let right_watermark =
            self.watermark
                .advance_when_idle(now, self.clock, to, WhenIdle::Follow(left_watermark));
        let outer = self.config.kind == JoinKind::LeftOuter;
        let mut out = Vec::new();
        let mut gone = |row: Row| {
            if outer && !row.matched {
                out.push(JoinRow {
                    left_id: row.id,
                    right_id: None,
                    left: row.values,
                    right: None,
                });
            }
        };
        self.expire(left_watermark, right_watermark, &mut gone);
        self.evict(&mut gone);
        out
    }

    /// Holds each side to `max-rows`: its oldest rows leave early (left ones through
    /// `left_gone`), counted in [`JoinOperator::evicted`].
    fn evict(&mut self, mut left_gone: impl FnMut(Row)) {
        let max = self.config.max_rows;
        let left = self.left.evict(max, |_, row| left_gone(row));
        let right = self.right.evict(max, |_, _| {});
        if left + right > 0 {
            self.evicted.0 += left;
            self.evicted.1 += right;
            tracing::warn!(
                join = %self.config.name,
                left,
                right,
                max_rows = max,
                "Join state reached max-rows: the oldest rows left before the other side's \
                 watermark passed them (is the right topic idle or far behind?)."
            );
        }
    }

    /// Rows evicted by `max-rows` since this operator was made: (left, right).
    pub fn evicted(&self) -> (u64, u64) {
        self.evicted
    }

    /// Removes the rows the watermarks are past, handing the left ones to `left_gone`.
    fn expire(
        &mut self,
        left_watermark: Option<Micros>,
        right_watermark: Option<Micros>,
        mut left_gone: impl FnMut(Row),
    ) {
        let (before, after) = (
            Micros(self.config.before_micros()),
            Micros(self.config.after_micros()),
        );
        // A left row at tl goes once the right watermark is past tl + after: tl < w - after.
        if let Some(w) = right_watermark {
            self.left
                .expire(w.saturating_sub(after), |_, row| left_gone(row));
        }
        // A right row at tr goes once the left watermark is past tr + before.
        if let Some(w) = left_watermark {
            self.right.expire(w.saturating_sub(before), |_, _| {});
        }
    }

    /// Whether a batch without events at `now` would emit left-outer rows (the right
    /// watermark moved on; the left one being `left`), or, with `flush`, whether any left
    /// row waits.
    pub fn due(&self, now: Millis, flush: bool, left: Option<Micros>) -> bool {
        if self.config.kind != JoinKind::LeftOuter {
            return false;
        }
        let Some(first) = self.left.first_time() else {
            return false;
        };
        if flush {
            return true;
        }
        let after = Micros(self.config.after_micros());
        self.watermark_at(now, left)
            .is_some_and(|w| first < w.saturating_sub(after))
    }

    /// Rows held, both sides.
    pub fn rows(&self) -> usize {
        self.left.len + self.right.len
    }

    /// Rows held on each side: (left, right).
    pub fn side_rows(&self) -> (usize, usize) {
        (self.left.len, self.right.len)
    }

    /// The size of the state.
    pub fn size(&self) -> StateSize {
        StateSize {
            rows: self.rows() as u64,
            bytes: (self.left.bytes() + self.right.bytes()) as u64,
        }
    }

    /// Distinct keys held, both sides together.
    pub fn keys(&self) -> usize {
        let right_only = self
            .right
            .rows
            .keys()
            .filter(|k| !self.left.rows.contains_key(*k))
            .count();
        self.left.rows.len() + right_only
    }

    /// Rows added or changed since [`JoinOperator::track`].
    pub fn changed(&self) -> usize {
        self.left.changed_rows() + self.right.changed_rows()
    }

    /// The state, borrowed for saving.
    pub fn save_ref(&self) -> SavedJoinRef<'_> {
        SavedJoinRef {
            right_watermark: &self.watermark,
            next_id: self.next_id,
            left: self.left.saved().collect(),
            right: self.right.saved().collect(),
        }
    }

    /// The changes since [`JoinOperator::track`]: rows added or changed; rows gone are
    /// those the watermarks are past (see [`JoinOperator::apply`]).
    pub fn delta_ref(&self) -> SavedJoinRef<'_> {
        SavedJoinRef {
            right_watermark: &self.watermark,
            next_id: self.next_id,
            left: self.left.delta().collect(),
            right: self.right.delta().collect(),
        }
    }

    /// Starts recording changes afresh: called after each save.
    pub fn track(&mut self) {
        self.left.track();
        self.right.track();
    }

    /// Restores saved state; changes are not recorded until [`JoinOperator::track`].
    pub fn restore(&mut self, saved: SavedJoin) {
        self.watermark = saved.right_watermark;
        self.next_id = saved.next_id;
        self.left = Side::default();
        self.right = Side::default();
        self.left.restore(saved.left);
        self.right.restore(saved.right);
    }

    /// Applies saved changes: the rows upserted, then the rows the watermarks (the
    /// delta's left one, and its right one) are past leave, as in the batch that made them.
    pub fn apply(&mut self, delta: SavedJoin, left_watermark: Option<Micros>) {
        self.watermark = delta.right_watermark;
        self.next_id = delta.next_id;
        self.left.restore(delta.left);
        self.right.restore(delta.right);
        let right_watermark = self.watermark.current;
        self.expire(left_watermark, right_watermark, |_| {});
    }
}

#[cfg(test)]
mod tests;
