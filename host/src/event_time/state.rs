//! Saved operator state: one file per batch, written to the table's location before any
//! commit of the batch and named in the table's snapshot summary (`sluice.state`): a
//! snapshot of the whole state, or a delta of what the batch changed that names the
//! snapshot and deltas it builds on (see [`super::delta`]).
//!
//! The file also holds the batch's *plan*: the offsets it read and the processing time
//! it ran at. After a crash between the state file and the table commit, the restarted
//! pipeline finds the plan of the next batch and replays exactly that plan, so its
//! results are the same as they would have been without the crash: a window that an
//! output already holds is not emitted with different contents, and none is missed.
//! With a commit cadence a batch is several triggers held into one commit, saved once:
//! its plan lists each of them ([`Plan::held`]), and the replay runs them one by one.
//!
//! Each process names its state files with its own run id (`<batch>-<run>.json`), so a
//! process fenced off the table (see [`crate::iceberg::fence`]) can never overwrite
//! the state another process committed for the same batch. The plan is found through a
//! small pointer at a name that does not depend on the run (`<batch>.json`), which a
//! restart can compute; state files of older versions of sluice were written at that name
//! whole, and read the same way.

//!
//! The rooms: [`store`] (where files are kept, and errors), [`saved`] (the saved forms and
//! reading them), [`split`] (one partition's share of a saved state, and shares put
//! together), [`files`] (paths, plan pointers, chains and cleanup); here, saving and
//! recovering the operators.

pub mod files;
pub mod saved;
pub mod shares;
pub mod split;
pub mod store;

pub use self::files::{
    KEEP_STATE_FILES, chain_files, delta_path, forget_old, path, planned, run_path, state_root,
    write_plan,
};
pub use self::saved::{BuiltOn, PlanFile, SavedState, SavedStateRef, StateFile, StateFileRef};
use self::saved::{SNAPSHOT_MAGIC, read_sized, read_snapshot};
pub use self::store::{MemoryStore, StateError, StateStore};
use super::EventTime;
use super::delta::{Chain, DELTA_SUFFIX, DELTA_VERSION, DeltaFile, DeltaFileRef};
pub use super::plan::{Plan, TriggerPlan};
pub use super::window::SavedGroupRef;

impl EventTime {
    /// Writes the state after a batch, with the batch's plan: a delta of what changed since
    /// the last save when the chain takes it, else a snapshot of the whole state (see
    /// [`super::delta`]). Returns the file's path and size. `run` tells this process's
    /// files from another's.
    pub fn save(
        &mut self,
        store: &dyn StateStore,
        location: &str,
        pipeline: &str,
        run: &str,
        plan: &Plan,
    ) -> Result<(String, u64), StateError> {
        let (state_file, size) = self.save_file(store, location, pipeline, run, plan)?;
        write_plan(store, location, pipeline, plan, Some(state_file.clone()))?;
        Ok((state_file, size))
    }

    /// [`EventTime::save`] without the plan's pointer (state kept by partition writes one
    /// per partition, see [`super::tasks`]).
    pub fn save_file(
        &mut self,
        store: &dyn StateStore,
        location: &str,
        pipeline: &str,
        run: &str,
        plan: &Plan,
    ) -> Result<(String, u64), StateError> {
        let delta_file = delta_path(location, pipeline, plan.batch_id, run);
        let (state_file, bytes, chain) = match self.encode_delta(pipeline, plan, &delta_file)? {
            Some((bytes, chain)) => (delta_file, bytes, chain),
            None => {
                let path = run_path(location, pipeline, plan.batch_id, run);
                let (bytes, chain) = self.encode_snapshot(pipeline, plan, &path)?;
                (path, bytes, chain)
            }
        };
        let size = bytes.len() as u64;
        store.put(&state_file, bytes)?;
        self.track(chain);
        Ok((state_file, size))
    }

    /// The bytes of a delta file at `path` and the chain after it, if the current chain
    /// takes it.
    fn encode_delta(
        &self,
        pipeline: &str,
        plan: &Plan,
        path: &str,
    ) -> Result<Option<(Vec<u8>, Chain)>, StateError> {
        let Some(chain) = self.chain() else {
            return Ok(None);
        };
        if !chain.takes(self.changed_rows()) {
            return Ok(None);
        }
        let file = DeltaFileRef {
            version: DELTA_VERSION,
            pipeline,
            plan,
            chain: &chain.paths,
            delta: self.delta_ref(),
        };
        let bytes = serde_json::to_vec(&file).map_err(StateError::Serialise)?;
        if !chain.takes_bytes(bytes.len() as u64) {
            return Ok(None);
        }
        let mut next = chain.clone();
        next.paths.deltas.push(path.to_string());
        next.delta_bytes += bytes.len() as u64;
        Ok(Some((bytes, next)))
    }

    /// The bytes of a snapshot file at `path` and the chain that starts at it.
    fn encode_snapshot(
        &self,
        pipeline: &str,
        plan: &Plan,
        path: &str,
    ) -> Result<(Vec<u8>, Chain), StateError> {
        let file = StateFileRef {
            version: 1,
            pipeline,
            plan,
            state: self.save_ref(),
        };
        // `to_allocvec` appends with `extend_from_slice` (`to_extend` goes through `Extend`).
        let body = postcard::to_allocvec(&file).map_err(StateError::Encode)?;
        let mut bytes = Vec::with_capacity(SNAPSHOT_MAGIC.len() + body.len());
        bytes.extend_from_slice(SNAPSHOT_MAGIC);
        bytes.extend_from_slice(&body);
        let chain = Chain::new(path.to_string(), bytes.len() as u64, self.state_rows());
        Ok((bytes, chain))
    }

    /// After a restart: restores the state named by the table's last commit (`saved`, the
    /// `sluice.state` of its summary), and returns the plan of the next batch if it was
    /// planned from `positions` (its state file written) but not committed: that batch is
    /// to be replayed first. `resumed` says whether the table holds a commit of the
    /// pipeline at all.
    pub fn recover(
        &mut self,
        store: &dyn StateStore,
        saved: Option<&str>,
        resumed: bool,
        next: &str,
        positions: &str,
    ) -> Result<Option<Plan>, StateError> {
        match saved {
            Some(path) => {
                let chain = self.load(store, path)?;
                let files = chain.paths.deltas.len() + 1;
                self.track(chain);
                tracing::info!(state = %path, files, "restored event-time state");
            }
            None if resumed => tracing::warn!(
                "the table's last commit names no event-time state: starting with none"
            ),
            None => {}
        }
        Ok(planned(store, next, positions))
    }

    /// Restores the state saved at `path` (a snapshot, or a delta and its chain); returns
    /// the chain that ends there.
    pub(crate) fn load(&mut self, store: &dyn StateStore, path: &str) -> Result<Chain, StateError> {
        let missing = || StateError::Missing(path.into());
        if !path.ends_with(DELTA_SUFFIX) {
            let (file, bytes) = read_snapshot(store, path)?.ok_or_else(missing)?;
            self.restore(file.state);
            return Ok(Chain::new(path.into(), bytes, self.state_rows()));
        }
        let (last, last_bytes) = read_sized::<DeltaFile>(store, path)?.ok_or_else(missing)?;
        let broken = |file: &str| StateError::Chain {
            file: file.into(),
            named_by: path.into(),
        };
        let base = &last.chain.base;
        let (file, base_bytes) = read_snapshot(store, base)?.ok_or_else(|| broken(base))?;
        self.restore(file.state);
        let mut chain = Chain::new(base.clone(), base_bytes, self.state_rows());
        for delta in &last.chain.deltas {
            let (file, bytes) =
                read_sized::<DeltaFile>(store, delta)?.ok_or_else(|| broken(delta))?;
            if file.chain != chain.paths {
                return Err(broken(delta));
            }
            self.apply_delta(file.delta);
            chain.paths.deltas.push(delta.clone());
            chain.delta_bytes += bytes;
        }
        self.apply_delta(last.delta);
        chain.paths.deltas.push(path.into());
        chain.delta_bytes += last_bytes;
        Ok(chain)
    }
}

#[cfg(test)]
mod tests;
