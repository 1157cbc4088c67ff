use std::path::{Path, PathBuf};

use sha2::Digest;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store};

use super::{CompileCache, Origin};

/// A fresh folder for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "sluice-compile-cache-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn engine(epochs: bool) -> Engine {
    Engine::new(Config::new().epoch_interruption(epochs)).unwrap()
}

/// A component holding a core module with one function that returns `n`: some machine
/// code, and a digest of its own for each `n`.
fn component(n: i32) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, Function, FunctionSection, Instruction, Module, ModuleSection, TypeSection,
        ValType,
    };
    let mut types = TypeSection::new();
    types.ty().function([], [ValType::I32]);
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut body = Function::new(Vec::<(u32, ValType)>::new());
    body.instruction(&Instruction::I32Const(n));
    body.instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&body);
    let mut module = Module::new();
    module.section(&types).section(&functions).section(&code);
    let mut component = wasm_encoder::Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}

/// Loads `wasm` through `cache`, checks the component instantiates, and says where it
/// came from.
fn load(cache: &CompileCache, engine: &Engine, wasm: &[u8]) -> Origin {
    let digest = crate::plugin::digest_of(wasm);
    let (component, origin) = cache.component(engine, "test", &digest, wasm).unwrap();
    instantiates(engine, &component);
    origin
}

fn instantiates(engine: &Engine, component: &Component) {
    let mut store = Store::new(engine, ());
    Linker::new(engine)
        .instantiate(&mut store, component)
        .expect("the component instantiates");
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn a_second_load_comes_from_the_cache() {
    let dir = TempDir::new("second");
    let engine = engine(true);
    let cache = CompileCache::new(&engine, Some(dir.path().join("compiled")));
    let wasm = component(1);
    assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
    assert_eq!(load(&cache, &engine, &wasm), Origin::Cache);
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
    // Another cache (a restart) on the same folder finds it too.
    let restarted = CompileCache::new(&engine, Some(dir.path().join("compiled")));
    assert_eq!(load(&restarted, &engine, &wasm), Origin::Cache);
    assert_eq!(
        entries(cache.dir().unwrap()).len(),
        1,
        "no temporary file left"
    );
}

#[test]
fn another_component_or_engine_setting_misses() {
    let dir = TempDir::new("miss");
    let with_epochs = engine(true);
    let cache = CompileCache::new(&with_epochs, Some(dir.path().to_owned()));
    assert_eq!(load(&cache, &with_epochs, &component(1)), Origin::Compiled);
    assert_eq!(load(&cache, &with_epochs, &component(2)), Origin::Compiled);
    // Without epoch interruption the code differs: its own entry.
    let other = engine(false);
    let other_cache = CompileCache::new(&other, Some(dir.path().to_owned()));
    assert_eq!(load(&other_cache, &other, &component(1)), Origin::Compiled);
    assert_eq!(load(&other_cache, &other, &component(1)), Origin::Cache);
    assert_eq!(load(&cache, &with_epochs, &component(1)), Origin::Cache);
    assert_eq!(entries(dir.path()).len(), 3);
}

#[test]
fn a_damaged_entry_is_compiled_again_and_rewritten() {
    let dir = TempDir::new("damaged");
    let engine = engine(true);
    let cache = CompileCache::new(&engine, Some(dir.path().to_owned()));
    let wasm = component(7);
    assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
    let entry = cache.entry(&crate::plugin::digest_of(&wasm)).unwrap();
    let whole = std::fs::read(&entry).unwrap();
    let mut flipped = whole.clone();
    *flipped.last_mut().unwrap() ^= 1;
    // The right header and checksum over code wasmtime refuses.
    let digest = crate::plugin::digest_of(&wasm);
    let rest = [digest.as_bytes(), cache.engine_key.as_bytes(), b"not code"].concat();
    let mut bogus = super::MAGIC.to_vec();
    bogus.extend_from_slice(&sha2::Sha256::digest(&rest));
    bogus.extend_from_slice(&rest);
    for damaged in [
        whole[..whole.len() / 2].to_vec(),
        flipped,
        bogus,
        Vec::new(),
    ] {
        std::fs::write(&entry, &damaged).unwrap();
        assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
        assert_eq!(std::fs::read(&entry).unwrap(), whole, "rewritten");
        assert_eq!(load(&cache, &engine, &wasm), Origin::Cache);
    }
}

#[test]
fn an_unusable_folder_still_loads() {
    let dir = TempDir::new("unusable");
    std::fs::create_dir_all(dir.path()).unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let engine = engine(true);
    // A folder that cannot be created (root may write anywhere, but not under a file).
    let cache = CompileCache::new(&engine, Some(file.join("compiled")));
    assert_eq!(load(&cache, &engine, &component(1)), Origin::Compiled);
    assert_eq!(load(&cache, &engine, &component(1)), Origin::Compiled);
    assert_eq!((cache.hits(), cache.misses()), (0, 0));
    // No cache at all.
    let off = CompileCache::new(&engine, None);
    assert_eq!(load(&off, &engine, &component(1)), Origin::Compiled);
    assert_eq!(load(&off, &engine, &component(1)), Origin::Compiled);
}

#[cfg(unix)]
#[test]
fn a_folder_every_user_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("shared");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let engine = engine(true);
    let cache = CompileCache::new(&engine, Some(dir.path().to_owned()));
    assert_eq!(load(&cache, &engine, &component(1)), Origin::Compiled);
    assert_eq!(load(&cache, &engine, &component(1)), Origin::Compiled);
    assert!(entries(dir.path()).is_empty());
}

/// An entry copied or renamed from another component (what a user who could write the
/// folder would plant) is refused: the component is compiled, and its own entry rewritten.
#[test]
fn an_entry_of_another_component_is_not_loaded() {
    let dir = TempDir::new("planted");
    let engine = engine(true);
    let cache = CompileCache::new(&engine, Some(dir.path().to_owned()));
    let (wasm, other) = (component(1), component(2));
    assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
    assert_eq!(load(&cache, &engine, &other), Origin::Compiled);
    let entry = cache.entry(&crate::plugin::digest_of(&wasm)).unwrap();
    let own = std::fs::read(&entry).unwrap();
    let planted = cache.entry(&crate::plugin::digest_of(&other)).unwrap();
    std::fs::copy(&planted, &entry).unwrap();
    assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
    assert_eq!(std::fs::read(&entry).unwrap(), own, "rewritten");
    assert_eq!(load(&cache, &engine, &wasm), Origin::Cache);
    // Another engine setting's entry of the same component, renamed: refused too.
    let other_engine = self::engine(false);
    let other_cache = CompileCache::new(&other_engine, Some(dir.path().to_owned()));
    assert_eq!(load(&other_cache, &other_engine, &wasm), Origin::Compiled);
    let other_entry = other_cache.entry(&crate::plugin::digest_of(&wasm)).unwrap();
    std::fs::copy(&other_entry, &entry).unwrap();
    assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
    assert_eq!(std::fs::read(&entry).unwrap(), own, "rewritten");
}

/// Sets `path`'s mode and owner.
#[cfg(unix)]
fn set(path: &Path, mode: u32, owner: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    std::os::unix::fs::chown(path, Some(owner), None).unwrap();
}

/// Whether a cache in `dir` is used: a second load comes from it.
#[cfg(unix)]
fn used(dir: &Path) -> bool {
    let engine = engine(true);
    let cache = CompileCache::new(&engine, Some(dir.to_owned()));
    assert_eq!(load(&cache, &engine, &component(3)), Origin::Compiled);
    load(&cache, &engine, &component(3)) == Origin::Cache
}

/// The folder and those above it must be this user's (or root's) and writable by neither
/// their group nor others; a root-owned sticky folder above it (like `/tmp`) is fine.
#[cfg(unix)]
#[test]
fn a_folder_its_group_or_another_user_may_write_is_not_used() {
    let me = rustix::process::geteuid().as_raw();
    let stranger = me + 4242;
    let dir = TempDir::new("owners");
    let cache = dir.path().join("compiled");
    std::fs::create_dir_all(&cache).unwrap();
    set(dir.path(), 0o700, me);
    for (mode, owner) in [(0o770, me), (0o775, me), (0o720, me), (0o700, stranger)] {
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::create_dir(&cache).unwrap();
        set(&cache, mode, owner);
        assert!(!used(&cache), "{mode:o} owned by {owner}");
        assert!(entries(&cache).is_empty(), "{mode:o} owned by {owner}");
    }
    let _ = std::fs::remove_dir_all(&cache);
    assert!(used(&cache), "created private");
    // A folder above it: group-writable or another user's, refused; root's sticky, fine.
    for (mode, owner, ok) in [
        (0o775, me, false),
        (0o1777, stranger, false),
        (0o755, stranger, false),
        (0o1777, 0, true),
    ] {
        let _ = std::fs::remove_dir_all(&cache);
        set(dir.path(), mode, owner);
        assert_eq!(used(&cache), ok, "above: {mode:o} owned by {owner}");
    }
    set(dir.path(), 0o700, me);
}

/// An entry that its group may write, or another user's, is not read (and is replaced).
#[cfg(unix)]
#[test]
fn an_entry_others_may_write_is_not_read() {
    let me = rustix::process::geteuid().as_raw();
    let dir = TempDir::new("entry-owner");
    let engine = engine(true);
    let cache = CompileCache::new(&engine, Some(dir.path().to_owned()));
    let wasm = component(4);
    assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled);
    let entry = cache.entry(&crate::plugin::digest_of(&wasm)).unwrap();
    for (mode, owner) in [(0o664, me), (0o644, me + 4242)] {
        set(&entry, mode, owner);
        assert_eq!(load(&cache, &engine, &wasm), Origin::Compiled, "{mode:o}");
        assert_eq!(load(&cache, &engine, &wasm), Origin::Cache, "{mode:o}");
    }
}
