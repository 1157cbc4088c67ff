//! The per-instance state of a plugin's store: a WASI context that grants nothing unless
//! configured, a memory limiter that remembers when it said no, and a bounded capture of the
//! plugin's stderr (where a Rust panic message lands before the trap).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use super::bindings::sluice::plugin::host::{Host, Level};
use super::config::Grants;
use crate::units::ByteSize;

/// Longest log message a plugin may write through `host.log`; longer ones are truncated.
const MAX_LOG_MESSAGE: usize = 4096;
/// How much of a plugin's stderr is kept (the tail).
const STDERR_TAIL: usize = 4096;

/// The data of one plugin instance's `Store`.
pub struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stderr: StderrTail,
    pub(crate) plugin: Arc<str>,
}

impl StoreState {
    pub(crate) fn new(
        plugin: Arc<str>,
        grants: &Grants,
        memory: ByteSize,
    ) -> std::io::Result<Self> {
        let stderr = StderrTail::default();
        let mut wasi = WasiCtx::builder();
        wasi.stderr(stderr.clone());
        if !grants.clocks {
            wasi.wall_clock(FrozenClock).monotonic_clock(FrozenClock);
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
                hit: false,
            },
            stderr,
            plugin,
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

impl Host for StoreState {
    fn log(&mut self, level: Level, message: String) {
        let mut message = message;
        if message.len() > MAX_LOG_MESSAGE {
            let mut end = MAX_LOG_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("… (truncated)");
        }
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

/// Caps an instance's linear memory and records that the cap was hit, so that the trap that
/// follows a failed allocation is reported as a memory limit, not as a plugin bug.
pub(crate) struct MemoryLimiter {
    cap: usize,
    pub(crate) hit: bool,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
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
