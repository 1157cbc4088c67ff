//! The compiled-component cache: the machine code of each plugin version, kept in a folder
//! between runs (`[runtime] compile-cache`), so that a restart, a swap or a test loads it in
//! milliseconds instead of compiling it again.
//!
//! An entry is named after what its code depends on: the sha256 of the component's bytes
//! and a sha256 of the engine's compatibility hash (wasmtime's version, the target, the
//! compiler's flags and the features, epoch interruption among them). Another plugin
//! version or another engine setting is another file; nothing is ever looked up by a name
//! someone chose.
//!
//! Deserializing machine code trusts it, so an entry is only read if it is what this
//! process family wrote: a file starts with [`MAGIC`] and the sha256 of what follows, and
//! is written to a temporary file then renamed, so a reader sees a whole entry or none. A
//! truncated or altered entry fails the check (or wasmtime's own), is reported, compiled
//! again and rewritten. A folder that others may write is not used. The cache is a speed-up
//! only: a folder that is missing, read-only or full costs the compile time, with one
//! warning, never a load.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first bytes of an entry: what it is and the layout's version.
const MAGIC: &[u8; 16] = b"sluice-cwasm-v1\n";
/// Length of the header: [`MAGIC`], then the sha256 of the rest.
const HEADER: usize = MAGIC.len() + 32;

/// The compiled components of one engine, in a folder (or none: always compile).
#[derive(Debug)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    /// Hex sha256 of the engine's compatibility hash.
    engine_key: String,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Whether the folder was found unusable and said so (once).
    warned: AtomicBool,
}

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Compiled from the WebAssembly bytes.
    Compiled,
    /// Loaded from the cache.
    Cache,
}

/// Feeds what a [`Hash`] writes into a sha256 (std's hashers are not stable across Rust
/// versions, and 64 bits would be a thin key for machine code).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl CompileCache {
    /// A cache of `engine`'s components in `dir`; `None`: no cache.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        CompileCache {
            dir,
            engine_key: hex(&hasher.0.finalize()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// The folder, if the cache is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Loads that found their component in the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Loads that compiled, with the cache on.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// The entry of the component whose sha256 is `digest` (hex).
    pub fn entry(&self, digest: &str) -> Option<PathBuf> {
        let name = format!("{digest}-{}.cwasm", &self.engine_key[..32]);
        self.dir.as_ref().map(|dir| dir.join(name))
    }

    /// The component of `wasm` (sha256 `digest`), from the cache or compiled (and then
    /// stored). Errors are compile errors only.
    pub fn component(
        &self,
        engine: &Engine,
        plugin: &str,
        digest: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<(Component, Origin)> {
        let entry = self.entry(digest).filter(|_| self.usable());
        let started = Instant::now();
        if let Some(entry) = &entry
            && let Some(component) = self.read(engine, plugin, entry)
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            tracing::info!(plugin, entry = %entry.display(), "Loaded the compiled plugin from the cache in {ms:.1} ms.");
            return Ok((component, Origin::Cache));
        }
        let component = Component::new(engine, wasm)?;
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(plugin, "Compiled the plugin in {seconds:.2} s.");
        if let Some(entry) = &entry {
            self.misses.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = self.write(&component, entry) {
                self.warn_once(&error, "Cannot write to the compile cache");
            }
        }
        Ok((component, Origin::Compiled))
    }

    /// Whether the folder may be used: it exists or can be created, and is not writable by
    /// every user (who could then plant machine code).
    fn usable(&self) -> bool {
        let Some(dir) = &self.dir else { return false };
        match create_private_dir(dir).and_then(|()| check_not_world_writable(dir)) {
            Ok(()) => true,
            Err(error) => {
                self.warn_once(&error, "Cannot use the compile cache");
                false
            }
        }
    }

    fn warn_once(&self, error: &io::Error, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            let dir = self.dir.as_deref().unwrap_or(Path::new("")).display();
            tracing::warn!(%error, dir = %dir, "{what}; plugins are compiled at every load (set [runtime] compile-cache to a writable folder, or to false).");
        }
    }

    /// The component in `entry`, if there is a whole, valid one. A damaged entry is
    /// reported and removed.
    fn read(&self, engine: &Engine, plugin: &str, entry: &Path) -> Option<Component> {
        let bytes = match fs::read(entry) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(error) => {
                self.warn_once(&error, "Cannot read the compile cache");
                return None;
            }
        };
        let component = checked(&bytes).and_then(|code| {
            // SAFETY: `code` is what `write` stored for this engine's compatibility hash
            // and this component's digest: `Component::serialize` output of an engine
            // configured alike, unaltered (its sha256 matches), in a folder that only
            // this user may write. wasmtime checks its version and settings again.
            #[allow(unsafe_code)]
            let component = unsafe { Component::deserialize(engine, code) };
            component.map_err(|e| format!("{e:#}"))
        });
        match component {
            Ok(component) => Some(component),
            Err(reason) => {
                tracing::warn!(plugin, entry = %entry.display(), %reason, "A compile cache entry is damaged; the plugin is compiled again.");
                let _ = fs::remove_file(entry);
                None
            }
        }
    }

    /// Stores `component` in `entry`: a temporary file beside it, renamed over it.
    fn write(&self, component: &Component, entry: &Path) -> io::Result<()> {
        let code = component.serialize().map_err(io::Error::other)?;
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let n = WRITES.fetch_add(1, Ordering::Relaxed);
        let temp = entry.with_extension(format!("tmp.{}.{n}", std::process::id()));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(MAGIC)?;
            file.write_all(&Sha256::digest(&code))?;
            file.write_all(&code)?;
            fs::rename(&temp, entry)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}

/// The code of an entry, if its header is right and its checksum matches.
fn checked(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a sluice compile cache entry (or truncated)".into());
    }
    let (sum, code) = bytes[MAGIC.len()..].split_at(32);
    if Sha256::digest(code).as_slice() != sum {
        return Err("its checksum does not match (truncated or altered)".into());
    }
    Ok(code)
}

/// Creates `dir` (and its parents) if missing, readable by this user only.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(unix)]
fn check_not_world_writable(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir)?.permissions().mode();
    if mode & 0o002 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the folder is writable by every user (mode {:o})",
                mode & 0o7777
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_not_world_writable(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests;
