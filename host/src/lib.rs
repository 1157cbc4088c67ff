//! sluice: a stream processor from Kafka to Apache Iceberg, extended with WebAssembly
//! plugins.
//!
//! Data flows one way: source → batch → stages (Wasm plugins) → encode (Arrow) → sinks →
//! commit. One module per step:
//!
//! - [`record`]: the unit of data, one Kafka record;
//! - [`source`]: where records come from (Kafka), positioned by the table's offsets;
//! - [`batch`]: the trigger and the caps of a micro-batch;
//! - [`udf`]: the plugin runtime (stages): sandboxed components that keep, rewrite or
//!   reject events;
//! - [`lookup`]: reference data plugins read by key, versioned per batch;
//! - [`event_time`]: event time: watermarks, deduplication, windowed aggregates, late data;
//! - [`encode`]: JSON values to Arrow against the table's schema;
//! - [`sink`]: the Iceberg table and the dead-letter topic;
//! - [`commit`]: the marks each table commit carries, from which a restart resumes;
//! - [`election`]: which process runs an event-time pipeline (active and standbys);
//! - [`pipeline`]: the loop that ties them together (`sluice run`);
//! - [`alloc`]: the global allocator (mimalloc);
//! - [`admin`]: the admin HTTP API of a running pipeline (status, metrics, plugin swaps);
//! - [`cli`]: the `sluice` command line (`sluice try`, `sluice produce`);
//! - [`kafka`]: Kafka client configuration and topic administration;
//! - [`generate`]: deterministic retail clickstream events for demos, tests and benchmarks;
//! - [`units`]: durations and byte sizes in configuration;
//! - [`retry`]: the one retry schedule (capped exponential backoff, through `backon`);
//! - [`files`]: the one durable replace of a local file (write, fsync, rename, fsync).

pub mod admin;
pub mod alloc;
pub mod batch;
pub mod cli;
pub mod commit;
pub mod election;
pub mod encode;
pub mod event_time;
pub mod files;
pub mod generate;
pub mod kafka;
pub mod lookup;
pub mod pipeline;
pub mod record;
pub mod retry;
pub mod sink;
pub mod source;
pub mod udf;
pub mod units;
