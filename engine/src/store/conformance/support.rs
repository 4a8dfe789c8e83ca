//! What the cases share: fixtures for runs, leases, turns and results, and [`attempt_of`],
//! which the integration tests use too.

use std::sync::Arc;

use serde_json::json;

use crate::model::{Millis, Namespace, Run, RunId, RunStatus, Scope, StepOutcome, StepResult};
use crate::store::{Claim, NewCheckpoint, NewRun, RunPatch, Store, TurnCommit, TurnOutcome};

/// The attempt `id` is at now: what a turn of the claim that holds it commits with. Shared
/// with the integration tests, which commit turns as another control plane.
pub async fn attempt_of(store: &Arc<dyn Store>, id: &RunId) -> u32 {
    store
        .get_run(&Scope::All, id)
        .await
        .expect("read")
        .expect("the run exists")
        .attempt
}

/// Moves run `id` from one of `from` to `to` at `at`, as a status change does, and expects it
/// moved.
pub(super) async fn move_run(
    store: &Arc<dyn Store>,
    id: &str,
    from: &[RunStatus],
    to: RunStatus,
    at: Millis,
) {
    let patch = RunPatch {
        status: to,
        error: None,
    };
    store
        .update_run_if(&Scope::All, &RunId::parse(id).expect("id"), from, patch, at)
        .await
        .expect("update")
        .expect("moved");
}

/// Namespace `s`, which the tests spell validly.
pub(super) fn ns(s: &str) -> Namespace {
    Namespace::parse(s).expect("test namespace")
}

/// A top-level run `id` of workflow `wf` v1 in `namespace`, with a fixed input.
pub(super) fn new_run(id: &str, namespace: &str) -> NewRun {
    NewRun::top_level(
        RunId::parse(id).expect("test id"),
        ns(namespace),
        "wf",
        1,
        json!({"n": 1}),
    )
}

/// The unscoped lease of `owner`, held until 10 000.
pub(super) fn lease(owner: &str) -> Claim {
    Claim {
        scope: Scope::All,
        owner: owner.to_owned(),
        until: 10_000,
    }
}

/// Lease `a`, scoped to `namespace`.
pub(super) fn lease_in(namespace: &str) -> Claim {
    Claim {
        scope: Scope::Only(ns(namespace)),
        ..lease("a")
    }
}

/// A turn that dispatches remote step `seq` and suspends on it.
pub(super) fn suspend_on_step(seq: u32) -> TurnCommit {
    TurnCommit {
        checkpoints: vec![pending_step(seq)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    }
}

/// Remote step `seq` of run `id` completed with `output`, as its worker reports it.
pub(super) fn completed(id: &RunId, seq: u32, output: serde_json::Value) -> StepResult {
    StepResult {
        run_id: id.clone(),
        seq,
        step_id: format!("{id}:{seq}"),
        started_at: None,
        outcome: StepOutcome::Completed { output },
        receipt: Default::default(),
    }
}

/// Run `id` of `namespace`, whose first turn (under lease `a`) dispatched remote step 0 and
/// suspended.
pub(super) async fn suspended_on_a_step(store: &Arc<dyn Store>, id: &str, namespace: &str) -> Run {
    suspended_on_a_step_sent_by(store, id, namespace, "a").await
}

/// Like [`suspended_on_a_step`], the turn under lease `owner`, which sends the step.
pub(super) async fn suspended_on_a_step_sent_by(
    store: &Arc<dyn Store>,
    id: &str,
    namespace: &str,
    owner: &str,
) -> Run {
    let run = store
        .create_run(new_run(id, namespace), 1, Some(&lease(owner)))
        .await
        .expect("create");
    let commit = TurnCommit {
        checkpoints: vec![pending_step(0)],
        ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
    };
    store
        .commit_turn(
            &lease(owner),
            &run.id,
            attempt_of(store, &run.id).await,
            commit,
            2,
        )
        .await
        .expect("commit")
        .expect("held")
        .run
}

/// Remote step `seq` (`charge` on `charge@acme`), sent at 10 and still pending.
pub(super) fn pending_step(seq: u32) -> NewCheckpoint {
    NewCheckpoint::remote_step(
        seq,
        "charge".into(),
        "charge@acme".into(),
        json!({"amount": 5}),
        10,
    )
}
