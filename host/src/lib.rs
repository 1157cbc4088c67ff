//! sluice: a stream processor from Kafka to Apache Iceberg, extended with WebAssembly
//! plugins.
//!
//! Data flows one way: source → batch → stages (Wasm plugins) → event time → encode
//! (Arrow) → outputs → the table's commit, which is the checkpoint. So do imports: the
//! modules below are in layer order, lowest first, and a module uses only its own layer
//! and lower ones ([`layers`] writes the order once and a test holds the tree to it).
//!
//! - [`units`]: durations and byte sizes in configuration; [`record`]: the unit of data,
//!   one Kafka record, and the positions ([`record::Offsets`]) read and committed;
//!   [`alloc`]: the global allocator (mimalloc); [`generate`]: deterministic retail
//!   clickstream events for demos, tests and benchmarks; [`retry`]: the one retry schedule
//!   (capped exponential backoff, through `backon`); [`files`]: the one durable replace of
//!   a local file (write, fsync, rename, fsync); [`decimal`]: exact decimal text to
//!   unscaled integers and back; [`bar`]: progress bars of long command-line work;
//! - [`kafka`]: Kafka client configuration, topic administration, output-topic targets;
//! - [`checkpoint`]: what each table commit records (offsets, batch id, lookup versions,
//!   the state file), from which a restart resumes;
//! - [`batch`]: the trigger and the caps of a micro-batch;
//! - [`format`]: record formats (JSON, Avro), the Confluent wire format, the Schema
//!   Registry client and the writer schemas it serves;
//! - [`encode`]: JSON values to Arrow against the table's schema;
//! - [`iceberg`]: the Iceberg adapter (catalog, writer stack, fence, commit, read,
//!   maintenance, storage), which knows nothing of the engine;
//! - [`source`]: where records come from (Kafka), positioned by the table's offsets;
//! - [`election`]: which process runs an event-time pipeline (active and standbys);
//! - [`lookup`]: reference data plugins read by key, versioned per batch;
//! - [`plugin`]: the plugin runtime (stages): sandboxed components that keep, rewrite or
//!   reject events;
//! - [`event_time`]: watermarks, deduplication, windows, sessions, joins, late data, and
//!   their state;
//! - [`sink`]: the outputs (the table, dead letters, window and join results) and the
//!   order of a batch's side effects;
//! - [`progress`]: what each batch reports (the progress line, status, metrics);
//! - [`admin`]: the admin HTTP API of a running pipeline (status, metrics, plugin swaps);
//! - [`pipeline`]: the loop that ties them together (`sluice run`);
//! - [`cli`]: the `sluice` command line.

pub mod admin;
pub mod alloc;
pub mod bar;
pub mod batch;
pub mod checkpoint;
pub mod cli;
pub mod decimal;
pub mod election;
pub mod encode;
pub mod event_time;
pub mod files;
pub mod format;
pub mod generate;
pub mod iceberg;
pub mod kafka;
pub mod layers;
pub mod lookup;
pub mod pipeline;
pub mod plugin;
pub mod progress;
pub mod record;
pub mod retry;
pub mod sink;
pub mod source;
pub mod units;
