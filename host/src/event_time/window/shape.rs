//! What a window operator reads of its configuration and of each event: its shape
//! (size, slide, gap, emit mode, functions), the slots of the fields it reads, and the
//! input one event brings.

use super::accumulate::Input;
use super::keys::{PackedKey, key_hash, stable_hash};
use crate::event_time::config::{EmitMode, Function, WindowConfig};
use crate::event_time::extract::Scalar;
use crate::units::Micros;

/// What one event brings to one window operator.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowInput {
    /// The group-by values.
    pub key: PackedKey,
    /// Their hash (see [`key_hash`]).
    pub hash: u64,
    /// One input per aggregate.
    pub inputs: Vec<Input>,
}

/// The slots (in the extractor) of the fields a window reads.
#[derive(Debug, Clone)]
pub struct Slots {
    group_by: Vec<usize>,
    aggregates: Vec<(Function, Option<usize>)>,
}

impl Slots {
    /// Slots for `config`, assigned by `slot`.
    pub fn new(config: &WindowConfig, mut slot: impl FnMut(&str) -> usize) -> Self {
        Slots {
            group_by: config.group_by.iter().map(|f| slot(f)).collect(),
            aggregates: config
                .aggregates
                .iter()
                .map(|a| (a.function, a.field.as_deref().map(&mut slot)))
                .collect(),
        }
    }

    /// The window input of an event whose fields are `values`.
    pub fn input(&self, values: &[Option<Scalar>]) -> WindowInput {
        let key = PackedKey::pack(
            self.group_by
                .iter()
                .map(|&i| values[i].as_ref().map(Scalar::text)),
        );
        WindowInput {
            hash: key_hash(&key),
            key,
            inputs: self
                .aggregates
                .iter()
                .map(|&(function, slot)| {
                    let Some(slot) = slot else {
                        return Input::Present; // count of events
                    };
                    let Some(value) = &values[slot] else {
                        return Input::None;
                    };
                    match function {
                        Function::Count => Input::Present,
                        Function::DistinctCount => Input::Hash(stable_hash(value.text())),
                        _ => value.number().map_or(Input::None, Input::Number),
                    }
                })
                .collect(),
        }
    }
}

/// What every shard of a window operator needs of its configuration.
#[derive(Debug, Clone)]
pub struct Shape {
    size: Micros,
    slide: Micros,
    /// The gap of session windows.
    pub(super) gap: Option<Micros>,
    pub(super) emit: EmitMode,
    pub(super) functions: Box<[Function]>,
}

impl Shape {
    pub(super) fn new(config: &WindowConfig) -> Self {
        Shape {
            size: Micros(config.size_micros()),
            slide: Micros(config.slide_micros()),
            gap: config.gap_micros().map(Micros),
            emit: config.emit,
            functions: config.aggregates.iter().map(|a| a.function).collect(),
        }
    }

    /// The aggregate functions, in order.
    pub(in crate::event_time) fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The starts of the windows that hold `t`, latest first.
    pub(super) fn starts(&self, t: Micros) -> impl Iterator<Item = Micros> + use<> {
        let (size, slide, t) = (self.size.0, self.slide.0, t.0);
        let last = t.div_euclid(slide) * slide;
        (0..)
            .map(move |k| last - k * slide)
            .take_while(move |s| s + size > t)
            .map(Micros)
    }

    /// The end of the window that starts at `start`.
    pub(super) fn end(&self, start: Micros) -> Micros {
        start.saturating_add(self.size)
    }
}
