//! librdkafka's mock cluster as a broker for benchmarks (tansu is too slow to show anything
//! but itself): the real Kafka protocol on loopback, in a helper process (`mock-kafka`, a
//! binary of this package) loaded with generated events before the measurement starts.
//!
//! Each partition keeps its last 5 MiB (librdkafka's fixed limit; older record batches are
//! deleted), so a topic needs a partition per ~4 MiB of events: see
//! [`MockKafka::partitions_for`].

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};

/// A running mock cluster; stopped when dropped.
#[derive(Debug)]
pub struct MockKafka {
    /// Its bootstrap servers.
    pub bootstrap: String,
    child: Child,
    /// Closing it stops the helper.
    stdin: Option<ChildStdin>,
}

impl MockKafka {
    /// Starts `binary` (`env!("CARGO_BIN_EXE_mock-kafka")`) with `brokers` brokers, `topic`
    /// of `partitions` partitions loaded with `events` generated events (5% invalid), and
    /// `others` (one partition each); returns once loaded.
    pub fn start(
        binary: &str,
        brokers: u32,
        topic: &str,
        partitions: u32,
        events: u64,
        others: &[&str],
    ) -> MockKafka {
        Self::start_with(binary, &[], brokers, topic, partitions, events, others)
    }

    /// As [`MockKafka::start`], the events in Avro as `sluice produce --format avro` writes
    /// them, the schema registered in the Schema Registry at `registry_url`.
    pub fn start_avro(
        binary: &str,
        registry_url: &str,
        brokers: u32,
        topic: &str,
        partitions: u32,
        events: u64,
    ) -> MockKafka {
        let avro = ["--avro", registry_url];
        Self::start_with(binary, &avro, brokers, topic, partitions, events, &[])
    }

    fn start_with(
        binary: &str,
        leading: &[&str],
        brokers: u32,
        topic: &str,
        partitions: u32,
        events: u64,
        others: &[&str],
    ) -> MockKafka {
        let mut child = Command::new(binary)
            .args(leading)
            .args([
                brokers.to_string(),
                topic.to_string(),
                partitions.to_string(),
                events.to_string(),
            ])
            .args(others)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the mock-kafka helper");
        let stdout = child.stdout.take().unwrap();
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).unwrap();
        let bootstrap = first
            .trim()
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("mock-kafka said {first:?}"))
            .to_string();
        let stdin = child.stdin.take();
        MockKafka {
            bootstrap,
            child,
            stdin,
        }
    }

    /// Partitions enough to keep `events` events of about `bytes_each` (a multiple of 3,
    /// at least 3).
    pub fn partitions_for(events: u64, bytes_each: u64) -> u32 {
        let needed = (events * bytes_each).div_ceil(4 << 20);
        (needed.div_ceil(3) * 3).max(3) as u32
    }
}

impl Drop for MockKafka {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
