//! Hot swap: new versions of a stage's plugin, found by watching its file, prepared off
//! the hot path and handed to the pipeline, which activates them between two batches.
//!
//! A watcher thread looks at every watched stage's file each `watch-interval`. A change
//! (size or modification time) is taken only once the file has stayed the same for one
//! more look, so a file still being written is never loaded; writing the new file next to
//! the old one and renaming it over is best. The new bytes are then checked, on the
//! watcher's thread, while batches go on:
//!
//! 1. its sha256 is on the stage's `allowed-digests`, if the stage has that list;
//! 2. it compiles, implements this host's WIT world and version, and its `init` succeeds
//!    with the stage's parameters ([`Runtime::load`]);
//! 3. it gives the expected verdict on each of the stage's `samples`, if any.
//!
//! A version that fails a check is refused with a message and the old one stays active.
//! One that passes waits in a queue as a [`Candidate`] until the next batch boundary.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use super::config::StageConfig;
use super::{Plugin, PluginError, Runtime, Verdict, digest_of};
use crate::record::Record;

/// A checked new version of a stage, ready to be activated.
#[derive(Debug)]
pub struct Candidate {
    /// Index of the stage.
    pub stage: usize,
    /// The loaded plugin.
    pub plugin: Plugin,
    /// When the change to the file was first seen.
    pub detected: Instant,
    /// How long loading and checking took.
    pub prepared_in: Duration,
}

/// A version that was refused, for progress and logs.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// Index of the stage.
    pub stage: usize,
    /// sha256 of the refused module.
    pub digest: String,
    /// Why.
    pub reason: String,
}

/// What the watcher (or the admin API) hands to the pipeline.
#[derive(Debug)]
pub enum Found {
    /// A version ready to activate.
    Ready(Candidate),
    /// A version that failed a check.
    Refused(Refusal),
    /// Run this plugin beside a stage in shadow mode (`None`: stop).
    Shadow {
        /// Index of the stage.
        stage: usize,
        /// The shadow.
        plugin: Option<Plugin>,
    },
    /// Go back to the previous version of a stage.
    Rollback {
        /// Index of the stage.
        stage: usize,
        /// Why, for the log.
        reason: String,
    },
}

/// One sample event and the verdict it must get.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    event: serde_json::Value,
    verdict: String,
    #[serde(default)]
    code: Option<String>,
}

/// A sample event as a record (its offset is its line's index in the file), with the
/// verdict (`kept`, `rewritten`, `rejected`) and rejection code it must get.
pub type SampleCase = (Record, String, Option<String>);

/// The sample events of a samples file.
pub type Samples = Vec<SampleCase>;

/// A stage to watch: its index, configuration, the digest of its active version and its
/// samples.
pub type WatchedStage = (usize, StageConfig, String, Samples);

/// Reads a samples file.
pub fn read_samples(path: &Path) -> Result<Samples, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read samples {}: {e}", path.display()))?;
    let topic: Arc<str> = "sample".into();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let sample: Sample = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
            if !["kept", "rewritten", "rejected"].contains(&sample.verdict.as_str()) {
                return Err(format!(
                    "{}:{}: verdict must be kept, rewritten or rejected, not {:?}",
                    path.display(),
                    i + 1,
                    sample.verdict
                ));
            }
            let record = Record::with_value(topic.clone(), i as i64, sample.event.to_string());
            Ok((record, sample.verdict, sample.code))
        })
        .collect()
}

/// A sample judged otherwise than its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The sample's line in its file (from 1).
    pub line: usize,
    /// The verdict it must get, with the code when the file gives one.
    pub expected: String,
    /// The verdict it got, with the code and message of a rejection.
    pub got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sample {} should be {} but is {}",
            self.line, self.expected, self.got
        )
    }
}

/// Judges every sample with `plugin`: the samples judged otherwise than expected, in
/// order. `Err` when the plugin fails on the samples.
pub fn compare_samples(plugin: &Plugin, samples: &[SampleCase]) -> Result<Vec<Mismatch>, String> {
    if samples.is_empty() {
        return Ok(Vec::new());
    }
    let records: Vec<&Record> = samples.iter().map(|(r, _, _)| r).collect();
    let verdicts = plugin
        .process_records(&records)
        .map_err(|e| format!("failed on the samples: {e}"))?;
    let mut mismatches = Vec::new();
    for ((record, expected, code), verdict) in samples.iter().zip(verdicts) {
        let (got, rejection) = match &verdict {
            Verdict::Keep => ("kept", None),
            Verdict::Rewrite(_) | Verdict::Patch(_) => ("rewritten", None),
            Verdict::Reject(r) => ("rejected", Some(r)),
        };
        let got_code = rejection.map(|r| r.code.as_str());
        let code_differs = code.as_deref().is_some_and(|c| Some(c) != got_code);
        if got != expected || code_differs {
            let with_code = |c: Option<&str>| c.map(|c| format!(" ({c})")).unwrap_or_default();
            mismatches.push(Mismatch {
                line: record.offset as usize + 1,
                expected: format!("{expected}{}", with_code(code.as_deref())),
                got: match rejection {
                    Some(r) => format!("{got} ({}: {})", r.code, r.message),
                    None => got.to_string(),
                },
            });
        }
    }
    Ok(mismatches)
}

/// Checks `plugin` against samples: `Err` names the first sample judged differently.
pub fn check_samples(plugin: &Plugin, samples: &[SampleCase]) -> Result<(), String> {
    match compare_samples(plugin, samples)?.into_iter().next() {
        Some(mismatch) => Err(mismatch.to_string()),
        None => Ok(()),
    }
}

/// Loads `bytes` as a new version of `stage` and runs every check on it.
pub fn prepare(
    runtime: &Runtime,
    stage: &StageConfig,
    bytes: &[u8],
    samples: &[SampleCase],
) -> Result<Plugin, String> {
    let digest = digest_of(bytes);
    if !stage.allowed_digests.is_empty() && !stage.allowed_digests.contains(&digest) {
        return Err(format!(
            "its sha256 {digest} is not in the stage's allowed-digests"
        ));
    }
    let params = stage
        .params
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let plugin = runtime
        .load(
            &stage.name,
            bytes,
            params,
            stage.limits.clone(),
            stage.grants.clone(),
        )
        .map_err(|e: PluginError| e.to_string())?;
    check_samples(&plugin, samples)?;
    Ok(plugin)
}

/// Watches the plugin files of a pipeline's stages; stops when dropped.
#[derive(Debug)]
pub struct Watcher {
    stop: Arc<AtomicBool>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What the watcher knows of one file.
struct Watched {
    stage: usize,
    config: StageConfig,
    samples: Samples,
    /// (size, modification time) last looked at.
    seen: Option<(u64, SystemTime)>,
    /// A change not yet settled: its (size, mtime) and when it was first seen.
    changing: Option<((u64, SystemTime), Instant)>,
    /// Digest of the last version handled (active, offered or refused).
    digest: String,
}

impl Watcher {
    /// Starts watching `stages` (index, configuration, digest of the active version), with
    /// their samples already read; what it finds goes to `tx`.
    pub fn start(
        runtime: Runtime,
        stages: Vec<WatchedStage>,
        interval: Duration,
        tx: Sender<Found>,
    ) -> Result<Watcher, std::io::Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut watched: Vec<Watched> = stages
            .into_iter()
            .map(|(stage, config, digest, samples)| Watched {
                seen: stat(&config.plugin),
                stage,
                config,
                samples,
                changing: None,
                digest,
            })
            .collect();
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("sluice-watch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(interval);
                    for w in &mut watched {
                        if look(&runtime, w, &tx).is_err() {
                            return; // the pipeline is gone
                        }
                    }
                }
            })?;
        Ok(Watcher { stop })
    }
}

fn stat(path: &PathBuf) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// One look at one file. `Err` when nobody listens any more.
fn look(runtime: &Runtime, w: &mut Watched, tx: &Sender<Found>) -> Result<(), ()> {
    let now = stat(&w.config.plugin);
    if now.is_none() || now == w.seen {
        w.changing = None;
        return Ok(());
    }
    match w.changing {
        Some((pending, since)) if Some(pending) == now => {
            // Settled: the same size and time as one look ago.
            w.seen = now;
            w.changing = None;
            let Ok(bytes) = std::fs::read(&w.config.plugin) else {
                return Ok(());
            };
            let digest = digest_of(&bytes);
            if digest == w.digest {
                return Ok(());
            }
            w.digest = digest.clone();
            let started = Instant::now();
            let found = match prepare(runtime, &w.config, &bytes, &w.samples) {
                Ok(plugin) => {
                    tracing::info!(stage = %w.config.name, %digest, prepared_ms = started.elapsed().as_millis() as u64, "new plugin version checked; it is activated at the next batch");
                    Found::Ready(Candidate {
                        stage: w.stage,
                        plugin,
                        detected: since,
                        prepared_in: started.elapsed(),
                    })
                }
                Err(reason) => {
                    tracing::warn!(stage = %w.config.name, %digest, %reason, "new plugin version refused; the active version stays");
                    Found::Refused(Refusal {
                        stage: w.stage,
                        digest,
                        reason,
                    })
                }
            };
            tx.send(found).map_err(drop)
        }
        _ => {
            w.changing = now.map(|n| (n, Instant::now()));
            Ok(())
        }
    }
}
