//! Versions activated through the admin API, kept across restarts (`[admin] state-dir`).
//!
//! `<state-dir>/<pipeline>/activations.json` names, per stage, the version activated
//! through the API (its sha256, when, by whom, and the sha256 its stage's file had then)
//! and the one it replaced, if that was an activation too; the modules are kept beside it
//! in `modules/<sha256>.wasm`. Every file is written whole to a temporary file, synced,
//! and renamed over the old one, and the folder is synced, so a crash leaves the old
//! record or the new one, never half of one.
//!
//! The record follows the stage: an activation is recorded when the API accepts it, and
//! after each batch the record is brought in line with the version that ran (a rollback
//! goes back to the previous activation, or to the file's version; a new version of the
//! file replaces the activation). At start, see [`super::restore`].

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::lock;

/// The record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The record is not what sluice writes.
    #[error("{path}: not a record of activations: {error}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        error: serde_json::Error,
    },
}

/// One version activated through the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct Activation {
    /// sha256 of the module.
    pub(super) digest: String,
    /// When the API accepted it (RFC 3339, UTC).
    pub(super) activated_at: String,
    /// The caller's address.
    pub(super) by: String,
    /// sha256 of the stage's file at that moment (`None`: it could not be read).
    pub(super) file_digest: Option<String>,
    /// The activation it replaced, if the stage ran one (one level: the record of that one
    /// has no `previous`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) previous: Option<Box<Activation>>,
}

impl Activation {
    /// For logs: `sha256 … activated at … by …`.
    pub(super) fn describe(&self) -> String {
        format!(
            "{} activated at {} by {}",
            self.digest, self.activated_at, self.by
        )
    }
}

/// The file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Saved {
    stages: BTreeMap<String, Activation>,
}

/// The record of a pipeline's activations.
#[derive(Debug)]
pub(super) struct Activations {
    dir: PathBuf,
    saved: Mutex<Saved>,
    /// Stages whose recorded activation has not run a batch yet.
    pending: Mutex<HashSet<String>>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PersistError + '_ {
    move |error| PersistError::Io {
        path: path.to_owned(),
        error,
    }
}

/// Writes `bytes` to `path` through a synced temporary file renamed over it, then syncs
/// the folder ([`crate::files::replace_with`]).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    crate::files::replace_with(path, bytes).map_err(io(path))
}

impl Activations {
    /// Opens (or starts) the record of `pipeline` under `state_dir`.
    pub(super) fn open(state_dir: &Path, pipeline: &str) -> Result<Self, PersistError> {
        let dir = state_dir.join(pipeline);
        std::fs::create_dir_all(dir.join("modules")).map_err(io(&dir))?;
        let file = dir.join("activations.json");
        let saved = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| PersistError::Corrupt {
                path: file.clone(),
                error,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Saved::default(),
            Err(e) => return Err(io(&file)(e)),
        };
        Ok(Activations {
            dir,
            saved: Mutex::new(saved),
            pending: Mutex::new(HashSet::new()),
        })
    }

    /// The record's file.
    pub(super) fn file(&self) -> PathBuf {
        self.dir.join("activations.json")
    }

    /// Where the module of `digest` is kept.
    pub(super) fn module(&self, digest: &str) -> PathBuf {
        self.dir.join("modules").join(format!("{digest}.wasm"))
    }

    /// The activation recorded for `stage`.
    pub(super) fn get(&self, stage: &str) -> Option<Activation> {
        lock(&self.saved).stages.get(stage).cloned()
    }

    /// Records that `stage` runs `activation` from the next batch (its module's bytes are
    /// `module`); returns the record it replaces.
    pub(super) fn activate(
        &self,
        stage: &str,
        mut activation: Activation,
        module: &[u8],
    ) -> Result<Option<Activation>, PersistError> {
        let path = self.module(&activation.digest);
        write_atomically(&path, module)?;
        let mut saved = lock(&self.saved);
        let before = saved.stages.get(stage).cloned();
        activation.previous = before.clone().map(|mut b| {
            b.previous = None;
            Box::new(b)
        });
        saved.stages.insert(stage.to_string(), activation);
        self.write(&saved)?;
        lock(&self.pending).insert(stage.to_string());
        Ok(before)
    }

    /// Puts back what [`Activations::activate`] replaced (the activation did not happen).
    pub(super) fn undo(&self, stage: &str, before: Option<Activation>) -> Result<(), PersistError> {
        let mut saved = lock(&self.saved);
        match before {
            Some(b) => saved.stages.insert(stage.to_string(), b),
            None => saved.stages.remove(stage),
        };
        lock(&self.pending).remove(stage);
        self.write(&saved)
    }

    /// Marks a restored activation as waiting for its first batch.
    pub(super) fn restored(&self, stage: &str) {
        lock(&self.pending).insert(stage.to_string());
    }

    /// Forgets `stage`'s activation: its file's version runs.
    pub(super) fn forget(&self, stage: &str) -> Result<(), PersistError> {
        let mut saved = lock(&self.saved);
        lock(&self.pending).remove(stage);
        if saved.stages.remove(stage).is_some() {
            self.write(&saved)?;
        }
        Ok(())
    }

    /// Brings the record in line with a committed batch, in which `stage` ran `digest`
    /// (`rolled_back`: the progress's note of a rollback, which starts with the digest of
    /// the version rolled back). Returns what changed, for the audit log.
    pub(super) fn follow(
        &self,
        stage: &str,
        digest: &str,
        rolled_back: Option<&str>,
    ) -> Result<Option<String>, PersistError> {
        let mut saved = lock(&self.saved);
        let Some(current) = saved.stages.get(stage).cloned() else {
            return Ok(None);
        };
        if current.digest == digest {
            lock(&self.pending).remove(stage);
            return Ok(None);
        }
        let rejected = rolled_back.is_some_and(|r| r.starts_with(&current.digest));
        if lock(&self.pending).contains(stage) && !rejected {
            return Ok(None); // activated at a later batch
        }
        lock(&self.pending).remove(stage);
        let change = match current.previous {
            Some(previous) if previous.digest == digest => {
                let said = format!("back to the activation {}", previous.describe());
                saved.stages.insert(stage.to_string(), *previous);
                said
            }
            _ => {
                saved.stages.remove(stage);
                format!("the activation {} no longer runs", current.digest)
            }
        };
        self.write(&saved)?;
        Ok(Some(change))
    }

    /// Writes the record, then removes the modules it no longer names.
    fn write(&self, saved: &Saved) -> Result<(), PersistError> {
        let text = serde_json::to_vec_pretty(saved).map_err(|error| PersistError::Corrupt {
            path: self.file(),
            error,
        })?;
        write_atomically(&self.file(), &text)?;
        let named: HashSet<PathBuf> = saved
            .stages
            .values()
            .flat_map(|a| std::iter::once(a).chain(a.previous.as_deref()))
            .map(|a| self.module(&a.digest))
            .collect();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("modules")) {
            for entry in entries.flatten() {
                if !named.contains(&entry.path()) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activation(digest: &str) -> Activation {
        Activation {
            digest: digest.into(),
            activated_at: "2026-07-29T10:00:00Z".into(),
            by: "127.0.0.1:5000".into(),
            file_digest: Some("f0".into()),
            previous: None,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn activations_survive_a_reopen_and_follow_the_stage() {
        let dir = temp_dir("activations");
        let store = Activations::open(&dir, "clicks").unwrap();
        assert_eq!(
            store.activate("rules", activation("a1"), b"A").unwrap(),
            None
        );
        // Not run yet: a batch on the file's version leaves the record alone.
        assert_eq!(store.follow("rules", "f0", None).unwrap(), None);
        assert_eq!(store.follow("rules", "a1", None).unwrap(), None);
        store.activate("rules", activation("b2"), b"B").unwrap();
        assert_eq!(std::fs::read(store.module("a1")).unwrap(), b"A");

        let reopened = Activations::open(&dir, "clicks").unwrap();
        let b2 = reopened.get("rules").unwrap();
        assert_eq!(b2.digest, "b2");
        assert_eq!(b2.previous.as_ref().unwrap().digest, "a1");
        assert_eq!(reopened.get("other"), None);

        // A rollback to a1 keeps a1's record; a rollback to the file's version forgets it.
        reopened.follow("rules", "b2", None).unwrap();
        let said = reopened
            .follow("rules", "a1", Some("b2 requested"))
            .unwrap();
        assert!(said.unwrap().contains("back to the activation a1"));
        assert_eq!(reopened.get("rules").unwrap().digest, "a1");
        assert!(!reopened.module("b2").exists(), "b2's module is removed");
        reopened
            .follow("rules", "f0", Some("a1 requested"))
            .unwrap();
        assert_eq!(
            Activations::open(&dir, "clicks").unwrap().get("rules"),
            None
        );
        assert!(!reopened.module("a1").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_version_rolled_back_on_probation_is_forgotten_and_undo_restores() {
        let dir = temp_dir("probation");
        let store = Activations::open(&dir, "clicks").unwrap();
        store.activate("rules", activation("a1"), b"A").unwrap();
        let said = store.follow("rules", "f0", Some("a1 failed on 9 of its first 10 events"));
        assert!(said.unwrap().unwrap().contains("no longer runs"));
        assert_eq!(store.get("rules"), None);

        let before = store.activate("rules", activation("a1"), b"A").unwrap();
        store.undo("rules", before).unwrap();
        assert_eq!(
            Activations::open(&dir, "clicks").unwrap().get("rules"),
            None
        );
        std::fs::write(store.file(), b"{\"stages\": 3}").unwrap();
        let corrupt = Activations::open(&dir, "clicks").unwrap_err();
        assert!(
            corrupt.to_string().contains("activations.json"),
            "{corrupt}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
