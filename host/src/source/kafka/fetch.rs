//! Reading fetched records many at a time, in `mode = "assign"`.
//!
//! rdkafka's `poll` hands out one message per call: each call reads the clock three or four
//! times (rdkafka's deadline, librdkafka's timeout and its poll-interval bookkeeping), takes
//! the queue's lock and wraps the message in a reference-counted event: a quarter of the
//! reading thread's time in the ingest benchmark. Here the assigned partitions' fetched
//! records are forwarded to a queue of sluice's own, read with librdkafka's
//! `rd_kafka_consume_batch_queue`: up to [`MAX_MESSAGES`] per call.
//!
//! Only fetched records and the partitions' consumer errors arrive on that queue; the
//! consumer's own queue (commit replies, client errors) is still served by rdkafka's poll.
//! The forwarding is set before the partitions are assigned, on a consumer that never had
//! an assignment: librdkafka then never forwards them to its consumer queue, and no record
//! can arrive there first. (Re-assigning on the same consumer would race with librdkafka
//! stopping the old fetchers, which clears the forwarding: the source takes a fresh
//! consumer instead.) Group mode keeps rdkafka's poll: its rebalances are served by rdkafka
//! on the consumer's queue.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};

/// The most messages one read takes.
pub(super) const MAX_MESSAGES: usize = 1024;

/// A queue of sluice's own that the assigned partitions' records are forwarded to.
pub(super) struct Fetch {
    queue: *mut rd::rd_kafka_queue_t,
    client: *mut rd::rd_kafka_t,
    messages: Vec<*mut rd::rd_kafka_message_t>,
}

// SAFETY: librdkafka's queues and clients are thread-safe; `Fetch` is used from one thread
// at a time (it is `!Sync`), and every message it holds is destroyed before a call returns.
unsafe impl Send for Fetch {}

/// One message read: a record, or a partition's consumer error.
pub(super) enum Fetched<'a> {
    /// A record of `topic`.
    Record {
        /// The topic's name.
        topic: &'a [u8],
        /// The message (valid while the callback runs).
        message: Message<'a>,
    },
    /// A consumer error (an offset out of range, a broker error).
    Error(KafkaError),
}

/// A fetched message, readable while the callback that got it runs.
pub(super) struct Message<'a>(&'a rd::rd_kafka_message_t);

impl<'a> Message<'a> {
    pub(super) fn partition(&self) -> i32 {
        self.0.partition
    }

    pub(super) fn offset(&self) -> i64 {
        self.0.offset
    }

    pub(super) fn payload(&self) -> Option<&'a [u8]> {
        // SAFETY: a non-null payload points to `len` bytes that live as long as the message.
        (!self.0.payload.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(self.0.payload.cast::<u8>(), self.0.len) })
    }

    pub(super) fn key(&self) -> Option<&'a [u8]> {
        // SAFETY: as for the payload.
        (!self.0.key.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(self.0.key.cast::<u8>(), self.0.key_len) })
    }

    /// The Kafka timestamp in milliseconds, if the record has one.
    pub(super) fn timestamp_ms(&self) -> Option<i64> {
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: the message is valid; librdkafka writes the type.
        let ms = unsafe { rd::rd_kafka_message_timestamp(self.0, &mut kind) };
        (kind != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE).then_some(ms)
    }

    pub(super) fn headers(&self) -> Vec<crate::record::Header> {
        // SAFETY: the message is valid while `self` is.
        unsafe { crate::kafka::headers::headers_of_raw(self.0) }
    }
}

impl Fetch {
    /// A queue of its own for `consumer`, which must not have been assigned partitions yet.
    pub(super) fn new<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> Self {
        let client = consumer.client().native_ptr();
        // SAFETY: `client` is the consumer's live handle; the queue is destroyed (in `drop`)
        // before the consumer is (the source drops its `Fetch` first).
        let queue = unsafe { rd::rd_kafka_queue_new(client) };
        Fetch {
            queue,
            client,
            messages: Vec::with_capacity(MAX_MESSAGES),
        }
    }

    /// Forwards the records fetched for `partition` of `topic` to this queue; `false` when
    /// librdkafka has no such partition.
    pub(super) fn forward(&self, topic: &str, partition: i32) -> bool {
        let Ok(name) = CString::new(topic) else {
            return false;
        };
        // SAFETY: `client` is live (see `new`); the partition's queue handle is released
        // right after the forwarding is set.
        unsafe {
            let from = rd::rd_kafka_queue_get_partition(self.client, name.as_ptr(), partition);
            if from.is_null() {
                return false;
            }
            rd::rd_kafka_queue_forward(from, self.queue);
            rd::rd_kafka_queue_destroy(from);
        }
        true
    }

    /// Reads up to `most` messages (at most [`MAX_MESSAGES`]), waiting up to `timeout` for
    /// them, and calls `each` for every one, in order. Returns how many were read.
    pub(super) fn read(
        &mut self,
        timeout: Duration,
        most: usize,
        mut each: impl FnMut(Fetched<'_>),
    ) -> usize {
        let most = most.clamp(1, MAX_MESSAGES);
        let timeout = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        self.messages.clear();
        // SAFETY: the array has room for `most` pointers, which librdkafka fills with
        // messages that this function destroys below.
        let n = unsafe {
            rd::rd_kafka_consume_batch_queue(self.queue, timeout, self.messages.as_mut_ptr(), most)
        };
        let n = usize::try_from(n).unwrap_or(0).min(most);
        // SAFETY: librdkafka wrote `n` message pointers.
        unsafe { self.messages.set_len(n) };
        for &ptr in &self.messages {
            // SAFETY: a message librdkafka handed out, not destroyed yet.
            let message = unsafe { &*ptr };
            if message.err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
                each(Fetched::Error(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::from(message.err),
                )));
                continue;
            }
            // SAFETY: a record's topic handle lives as long as the message; its name is
            // NUL-terminated.
            let topic = unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(message.rkt)) };
            each(Fetched::Record {
                topic: topic.to_bytes(),
                message: Message(message),
            });
        }
        for ptr in self.messages.drain(..) {
            // SAFETY: each message is destroyed once, after its last use above.
            unsafe { rd::rd_kafka_message_destroy(ptr) };
        }
        n
    }
}

impl Drop for Fetch {
    fn drop(&mut self) {
        // SAFETY: the queue was made by `new` and is destroyed once.
        unsafe { rd::rd_kafka_queue_destroy(self.queue) };
    }
}
