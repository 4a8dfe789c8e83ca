//! The engine's life: started (its loops spawned) and shut down (turns finished, held results
//! applied, leases released so a restart resumes at once).

use super::{Engine, EngineError};
use crate::driver::loops::{
    activity, claim, counts, definitions, lease, redispatch, replies, results, retention,
    shared_pools, sweep,
};
use crate::model::{Millis, TenantEventKind};

impl Engine {
    /// Starts the control loops. Steps whose dispatch was lost with a process that is gone are
    /// sent again first.
    pub async fn start(&self) -> Result<(), EngineError> {
        let Some(requeued) = self
            .requeued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return Err(EngineError::AlreadyStarted);
        };
        // Alive before anything is sent, so no peer takes this driver's steps for lost ones.
        let now = self.state.clock.now();
        let alive_until = now + self.state.config.lease.as_millis() as Millis;
        let peers = self
            .state
            .store
            .beat_driver(&self.state.config.owner, alive_until, now)
            .await?;
        self.state.note_peers(Some(peers));
        let results = self.state.transport.consume_results().await?;
        redispatch::redispatch_due(&self.state).await?;
        sweep::sweep_once(&self.state).await?;
        let served = self.state.registry.workflow_versions();
        let now = self.state.clock.now();
        for run in self
            .state
            .store
            .unblock_runs(&self.state.scope, &served, now)
            .await?
        {
            tracing::info!(run_id = %run.id, workflow = %run.workflow, version = run.workflow_version, "un-parked a blocked run: its version is served here now");
            self.state.emit(&run, TenantEventKind::RunStarted, None);
        }
        let s = &self.state;
        let handles = vec![
            tokio::spawn(sweep::sweep_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(claim::claim_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(counts::counts_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(definitions::definitions_loop(
                s.clone(),
                self.stop.subscribe(),
            )),
            tokio::spawn(activity::activity_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(results::results_loop(
                s.clone(),
                results,
                requeued,
                self.stop.subscribe(),
            )),
            tokio::spawn(redispatch::redispatch_loop(
                s.clone(),
                self.stop.subscribe(),
            )),
            tokio::spawn(lease::lease_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(retention::retention_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(replies::replies_loop(s.clone(), self.stop.subscribe())),
            tokio::spawn(shared_pools::shared_pools_loop(
                s.clone(),
                self.stop.subscribe(),
            )),
            tokio::spawn(crate::schedules::ticker_loop(
                self.clone(),
                self.stop.subscribe(),
            )),
        ];
        *self.loops.lock().unwrap_or_else(|p| p.into_inner()) = Some(handles);
        s.set_accepting(true);
        Ok(())
    }

    /// Stops claiming new work, lets running turns finish and persist, applies results that
    /// already arrived or were held for those turns, and releases this engine's leases so a restart resumes at once.
    pub async fn shutdown(&self) {
        self.state.set_accepting(false);
        let _ = self.stop.send(true);
        let handles = self.loops.lock().unwrap_or_else(|p| p.into_inner()).take();
        for h in handles.into_iter().flatten() {
            if let Err(e) = h.await {
                tracing::error!(error = %e, "an engine loop ended abnormally");
            }
        }
        // The results loop ended once the turns still executing had persisted (their runs are
        // not left half-applied) and the results they held were applied (recorded: no new turn
        // starts now).
        let now = self.state.clock.now();
        // Gone now: a transport that kept its tasks in this process lost them; peers and the
        // restart send them again at once.
        if let Err(e) = self
            .state
            .store
            .beat_driver(&self.state.config.owner, now, now)
            .await
        {
            tracing::warn!(error = %e, "could not mark this driver gone; its heartbeat lapses on its own");
        }
        match self
            .state
            .store
            .release_leases(&self.state.config.owner, now)
            .await
        {
            Ok(n) if n > 0 => tracing::info!(released = n, "released run leases"),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not release leases; they expire on their own")
            }
        }
        // The last results applied above are in the charts too.
        if let Err(e) = self.state.add_step_tallies().await {
            tracing::warn!(error = %e, "could not add the last step run times to the activity minutes");
        }
    }
}
