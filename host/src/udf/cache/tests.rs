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
    let digest = crate::udf::digest_of(wasm);
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
    let entry = cache.entry(&crate::udf::digest_of(&wasm)).unwrap();
    let whole = std::fs::read(&entry).unwrap();
    let mut flipped = whole.clone();
    *flipped.last_mut().unwrap() ^= 1;
    // The right header and checksum over code wasmtime refuses.
    let mut bogus = super::MAGIC.to_vec();
    bogus.extend_from_slice(&sha2::Sha256::digest(b"not code"));
    bogus.extend_from_slice(b"not code");
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
