//! Active and standby: an event-time pipeline with `[source] mode = "group"` runs in the
//! process its [`Election`] makes active, and waits in the others (see
//! [`crate::election`]).
//!
//! A standby has its plugins loaded, its table and outputs open and its admin API up; it
//! reads nothing. Made active, it resumes from the table as a restart would (positions,
//! event-time state, a planned batch to replay) and runs batches, while a thread of its own
//! keeps asking the election. Demoted (another process is active now), it stops after the
//! batch in flight, which the table's fence refuses if the other process committed first,
//! lets go of the source and waits again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Pipeline, PipelineError};
use crate::election::Election;
use crate::progress::Role;

/// How often the election is asked.
const POLL: Duration = Duration::from_millis(100);

impl Pipeline {
    /// Runs as the election says until `stop` is raised or, while active, the trigger ends
    /// (`available-now`). Returns whether a stop ended the run.
    pub(super) fn run_elected(
        &mut self,
        election: &mut dyn Election,
        stop: &AtomicBool,
    ) -> Result<bool, PipelineError> {
        loop {
            self.set_role(Role::Standby);
            tracing::info!("standby: waiting to become the active process");
            if !wait_until_active(election, stop, &|| self.beat()) {
                return Ok(true);
            }
            self.election_changes = election.changes();
            tracing::info!(
                changes = self.election_changes,
                "active: this process runs the pipeline now; resuming from the table"
            );
            self.set_role(Role::Active);
            self.resume()?;
            let demoted = AtomicBool::new(false);
            let stopped = self.run_while_active(election, stop, &demoted)?;
            if !demoted.load(Ordering::SeqCst) {
                return Ok(stopped);
            }
            tracing::warn!(
                "no longer the active process (the election moved): back to standby; a batch another process committed first was fenced"
            );
            self.source.release();
            self.positions = Default::default();
        }
    }

    /// Runs the pipeline while `election` says this process is active: a watcher thread
    /// raises the pipeline's stop when it is demoted (and sets `demoted`) or when `stop` is
    /// raised.
    fn run_while_active(
        &mut self,
        election: &mut dyn Election,
        stop: &AtomicBool,
        demoted: &AtomicBool,
    ) -> Result<bool, PipelineError> {
        let halt = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    if stop.load(Ordering::SeqCst) {
                        halt.store(true, Ordering::SeqCst);
                    } else if !election.active() {
                        demoted.store(true, Ordering::SeqCst);
                        halt.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(POLL);
                }
            });
            let ran = self.run_active(&halt);
            done.store(true, Ordering::SeqCst);
            ran
        })
    }

    /// Shows the role on the admin API (`/status`, `sluice_active`).
    fn set_role(&mut self, role: Role) {
        self.role = role;
        if let Some(admin) = &self.admin {
            admin.set_role(role);
        }
    }
}

/// Waits until `election` makes this process active (`true`) or `stop` is raised, calling
/// `beat` as it waits (a standby is alive).
fn wait_until_active(election: &mut dyn Election, stop: &AtomicBool, beat: &dyn Fn()) -> bool {
    loop {
        beat();
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        if election.active() {
            return true;
        }
        std::thread::sleep(POLL);
    }
}
