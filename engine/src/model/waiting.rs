//! Why a run that has not finished is not moving, derived from its record and checkpoints, so
//! the dashboard (and the API) can say "waiting for signal `approve`" instead of "suspended".

use serde::{Deserialize, Serialize};

use super::{CheckpointKind, CheckpointStatus, Millis, RunDetail, RunId, RunStatus};

/// One thing a run waits for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Waiting {
    /// Ready to run; waiting for a driver to pick it up.
    Queued,
    /// Parked: no process serves its workflow version, or no live worker can take its step.
    Blocked {
        /// Why it is parked.
        reason: String,
        /// What to do about it, when the engine knows (the dispatch guard names the worker
        /// to start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fix: Option<String>,
    },
    /// A durable timer.
    Timer {
        /// Its position.
        seq: u32,
        /// When it fires.
        due_at: Option<Millis>,
    },
    /// A signal sent to the run by name.
    Signal {
        /// The wait's position.
        seq: u32,
        /// The signal's name.
        name: String,
        /// When the wait gives up, if it does.
        timeout_at: Option<Millis>,
    },
    /// A remote step dispatched to a worker group, waiting for its result.
    Step {
        /// Its position.
        seq: u32,
        /// The step name.
        name: String,
        /// The routing token it was queued on (`name@partition`).
        group: Option<String>,
        /// When this try was dispatched.
        since: Option<Millis>,
        /// Which try this is (1 for the first).
        attempt: u32,
    },
    /// A failed remote step waiting out its retry backoff.
    Retry {
        /// Its position.
        seq: u32,
        /// The step name.
        name: String,
        /// When the next try is dispatched.
        due_at: Option<Millis>,
        /// The try that comes next.
        attempt: u32,
    },
    /// A child run.
    Child {
        /// Its position.
        seq: u32,
        /// The child's workflow.
        workflow: String,
        /// The child's id (`<run>.child.<seq>`), when it fits in a run id.
        run_id: Option<RunId>,
    },
}

impl RunDetail {
    /// What the run waits for: nothing once it ended; `Queued` while pending; `Blocked` while
    /// parked; otherwise every durable operation still pending.
    pub fn waiting_for(&self) -> Vec<Waiting> {
        match self.run.status {
            status if status.is_terminal() => Vec::new(),
            RunStatus::Pending => vec![Waiting::Queued],
            RunStatus::Blocked => {
                let error = self.run.error.as_ref();
                vec![Waiting::Blocked {
                    reason: error
                        .map(|e| e.message.clone())
                        .unwrap_or_else(|| "no process serves this workflow version".into()),
                    fix: error
                        .and_then(|e| e.details.as_ref()?.get("fix")?.as_str())
                        .map(str::to_owned),
                }]
            }
            _ => self
                .checkpoints
                .iter()
                .filter(|c| c.status == CheckpointStatus::Pending)
                .map(|c| match c.kind {
                    CheckpointKind::Sleep => Waiting::Timer {
                        seq: c.seq,
                        due_at: c.wake_at,
                    },
                    CheckpointKind::Signal => Waiting::Signal {
                        seq: c.seq,
                        name: c.name.clone(),
                        timeout_at: c.wake_at,
                    },
                    CheckpointKind::RemoteStep if c.enqueued_at.is_none() => Waiting::Retry {
                        seq: c.seq,
                        name: c.name.clone(),
                        due_at: c.wake_at,
                        attempt: c.attempts + 1,
                    },
                    CheckpointKind::Child => Waiting::Child {
                        seq: c.seq,
                        workflow: c.name.clone(),
                        run_id: RunId::parse(&format!("{}.child.{}", self.run.id, c.seq)).ok(),
                    },
                    _ => Waiting::Step {
                        seq: c.seq,
                        name: c.name.clone(),
                        group: c.worker_group.clone(),
                        since: c.enqueued_at,
                        attempt: c.attempts.max(1),
                    },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{Checkpoint, Run};

    fn run(status: RunStatus) -> Run {
        serde_json::from_value(json!({
            "id": "r1", "namespace": "acme", "workflow": "wf", "workflow_version": 1,
            "status": status.as_str(), "input": {}, "output": null, "error": null, "tags": [],
            "search_attributes": {}, "parent_run_id": null, "root_run_id": "r1",
            "nesting_depth": 0, "retry_of": null, "continued_from": null, "attempt": 1,
            "wake_at": null, "locked_by": null, "locked_until": null, "created_at": 1,
            "updated_at": 1, "finished_at": null
        }))
        .expect("run")
    }

    fn pending(
        seq: u32,
        kind: CheckpointKind,
        name: &str,
        enqueued_at: Option<Millis>,
    ) -> Checkpoint {
        Checkpoint {
            run_id: RunId::parse("r1").expect("id"),
            seq,
            kind,
            name: name.into(),
            status: CheckpointStatus::Pending,
            attempts: 1,
            worker_group: Some(format!("{name}@acme")),
            input: None,
            output: None,
            error: None,
            wake_at: Some(500),
            enqueued_at,
            started_at: None,
            finished_at: None,
            retry_policy: None,
            timeout_ms: None,
            priority: None,
            slot: None,
            saga: None,
            route: None,
        }
    }

    #[test]
    fn each_pending_operation_says_what_it_waits_for() {
        let detail = RunDetail {
            run: run(RunStatus::Suspended),
            checkpoints: vec![
                pending(0, CheckpointKind::Sleep, "sleep:0", None),
                pending(1, CheckpointKind::Signal, "approve", None),
                pending(2, CheckpointKind::RemoteStep, "charge", Some(10)),
                pending(3, CheckpointKind::RemoteStep, "ship", None),
                pending(4, CheckpointKind::Child, "kid", None),
            ],
        };
        let w = detail.waiting_for();
        assert_eq!(
            w[0],
            Waiting::Timer {
                seq: 0,
                due_at: Some(500)
            }
        );
        assert!(
            matches!(&w[1], Waiting::Signal { name, timeout_at: Some(500), .. } if name == "approve")
        );
        assert!(
            matches!(&w[2], Waiting::Step { group: Some(g), since: Some(10), .. } if g == "charge@acme")
        );
        assert!(matches!(
            &w[3],
            Waiting::Retry {
                attempt: 2,
                due_at: Some(500),
                ..
            }
        ));
        assert!(
            matches!(&w[4], Waiting::Child { run_id: Some(id), .. } if id.as_str() == "r1.child.4")
        );
        let done = RunDetail {
            run: run(RunStatus::Completed),
            checkpoints: detail.checkpoints.clone(),
        };
        assert!(done.waiting_for().is_empty());
        let queued = RunDetail {
            run: run(RunStatus::Pending),
            checkpoints: Vec::new(),
        };
        assert_eq!(queued.waiting_for(), [Waiting::Queued]);
    }

    #[test]
    fn a_parked_run_says_why_and_names_the_fix_when_known() {
        let mut guarded = run(RunStatus::Blocked);
        guarded.error = Some(
            crate::model::Incompatibility::MissingCapability {
                token: "geocode@acme".into(),
                requires: vec!["geo-v2".into()],
                missing: vec!["geo-v2".into()],
                live: 1,
            }
            .to_failure(),
        );
        let detail = RunDetail {
            run: guarded,
            checkpoints: Vec::new(),
        };
        assert_eq!(
            detail.waiting_for(),
            [Waiting::Blocked {
                reason: "blocked: no compatible worker (requires geo-v2)".into(),
                fix: Some("start a worker on `geocode@acme` that advertises geo-v2".into()),
            }]
        );
        let unserved = RunDetail {
            run: run(RunStatus::Blocked),
            checkpoints: Vec::new(),
        };
        assert!(matches!(
            &unserved.waiting_for()[..],
            [Waiting::Blocked { fix: None, .. }]
        ));
    }
}
