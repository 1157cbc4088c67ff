//! The one way a small file is replaced on local disk: written to a temporary file beside
//! it, the file synced, renamed over the old one, the folder synced. A crash leaves the old
//! file or the new one, never a torn one; a failed write leaves no temporary file behind.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Who may read the new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The process's umask decides (the default of [`File::create`]).
    Default,
    /// This user alone (mode `0600` on Unix), whatever the umask.
    Private,
}

/// Replaces `path` with what `write` writes to a fresh file, durably (see the module).
pub fn replace(
    path: &Path,
    access: Access,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let temp = temp_path(path);
    let written = (|| {
        let mut file = open_new(&temp, access)?;
        write(&mut file)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Replaces `path` with `bytes`, durably.
pub fn replace_with(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, Access::Default, |file| {
        io::Write::write_all(file, bytes)
    })
}

/// A name beside `path` that no other write uses, in this process or another:
/// `<name>.tmp.<pid>.<n>`.
fn temp_path(path: &Path) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}.{n}", std::process::id()));
    path.with_file_name(name)
}

fn open_new(path: &Path, access: Access) -> io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if access == Access::Private {
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    }
    #[cfg(not(unix))]
    let _ = access;
    options.open(path)
}

/// Flushes `dir`'s entries (a renamed file's name) to disk.
fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let dir = folder("replace");
        let path = dir.join("state.json");
        replace_with(&path, b"one").unwrap();
        replace_with(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(entries(&dir), ["state.json"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file_and_no_temporary_file() {
        let dir = folder("failed");
        let path = dir.join("entry");
        replace_with(&path, b"old").unwrap();
        let failed = replace(&path, Access::Default, |file| {
            io::Write::write_all(file, b"half")?;
            Err(io::Error::other("disk full"))
        });
        assert_eq!(failed.unwrap_err().to_string(), "disk full");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(&dir), ["entry"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_private_file_is_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = folder("private");
        let path = dir.join("code");
        replace(&path, Access::Private, |file| {
            io::Write::write_all(file, b"x")
        })
        .unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }
}
