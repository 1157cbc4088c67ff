//! sluice's integration tests: one binary, one module per area. Plugins are real
//! WebAssembly components built from source by `build.rs`, run by the real runtime. The
//! fixtures (a pipeline run as a `sluice` process, the broker, pyiceberg) are in the
//! `sluice-tests` library, `tests/src/`.

mod admin_state;
mod adversarial;
mod analytics_members;
mod avro;
mod bars;
mod catalog_tls;
mod chaos;
mod cli;
mod compaction;
mod compile_cache;
mod config_check;
mod config_secrets;
mod console;
mod deploy;
mod docs;
mod engine;
mod enricher;
mod event_time;
mod evolution;
mod evolution_nested;
mod fencing;
mod generator;
mod group;
mod hardening;
mod hot_swap;
mod idle_join;
mod js;
mod keyed;
mod lookup_sources;
mod lookups;
mod nested;
mod nested_paths;
mod partitions;
mod pipeline;
mod plugin_author;
mod probes;
mod produce;
mod protobuf;
mod readme;
mod repartition;
mod secure_kafka;
mod source_read;
mod spark;
mod standby;
mod storage;
mod unknown_fields;
mod validator;
mod versions;
