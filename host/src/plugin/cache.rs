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
//! process family wrote for this very component:
//! - a file starts with [`MAGIC`] (the layout's version), the sha256 of what follows, then
//!   the sha256 of the component it was compiled from and the engine key it was compiled
//!   for. Both are checked against the component being loaded, so an entry copied or
//!   renamed from another plugin (or another engine setting) is refused: reported, compiled
//!   again and rewritten, never run. A truncated or altered entry fails the checksum (or
//!   wasmtime's own check) the same way. It is written to a temporary file then renamed, so
//!   a reader sees a whole entry or none.
//! - the folder is used only if it and every folder above it are owned by the running user
//!   or root and writable by neither their group nor other users, the rule OpenSSH's
//!   `StrictModes` applies to `~/.ssh`. A folder above it that is root's and has the sticky
//!   bit (`/tmp`: 1777) is accepted, as users cannot replace what others put there; the
//!   cache folder itself is not. An entry that is not the user's (or root's), or that its
//!   group or others may write, is not read. Otherwise the plugin is compiled, with one
//!   warning.
//!
//! The cache is a speed-up only: a folder that is missing, refused, read-only or full costs
//! the compile time, with one warning, never a load.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::bar::Bar;

/// The first bytes of an entry: what it is and the layout's version (v2: the component's
/// digest and the engine key are inside).
const MAGIC: &[u8; 16] = b"sluice-cwasm-v2\n";
/// Length of a hex sha256: the component's digest, the engine key.
const HEX: usize = 64;
/// Length of the header: [`MAGIC`], the sha256 of the rest, the component's digest and the
/// engine key (hex); the code follows.
const HEADER: usize = MAGIC.len() + 32 + 2 * HEX;

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

impl CompileCache {
    /// A cache of `engine`'s components in `dir`; `None`: no cache.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        CompileCache {
            dir,
            engine_key: hex::encode(hasher.0.finalize()),
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
            && let Some(component) = self.read(engine, plugin, digest, entry)
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            tracing::info!(plugin, entry = %entry.display(), "Loaded the compiled plugin from the cache in {ms:.1} ms.");
            return Ok((component, Origin::Cache));
        }
        let compiling = Bar::spinner(&format!("compiling plugin {plugin}"));
        let component = Component::new(engine, wasm)?;
        drop(compiling);
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(plugin, "Compiled the plugin in {seconds:.2} s.");
        if let Some(entry) = &entry {
            self.misses.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = self.write(&component, digest, entry) {
                self.warn_once(&error, "Cannot write to the compile cache");
            }
        }
        Ok((component, Origin::Compiled))
    }

    /// Whether the folder may be used: it exists or can be created, and no one but this
    /// user (or root) could have put machine code in it ([`check_private`]).
    fn usable(&self) -> bool {
        let Some(dir) = &self.dir else { return false };
        match create_private_dir(dir).and_then(|()| check_private(dir)) {
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
            tracing::warn!(%error, dir = %dir, "{what}; plugins are compiled at every load (set [runtime] compile-cache to a folder that only this user may write, or to false).");
        }
    }

    /// The component in `entry`, if there is a whole, valid one compiled from the
    /// component `digest` for this engine. A damaged or foreign entry is reported and
    /// removed.
    fn read(&self, engine: &Engine, plugin: &str, digest: &str, entry: &Path) -> Option<Component> {
        let read = match read_private(entry) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(error) => {
                self.warn_once(&error, "Cannot read the compile cache");
                return None;
            }
        };
        let component = read.and_then(|bytes| {
            let code = checked(&bytes, digest, &self.engine_key)?;
            // SAFETY: `code` is what `write` stored for this engine's compatibility hash
            // and this very component (both recorded inside the entry and checked):
            // `Component::serialize` output of an engine configured alike, unaltered (its
            // sha256 matches), in a folder that only this user or root may write
            // ([`check_private`]). wasmtime checks its version and settings again.
            #[allow(unsafe_code)]
            let component = unsafe { Component::deserialize(engine, code) };
            component.map_err(|e| format!("{e:#}"))
        });
        match component {
            Ok(component) => Some(component),
            Err(reason) => {
                tracing::warn!(plugin, entry = %entry.display(), %reason, "A compile cache entry is refused; the plugin is compiled again.");
                let _ = fs::remove_file(entry);
                None
            }
        }
    }

    /// Stores `component` (compiled from the component `digest`) in `entry`: a temporary
    /// file beside it, synced, renamed over it ([`crate::files::replace`]).
    fn write(&self, component: &Component, digest: &str, entry: &Path) -> io::Result<()> {
        let code = component.serialize().map_err(io::Error::other)?;
        let (digest, engine) = (digest.as_bytes(), self.engine_key.as_bytes());
        if digest.len() != HEX || engine.len() != HEX {
            return Err(io::Error::other("not a sha256 digest"));
        }
        // This user's alone, whatever the umask: [`read_private`] refuses others'.
        crate::files::replace(entry, crate::files::Access::Private, |file| {
            let sum = Sha256::new()
                .chain_update(digest)
                .chain_update(engine)
                .chain_update(&code)
                .finalize();
            file.write_all(MAGIC)?;
            file.write_all(&sum)?;
            file.write_all(digest)?;
            file.write_all(engine)?;
            file.write_all(&code)
        })
    }
}

/// The code of an entry, if its header is right, its checksum matches, and it was compiled
/// from the component `digest` for the engine `engine_key` (both hex).
fn checked<'b>(bytes: &'b [u8], digest: &str, engine_key: &str) -> Result<&'b [u8], String> {
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a sluice compile cache entry of this version (or truncated)".into());
    }
    let (sum, rest) = bytes[MAGIC.len()..].split_at(32);
    if Sha256::digest(rest).as_slice() != sum {
        return Err("its checksum does not match (truncated or altered)".into());
    }
    let (from, rest) = rest.split_at(HEX);
    let (engine, code) = rest.split_at(HEX);
    if from != digest.as_bytes() {
        let from = String::from_utf8_lossy(from);
        return Err(format!(
            "it was compiled from another component (sha256 {from}), not this one"
        ));
    }
    if engine != engine_key.as_bytes() {
        return Err("it was compiled for another engine setting".into());
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

/// Whether a file or folder owned by `owner` with `mode` could only have been written by
/// this user or root: why not, if not. `sticky_ok`: a root-owned folder with the sticky bit
/// is accepted (a folder above the cache, like `/tmp`).
#[cfg(unix)]
fn trusted(owner: u32, mode: u32, sticky_ok: bool) -> Result<(), String> {
    let user = rustix::process::geteuid().as_raw();
    if owner != user && owner != 0 {
        return Err(format!("it is owned by another user (uid {owner})"));
    }
    if mode & 0o022 == 0 || (sticky_ok && owner == 0 && mode & 0o1000 != 0) {
        return Ok(());
    }
    let who = if mode & 0o002 != 0 {
        "every user"
    } else {
        "its group"
    };
    Err(format!(
        "it is writable by {who} (mode {:o})",
        mode & 0o7777
    ))
}

/// Refuses `dir` unless it and every folder above it pass [`trusted`] (only the folders
/// above may be root's sticky ones), as OpenSSH's `StrictModes` checks `~/.ssh`: anyone
/// else who could write there could plant machine code that this process would run.
#[cfg(unix)]
fn check_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = fs::canonicalize(dir)?;
    for (depth, folder) in dir.ancestors().enumerate() {
        let meta = fs::metadata(folder)?;
        trusted(meta.uid(), meta.mode(), depth > 0).map_err(|why| {
            let what = if depth == 0 {
                "the folder"
            } else {
                "a folder above it"
            };
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{what}, {}: {why}", folder.display()),
            )
        })?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// The bytes of the entry `path`, or why it is refused: it is not a file that only this
/// user or root could have written.
fn read_private(path: &Path) -> io::Result<Result<Vec<u8>, String>> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(Err("it is not a file".into()));
        }
        if let Err(why) = trusted(meta.uid(), meta.mode(), false) {
            return Ok(Err(why));
        }
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Ok(bytes))
}

#[cfg(test)]
mod tests;
