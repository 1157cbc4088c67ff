//! The glue between the generated bindings and a [`Processor`]. Used by [`crate::export!`];
//! not part of the public API.

use std::any::Any;
use std::cell::RefCell;

use crate::Processor;
use crate::bindings::sluice::plugin::types::{
    Action, EventChunk, Rejection as WitRejection, Rewrite, Verdicts,
};
use crate::event::{ChunkValues, Event, Header, InChunk};
use crate::lookup::Lookups;
use crate::params::Params;
use crate::verdict::Verdict;

thread_local! {
    /// The plugin built by `init`. A component instance is single-threaded.
    static PLUGIN: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Builds the plugin from its parameters and keeps it for `process`.
pub fn init<P: Processor>(params: Vec<(String, String)>) -> Result<(), String> {
    let plugin = P::init(&Params::new(params))?;
    PLUGIN.with_borrow_mut(|slot| *slot = Some(Box::new(plugin)));
    Ok(())
}

/// Judges a chunk with the plugin built by `init`: first the lookups every event announces
/// are asked for together, then each event is processed.
pub fn process<P: Processor>(chunk: EventChunk) -> Result<Verdicts, String> {
    PLUGIN.with_borrow_mut(|slot| {
        let plugin = slot
            .as_mut()
            .and_then(|p| p.downcast_mut::<P>())
            .ok_or_else(|| "process was called before init".to_string())?;
        with_events(&chunk, |events| answer(events, judge_with(plugin, events)))
    })
}

/// `plugin`'s verdicts on `events`, one chunk: the lookups they announce are asked for
/// together first.
pub(crate) fn judge_with<P: Processor>(plugin: &mut P, events: &[Event<'_>]) -> Vec<Verdict> {
    let mut lookups = Lookups::for_chunk(events.len());
    for event in events {
        plugin.prefetch(event, &mut lookups);
    }
    let _answers = lookups.fetch();
    events.iter().map(|event| plugin.process(event)).collect()
}

/// Runs `judge` over every event of `chunk` and collects the answers in the WIT layout.
pub fn judge_chunk(
    chunk: EventChunk,
    mut judge: impl FnMut(&Event<'_>) -> Verdict,
) -> Result<Verdicts, String> {
    with_events(&chunk, |events| {
        answer(events, events.iter().map(&mut judge))
    })
}

/// Checks `chunk` and calls `f` with its events.
fn with_events<R>(chunk: &EventChunk, f: impl FnOnce(&[Event<'_>]) -> R) -> Result<R, String> {
    let n = chunk.partitions.len();
    for (name, len) in [
        ("topic-index", chunk.topic_index.len()),
        ("offsets", chunk.offsets.len()),
        ("timestamps", chunk.timestamps.len()),
        ("key-lengths", chunk.key_lengths.len()),
        ("value-lengths", chunk.value_lengths.len()),
    ] {
        if len != n {
            return Err(format!(
                "malformed chunk: {name} has {len} entries for {n} events"
            ));
        }
    }
    let headers = group_headers(&chunk.headers, n)?;
    let mut keys = Slicer::new(&chunk.keys, "keys");
    let mut values = Slicer::new(&chunk.values, "values");
    let all_values = ChunkValues::new(&chunk.values, n);
    let mut events = Vec::with_capacity(n);
    for i in 0..n {
        let topic = chunk
            .topics
            .get(usize::from(chunk.topic_index[i]))
            .ok_or_else(|| format!("malformed chunk: event {i} names a missing topic"))?;
        let timestamp = chunk.timestamps[i];
        let (from, to) = headers.ranges.get(i).copied().unwrap_or_default();
        let value_start = values.at;
        let value = values.next(chunk.value_lengths[i])?;
        events.push(Event {
            key: keys.next(chunk.key_lengths[i])?,
            value,
            in_chunk: value.map(|_| InChunk {
                values: &all_values,
                start: value_start,
                end: values.at,
                event: i,
            }),
            topic,
            partition: chunk.partitions[i],
            offset: chunk.offsets[i],
            timestamp_ms: (timestamp >= 0).then_some(timestamp),
            headers: &headers.all[from..to],
        });
    }
    Ok(f(&events))
}

/// The verdicts of a chunk's `events`, in order, in the WIT layout.
fn answer(events: &[Event<'_>], verdicts: impl IntoIterator<Item = Verdict>) -> Verdicts {
    let mut actions = Vec::with_capacity(events.len());
    let mut rewrites = Vec::new();
    let mut rejections = Vec::new();
    #[cfg(not(feature = "wit-0-1"))]
    let mut patches = crate::bindings::sluice::plugin::types::Patches {
        events: Vec::new(),
        name_lengths: Vec::new(),
        names: String::new(),
        value_lengths: Vec::new(),
        values: Vec::new(),
    };
    for ((i, verdict), event) in verdicts.into_iter().enumerate().zip(events) {
        let index = i as u32;
        let verdict = match verdict {
            Verdict::Patch(patch) if patch.is_empty() => Verdict::Keep,
            // The `0.1` contract has no patch: the plugin applies it and rewrites.
            #[cfg(feature = "wit-0-1")]
            Verdict::Patch(patch) => match patch.apply(event.value().unwrap_or_default()) {
                Ok(value) => Verdict::Rewrite(value),
                Err(rejection) => Verdict::Reject(rejection),
            },
            verdict => verdict,
        };
        let _ = event;
        match verdict {
            Verdict::Keep => actions.push(Action::Keep),
            Verdict::Rewrite(value) => {
                actions.push(Action::Rewrite);
                rewrites.push(Rewrite {
                    event: index,
                    value,
                });
            }
            #[cfg(not(feature = "wit-0-1"))]
            Verdict::Patch(patch) => {
                actions.push(Action::Patch);
                if patches.events.is_empty() {
                    patch.reserve_like(events.len() - i, &mut patches);
                }
                patch.append_to(index, &mut patches);
            }
            #[cfg(feature = "wit-0-1")]
            Verdict::Patch(_) => unreachable!("applied above"),
            Verdict::Reject(rejection) => {
                actions.push(Action::Reject);
                let (code, message, field) = rejection.into_parts();
                rejections.push(WitRejection {
                    event: index,
                    code,
                    message,
                    field,
                });
            }
        }
    }
    Verdicts {
        actions,
        rewrites,
        rejections,
        #[cfg(not(feature = "wit-0-1"))]
        patches,
    }
}

struct GroupedHeaders {
    all: Vec<Header>,
    /// For each event, the range of its headers in `all` (empty when no event has any).
    ranges: Vec<(usize, usize)>,
}

fn group_headers(
    wire: &[crate::bindings::sluice::plugin::types::Header],
    n: usize,
) -> Result<GroupedHeaders, String> {
    if wire.is_empty() {
        return Ok(GroupedHeaders {
            all: Vec::new(),
            ranges: Vec::new(),
        });
    }
    let mut ranges = vec![(0, 0); n];
    let mut all = Vec::with_capacity(wire.len());
    let mut previous = 0usize;
    for h in wire {
        let event = h.event as usize;
        if event >= n || event < previous {
            return Err(format!(
                "malformed chunk: header for event {event} out of order"
            ));
        }
        let at = all.len();
        if ranges[event].1 == 0 && ranges[event].0 == 0 {
            ranges[event] = (at, at);
        }
        ranges[event].1 = at + 1;
        previous = event;
        all.push(Header {
            name: h.name.clone(),
            value: h.value.clone(),
        });
    }
    Ok(GroupedHeaders { all, ranges })
}

/// Cuts consecutive slices of a concatenated byte list.
struct Slicer<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Slicer<'a> {
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Slicer { bytes, at: 0, what }
    }

    #[inline]
    fn next(&mut self, len: i32) -> Result<Option<&'a [u8]>, String> {
        if len < 0 {
            return Ok(None);
        }
        let end = self.at + len as usize;
        let slice = self.bytes.get(self.at..end).ok_or_else(|| {
            format!(
                "malformed chunk: {} are shorter than their lengths",
                self.what
            )
        })?;
        self.at = end;
        Ok(Some(slice))
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::sluice::plugin::types::Header as WireHeader;
    use crate::verdict::Rejection;

    fn chunk() -> EventChunk {
        EventChunk {
            topics: vec!["clicks".into(), "orders".into()],
            topic_index: vec![0, 1, 0],
            partitions: vec![0, 1, 2],
            offsets: vec![10, 20, 30],
            timestamps: vec![1000, -1, 3000],
            key_lengths: vec![1, -1, 2],
            keys: b"abc".to_vec(),
            value_lengths: vec![2, 0, -1],
            values: b"{}".to_vec(),
            headers: vec![
                WireHeader {
                    event: 1,
                    name: "h1".into(),
                    value: Some(b"x".to_vec()),
                },
                WireHeader {
                    event: 1,
                    name: "h2".into(),
                    value: None,
                },
                WireHeader {
                    event: 2,
                    name: "h3".into(),
                    value: None,
                },
            ],
        }
    }

    #[test]
    fn events_are_cut_from_the_columnar_chunk() {
        let mut seen = Vec::new();
        let verdicts = judge_chunk(chunk(), |e| {
            seen.push(super::props::see(e));
            match e.offset() {
                10 => Verdict::Keep,
                20 => Verdict::Rewrite(b"new".to_vec()),
                _ => Rejection::new("bad", "no").with_field("f").into(),
            }
        })
        .unwrap();
        assert_eq!(
            seen[0],
            (
                "clicks".into(),
                0,
                10,
                Some(1000),
                Some(b"a".to_vec()),
                Some(b"{}".to_vec()),
                vec![],
                true
            )
        );
        assert_eq!(
            seen[1],
            (
                "orders".into(),
                1,
                20,
                None,
                None,
                Some(vec![]),
                vec![("h1".into(), Some(b"x".to_vec())), ("h2".into(), None)],
                true
            )
        );
        assert_eq!(
            seen[2],
            (
                "clicks".into(),
                2,
                30,
                Some(3000),
                Some(b"bc".to_vec()),
                None,
                vec![("h3".into(), None)],
                false
            )
        );
        assert_eq!(
            verdicts.actions,
            vec![Action::Keep, Action::Rewrite, Action::Reject]
        );
        assert_eq!(verdicts.rewrites.len(), 1);
        assert_eq!(verdicts.rewrites[0].event, 1);
        assert_eq!(verdicts.rejections[0].event, 2);
        assert_eq!(verdicts.rejections[0].field.as_deref(), Some("f"));
    }

    /// The values' UTF-8 is checked once per chunk; each value is still judged alone.
    #[test]
    fn utf8_is_judged_per_value() {
        let utf8_verdicts = |values: &[&[u8]]| {
            let mut chunk = chunk();
            chunk.value_lengths = values.iter().map(|v| v.len() as i32).collect();
            chunk.values = values.concat();
            let mut seen = Vec::new();
            judge_chunk(chunk, |e| {
                seen.push(
                    e.value_str()
                        .map(str::to_string)
                        .map_err(|r| r.code().to_string()),
                );
                Verdict::Keep
            })
            .unwrap();
            seen
        };
        let invalid = || Err(crate::codes::INVALID_UTF8.to_string());
        // "{}é" is valid UTF-8, but "é" is cut in two between the second and third values.
        assert_eq!(
            utf8_verdicts(&[b"{}", b"\xC3", b"\xA9"]),
            vec![Ok("{}".to_string()), invalid(), invalid()]
        );
        // One invalid value does not make the others invalid.
        assert_eq!(
            utf8_verdicts(&[b"caf\xC3\xA9", b"\xFF", b"ok"]),
            vec![Ok("café".to_string()), invalid(), Ok("ok".to_string())]
        );
        assert_eq!(
            utf8_verdicts(&[b"a", b"", "é".as_bytes()]),
            vec![Ok("a".to_string()), Ok(String::new()), Ok("é".to_string())]
        );
    }

    #[test]
    fn inconsistent_chunks_are_refused() {
        let mut short = chunk();
        short.offsets.pop();
        assert!(
            judge_chunk(short, |_| Verdict::Keep)
                .unwrap_err()
                .contains("offsets")
        );
        let mut truncated = chunk();
        truncated.keys.pop();
        assert!(
            judge_chunk(truncated, |_| Verdict::Keep)
                .unwrap_err()
                .contains("keys")
        );
    }
}
