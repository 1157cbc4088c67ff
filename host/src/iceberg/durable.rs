//! Local warehouses that survive a power cut: iceberg's local storage, except that every
//! file written (metadata JSON, manifests, data files, event-time state) is flushed to disk
//! with its folder before the write returns, so before the catalog's pointer moves to it.
//!
//! iceberg-rust's `LocalFsStorage` syncs files written through a writer when they close
//! (data files, manifests) but writes whole files (the table metadata JSON, which the
//! catalog then points to) without fsync, and never syncs a folder, so after a power cut
//! the catalog could name a metadata file that is empty or gone. Object stores (S3) need
//! none of this: a PUT is durable when it returns.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

/// Builds [`DurableFsStorage`] for local warehouses.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DurableFsStorageFactory;

#[typetag::serde]
impl StorageFactory for DurableFsStorageFactory {
    fn build(&self, _config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        Ok(Arc::new(DurableFsStorage::default()))
    }
}

/// iceberg's local storage with every write flushed, file and folder (see the module).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DurableFsStorage {
    #[serde(skip)]
    inner: LocalFsStorage,
    /// fsync calls made, for tests.
    #[serde(skip)]
    syncs: Arc<AtomicU64>,
}

impl DurableFsStorage {
    /// fsync calls made so far (files and folders).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    fn sync_file(&self, file: &fs::File, path: &Path) -> Result<()> {
        file.sync_all().map_err(io_error("syncing", path))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Flushes `dir`'s entries (a new file's name) to disk.
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let handle = fs::File::open(dir).map_err(io_error("opening", dir))?;
        self.sync_file(&handle, dir)
    }

    /// Creates `dir` and any missing parents, each made durable in its parent.
    fn ensure_dir(&self, dir: &Path) -> Result<()> {
        if dir.as_os_str().is_empty() || dir.is_dir() {
            return Ok(());
        }
        if let Some(parent) = dir.parent() {
            self.ensure_dir(parent)?;
        }
        match fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(io_error("creating", dir)(e)),
        }
        match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => self.sync_dir(parent),
            _ => Ok(()),
        }
    }
}

/// The local path of a `file://` URL or a plain path.
pub(crate) fn local(path: &str) -> PathBuf {
    let rest = path
        .strip_prefix("file://")
        .or_else(|| path.strip_prefix("file:"))
        .unwrap_or(path);
    if path.starts_with("file:") && !rest.starts_with('/') {
        PathBuf::from(format!("/{rest}"))
    } else {
        PathBuf::from(rest)
    }
}

fn io_error<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| {
        Error::new(
            ErrorKind::Unexpected,
            format!("{what} {}: {e}", path.display()),
        )
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for DurableFsStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        self.inner.metadata(path).await
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.inner.read(path).await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        self.inner.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        let path = local(path);
        let dir = path.parent().unwrap_or(Path::new("/"));
        self.ensure_dir(dir)?;
        let mut file = fs::File::create(&path).map_err(io_error("creating", &path))?;
        file.write_all(&bs).map_err(io_error("writing", &path))?;
        self.sync_file(&file, &path)?;
        self.sync_dir(dir)
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        let local = local(path);
        let dir = local.parent().unwrap_or(Path::new("/")).to_path_buf();
        self.ensure_dir(&dir)?;
        let inner = self.inner.writer(path).await?;
        Ok(Box::new(DurableWrite {
            inner,
            dir,
            storage: self.clone(),
        }))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.inner.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        self.inner.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// A file being written: iceberg's writer (which syncs the file on close), then its folder.
struct DurableWrite {
    inner: Box<dyn FileWrite>,
    dir: PathBuf,
    storage: DurableFsStorage,
}

#[async_trait]
impl FileWrite for DurableWrite {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        self.inner.write(bs).await
    }

    async fn close(&mut self) -> Result<()> {
        self.inner.close().await?;
        self.storage.syncs.fetch_add(1, Ordering::Relaxed);
        self.storage.sync_dir(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sluice-durable-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_whole_file_write_syncs_the_file_and_every_folder_it_creates() {
        let root = dir("whole");
        let storage = DurableFsStorage::default();
        let path = format!("file://{}/a/b/v1.metadata.json", root.display());
        futures::executor::block_on(storage.write(&path, Bytes::from_static(b"{}"))).unwrap();
        assert_eq!(fs::read(root.join("a/b/v1.metadata.json")).unwrap(), b"{}");
        // root, a and b created (each synced in its parent), the file, and b again.
        assert_eq!(storage.syncs(), 5);
        futures::executor::block_on(storage.write(&path, Bytes::from_static(b"[]"))).unwrap();
        assert_eq!(
            storage.syncs(),
            7,
            "an existing folder: the file and its folder"
        );
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_streamed_file_syncs_its_folder_on_close() {
        let root = dir("stream");
        fs::create_dir_all(&root).unwrap();
        let storage = DurableFsStorage::default();
        let path = root.join("data.parquet");
        futures::executor::block_on(async {
            let mut w = storage.writer(&path.display().to_string()).await.unwrap();
            w.write(Bytes::from_static(b"PAR1")).await.unwrap();
            assert_eq!(storage.syncs(), 0);
            w.close().await.unwrap();
        });
        assert_eq!(storage.syncs(), 2);
        assert_eq!(fs::read(&path).unwrap(), b"PAR1");
        let _ = fs::remove_dir_all(&root);
    }
}
