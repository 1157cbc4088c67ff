//! A repartition topic as an output (stage one, see [`crate::event_time::repartition`]):
//! the batch's events for it, each to its partition, then the markers; at least once, as
//! the other topics (stage two takes each event once).

use super::topic::{Outgoing, Topic};
use super::{Delivered, Output, OutputError, Results, send_to};

/// One repartition topic: [`Results::repartition`]'s list at `index`.
pub struct RepartitionOutput {
    /// Which of the results' lists.
    index: usize,
    /// The topic.
    topic: Box<dyn Topic>,
}

impl RepartitionOutput {
    /// Sends the `index`th list of each batch's repartition records to `topic`.
    pub fn new(index: usize, topic: Box<dyn Topic>) -> Self {
        RepartitionOutput { index, topic }
    }
}

impl Output for RepartitionOutput {
    fn name(&self) -> String {
        format!("repartition topic \"{}\"", self.topic.name())
    }

    fn send(&mut self, results: &Results) -> Result<Delivered, OutputError> {
        let Some(records) = results.repartition.get(self.index) else {
            return Ok(Delivered::default());
        };
        let outgoing = records
            .iter()
            .map(|r| Outgoing {
                partition: Some(r.partition),
                key: r.key.as_deref(),
                value: r.value.as_deref(),
                headers: r
                    .headers
                    .iter()
                    .map(|(name, value)| (*name, Some(value.as_slice())))
                    .collect(),
            })
            .collect();
        send_to(self.topic.as_ref(), self.name(), outgoing)
    }
}
