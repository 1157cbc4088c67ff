//! The per-instance state of a plugin's store: a WASI context that grants nothing unless
//! configured, a memory limiter that remembers when it said no, and a bounded capture of the
//! plugin's stderr (where a Rust panic message lands before the trap).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use super::bindings::sluice::plugin::host::{Host, Level};
use super::bindings::sluice::plugin::lookup;
use super::bindings::sluice::plugin::scan::ChunkFields;
use super::config::Grants;
use super::lookup::Reader;
use crate::units::ByteSize;

/// Longest log message a plugin may write through `host.log`; longer ones are truncated.
const MAX_LOG_MESSAGE: usize = 4096;
/// Most `host.log` messages one instance may write per second; more are counted and
/// reported once the second is over.
const LOG_LINES_PER_SECOND: u32 = 100;
/// Most core instances, linear memories and tables one component instance may create.
const MAX_INSTANCES: usize = 64;
const MAX_MEMORIES: usize = 16;
const MAX_TABLES: usize = 64;
/// How much of a plugin's stderr is kept (the tail).
const STDERR_TAIL: usize = 4096;

/// The data of one plugin instance's `Store`.
pub struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stderr: StderrTail,
    pub(crate) plugin: Arc<str>,
    /// Longest one sleep may last; `None`: sleeps return at once.
    pub(crate) sleep_cap: Option<Duration>,
    /// The lookup tables this instance may read, and the batch's.
    pub(crate) lookups: Reader,
    /// The fields of the chunk being judged, for the `scan` import (taken by its first
    /// call), and the chunk's number of events.
    pub(crate) fields: Option<ChunkFields>,
    pub(crate) events: usize,
    log: LogBudget,
}

/// What an instance was given: its name, grants and limits.
pub(crate) struct Sandbox<'a> {
    pub(crate) plugin: Arc<str>,
    pub(crate) grants: &'a Grants,
    pub(crate) memory: ByteSize,
    pub(crate) call_timeout: Duration,
    /// Seeds the deterministic randomness (the module's digest).
    pub(crate) seed: u64,
}

impl StoreState {
    pub(crate) fn new(sandbox: Sandbox<'_>) -> std::io::Result<Self> {
        let Sandbox {
            plugin,
            grants,
            memory,
            call_timeout,
            seed,
        } = sandbox;
        let stderr = StderrTail::default();
        let mut wasi = WasiCtx::builder();
        wasi.stderr(stderr.clone());
        if !grants.clocks {
            wasi.wall_clock(FrozenClock).monotonic_clock(FrozenClock);
        }
        if !grants.random {
            use rand::SeedableRng;
            wasi.secure_random(rand::rngs::StdRng::seed_from_u64(seed))
                .insecure_random(rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed))
                .insecure_random_seed(u128::from(seed));
        }
        for (k, v) in &grants.env {
            wasi.env(k, v);
        }
        for dir in &grants.read_only_dirs {
            let guest = dir.to_string_lossy();
            wasi.preopened_dir(dir, guest.as_ref(), FsPerms::ReadOnly)
                .map_err(|e| {
                    std::io::Error::other(format!("cannot grant {}: {e}", dir.display()))
                })?;
        }
        // No network: sockets and name lookups are refused by the default WASI context.
        Ok(StoreState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                cap: memory.as_usize(),
                used: 0,
                hit: false,
            },
            stderr,
            log: LogBudget::new(plugin.clone()),
            lookups: Reader::new(plugin.clone(), grants.lookups.clone().into()),
            plugin,
            sleep_cap: grants.clocks.then_some(call_timeout),
            fields: None,
            events: 0,
        })
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl super::bindings::sluice::plugin::types::Host for StoreState {}

/// The `lookup` import, answered by the instance's [`Reader`].
impl lookup::Host for StoreState {
    fn lookup(
        &mut self,
        table: String,
        key: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, lookup::LookupError> {
        self.lookups.get(&table, &key)
    }

    fn lookup_many(
        &mut self,
        table: String,
        keys: Vec<Vec<u8>>,
    ) -> Result<Vec<Option<Vec<u8>>>, lookup::LookupError> {
        self.lookups.get_many(&table, &keys)
    }

    fn lookup_fields(
        &mut self,
        table: String,
        names: Vec<String>,
        keys: Vec<Vec<u8>>,
    ) -> Result<lookup::Fields, lookup::LookupError> {
        self.lookups.get_fields(&table, &names, &keys)
    }
}

impl Host for StoreState {
    fn log(&mut self, level: Level, message: String) {
        if !self.log.allow(Instant::now()) {
            return;
        }
        let plugin = &*self.plugin;
        let message = escape_log(&message);
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

/// The `0.1` contract's imports, answered by the current ones.
mod v0_1 {
    use super::super::bindings::sluice::plugin as current;
    use super::super::bindings::v0_1::sluice::plugin::{host, lookup, types};
    use super::StoreState;

    impl types::Host for StoreState {}

    impl lookup::Host for StoreState {
        fn lookup(
            &mut self,
            table: String,
            key: Vec<u8>,
        ) -> Result<Option<Vec<u8>>, lookup::LookupError> {
            current::lookup::Host::lookup(self, table, key).map_err(error)
        }

        fn lookup_many(
            &mut self,
            table: String,
            keys: Vec<Vec<u8>>,
        ) -> Result<Vec<Option<Vec<u8>>>, lookup::LookupError> {
            current::lookup::Host::lookup_many(self, table, keys).map_err(error)
        }
    }

    fn error(e: current::lookup::LookupError) -> lookup::LookupError {
        lookup::LookupError {
            code: e.code,
            table: e.table,
            message: e.message,
        }
    }

    impl host::Host for StoreState {
        fn log(&mut self, level: host::Level, message: String) {
            use current::host::Level;
            let level = match level {
                host::Level::Trace => Level::Trace,
                host::Level::Debug => Level::Debug,
                host::Level::Info => Level::Info,
                host::Level::Warn => Level::Warn,
                host::Level::Error => Level::Error,
            };
            current::host::Host::log(self, level, message)
        }
    }
}

/// `message`, at most [`MAX_LOG_MESSAGE`] bytes, with line breaks and other control
/// characters escaped: a plugin cannot write a line that looks like one of sluice's own.
fn escape_log(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_LOG_MESSAGE) + 16);
    for c in message.chars() {
        if out.len() >= MAX_LOG_MESSAGE {
            out.push_str("… (truncated)");
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// How many `host.log` messages an instance wrote in the current second, and how many it
/// had dropped (reported when a new second starts, and when the instance goes).
#[derive(Debug)]
struct LogBudget {
    plugin: Arc<str>,
    second: Instant,
    written: u32,
    dropped: u64,
}

impl LogBudget {
    fn new(plugin: Arc<str>) -> Self {
        LogBudget {
            plugin,
            second: Instant::now(),
            written: 0,
            dropped: 0,
        }
    }

    /// Whether a message may be written at `now`.
    fn allow(&mut self, now: Instant) -> bool {
        if now.duration_since(self.second) >= Duration::from_secs(1) {
            self.report();
            self.second = now;
            self.written = 0;
        }
        if self.written < LOG_LINES_PER_SECOND {
            self.written += 1;
            return true;
        }
        self.dropped += 1;
        false
    }

    fn report(&mut self) {
        if self.dropped > 0 {
            let dropped = std::mem::take(&mut self.dropped);
            tracing::warn!(
                plugin = &*self.plugin,
                dropped,
                "plugin log messages over the limit of {LOG_LINES_PER_SECOND} a second were dropped"
            );
        }
    }
}

impl Drop for LogBudget {
    fn drop(&mut self) {
        self.report();
    }
}

/// Caps an instance's linear memories, together, and records that the cap was hit, so that
/// the trap that follows a failed allocation is reported as a memory limit, not as a plugin
/// bug. Also caps how many core instances, memories and tables a component may create.
pub(crate) struct MemoryLimiter {
    cap: usize,
    /// Bytes of all the instance's memories.
    used: usize,
    pub(crate) hit: bool,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.cap {
            self.hit = true;
            return Ok(false);
        }
        self.used = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Clocks that always read zero: a plugin without the `clocks` grant cannot tell time.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes a plugin wrote to stderr; never refuses a write.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend_from_slice(bytes);
        if tail.len() > STDERR_TAIL {
            let excess = tail.len() - STDERR_TAIL;
            tail.drain(..excess);
        }
    }

    /// Takes what was captured, as one line of text (lines joined by ` | `, without
    /// Rust's hint about `RUST_BACKTRACE`).
    pub(crate) fn take(&self) -> String {
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&tail)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE=1`"))
            .collect::<Vec<_>>()
            .join(" | ");
        tail.clear();
        text
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(1 << 20)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for StderrTail {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The WASI interface whose pollables make a plugin sleep.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Replaces `wasi:clocks/monotonic-clock`'s `subscribe-duration` and `subscribe-instant`
/// (what a sleep waits on): epoch deadlines fire only while WebAssembly runs, so a plugin
/// blocked in a host call would otherwise outlive its `call-timeout`. Without the `clocks`
/// grant a sleep returns at once; with it, it lasts at most the call timeout.
pub(crate) fn bound_sleeps(
    linker: &mut wasmtime::component::Linker<StoreState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::clocks::WasiClocksView;
    use wasmtime_wasi::p2::DynPollable;
    use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host;

    fn capped(state: &StoreState, nanos: u64) -> u64 {
        let cap = state.sleep_cap.map_or(0, |d| d.as_nanos());
        u64::try_from(u128::from(nanos).min(cap)).unwrap_or(u64::MAX)
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: wasmtime::StoreContextMut<'_, StoreState>,
         (nanos,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let nanos = capped(store.data(), nanos);
            Ok((store.data_mut().clocks().subscribe_duration(nanos)?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: wasmtime::StoreContextMut<'_, StoreState>,
         (when,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let state = store.data_mut();
            let now = state.clocks().now()?;
            let nanos = capped(state, when.saturating_sub(now));
            Ok((state.clocks().subscribe_duration(nanos)?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MAX_INSTANCES, MAX_MEMORIES, MemoryLimiter};
    use wasmtime::{Config, Engine, Instance, Module, Store};

    const MIB: u64 = 1 << 20;
    const PAGE: u64 = 64 * 1024;

    /// A core module that declares `count` memories of `bytes` each.
    fn memories(count: u32, bytes: u64) -> Vec<u8> {
        let mut section = wasm_encoder::MemorySection::new();
        for _ in 0..count {
            section.memory(wasm_encoder::MemoryType {
                minimum: bytes / PAGE,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            });
        }
        let mut module = wasm_encoder::Module::new();
        module.section(&section);
        module.finish()
    }

    fn store(cap: u64) -> Store<MemoryLimiter> {
        let engine = Engine::new(Config::new().wasm_multi_memory(true)).unwrap();
        let mut store = Store::new(
            &engine,
            MemoryLimiter {
                cap: cap as usize,
                used: 0,
                hit: false,
            },
        );
        store.limiter(|l| l);
        store
    }

    fn instantiate(store: &mut Store<MemoryLimiter>, wasm: &[u8]) -> wasmtime::Result<Instance> {
        let module = Module::new(store.engine(), wasm)?;
        Instance::new(&mut *store, &module, &[])
    }

    #[test]
    fn the_memory_cap_counts_every_memory_together() {
        // Two memories of 40 MiB each fit one by one under 64 MiB, not together.
        let mut s = store(64 * MIB);
        assert!(instantiate(&mut s, &memories(2, 40 * MIB)).is_err());
        assert!(s.data().hit, "the refusal is reported as the memory limit");
        let mut s = store(64 * MIB);
        instantiate(&mut s, &memories(2, 30 * MIB)).unwrap();
        assert_eq!(s.data().used as u64, 60 * MIB);
        assert!(!s.data().hit);
    }

    #[test]
    fn many_memories_or_instances_are_refused() {
        let mut s = store(64 * MIB);
        instantiate(&mut s, &memories(MAX_MEMORIES as u32, 0)).unwrap();
        let mut s = store(64 * MIB);
        let too_many = instantiate(&mut s, &memories(MAX_MEMORIES as u32 + 1, 0));
        assert!(too_many.is_err(), "{} memories", MAX_MEMORIES + 1);

        let mut s = store(64 * MIB);
        let one = memories(0, 0);
        for _ in 0..MAX_INSTANCES {
            instantiate(&mut s, &one).unwrap();
        }
        assert!(
            instantiate(&mut s, &one).is_err(),
            "instance {}",
            MAX_INSTANCES + 1
        );
    }
}
