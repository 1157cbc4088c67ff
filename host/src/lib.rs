//! sluice: a stream processor from Kafka to Apache Iceberg, extended with WebAssembly
//! plugins.
//!
//! Data flows one way: source → batch → stages (Wasm plugins) → encode (Arrow) → sinks →
//! commit. This crate grows one module per step; so far:
//!
//! - [`record`]: the unit of data, one Kafka record;
//! - [`udf`]: the plugin runtime (stages): sandboxed components that keep, rewrite or
//!   reject events;
//! - [`cli`]: the `sluice` command line (`sluice try`, `sluice produce`);
//! - [`kafka`]: Kafka client configuration and topic administration;
//! - [`generate`]: deterministic retail clickstream events for demos, tests and benchmarks;
//! - [`units`]: durations and byte sizes in configuration.

pub mod cli;
pub mod generate;
pub mod kafka;
pub mod record;
pub mod udf;
pub mod units;
