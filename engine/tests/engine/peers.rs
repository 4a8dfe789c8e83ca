//! Another control plane on the same store, played by the test or a peer engine: results that
//! beat its commits, runs it moved on, and a tenant's control plane that never turns another's.

use std::sync::Arc;
use std::time::Duration;

use durable::StartRun;
use durable::model::{CheckpointStatus, Namespace, RunStatus, Scope, TenantEventKind};
use durable::prelude::*;
use serde_json::json;

use crate::backend::Backend;
use crate::common::{elsewhere, wait_for};
use crate::events::{heard, kinds};

engine_cases! {
    [multi_thread] a_result_that_beats_another_control_planes_commit_is_applied_when_it_lands,
    [multi_thread] a_result_that_beats_the_commit_of_a_suspended_runs_turn_elsewhere_is_applied_after_it,
    [multi_thread] a_result_for_a_run_a_peer_moved_on_takes_the_sticky_path_from_the_store,
    [multi_thread] a_tenants_control_plane_never_turns_another_tenants_run_from_its_result,
}

/// A result can reach a control plane before the commit that records its step (another control
/// plane sent the step early and its commit is in flight): it is tried again until the step is
/// on record, and applied then.
async fn a_result_that_beats_another_control_planes_commit_is_applied_when_it_lands(
    backend: Backend,
) {
    let mut r = Registry::new();
    r.workflow("one", 1, |ctx: WorkflowContext, n: i64| async move {
        let a: i64 = ctx.step("remote", &n).await?;
        Ok::<_, WorkflowError>(a)
    });
    let h = backend.start(r).await;
    let id = elsewhere::creates(&h.store, "acme", "one", 4).await;
    let claim = elsewhere::claim();

    h.engine
        .transport()
        .publish_result(elsewhere::completed(&id, 0, 5), None)
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.store
        .commit_turn(
            &claim,
            &id,
            durable::store::conformance::attempt_of(&h.store, &id).await,
            elsewhere::sends_step(0, 4),
            3,
        )
        .await
        .expect("commit")
        .expect("still leased");

    let done = wait_for(&h.store, &id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(5)), "the early result was applied");
    h.stop().await;
}

/// The same with the run suspended on an earlier step: its row and history are read, the step
/// is not on record yet, and the result is tried again (nothing written meanwhile) until the
/// other control plane's commit lands; it then takes the sticky path.
async fn a_result_that_beats_the_commit_of_a_suspended_runs_turn_elsewhere_is_applied_after_it(
    backend: Backend,
) {
    let h = backend.start(elsewhere::two_steps()).await;
    let mut events = h.events(Namespace::tenant("acme").unwrap()).await;
    let id = elsewhere::creates(&h.store, "acme", "two", 1).await;
    let claim = elsewhere::claim();
    let suspended = h
        .store
        .commit_turn(
            &claim,
            &id,
            durable::store::conformance::attempt_of(&h.store, &id).await,
            elsewhere::sends_step(0, 1),
            2,
        )
        .await
        .expect("commit")
        .expect("still leased")
        .run;

    // Step 1 left before the turn that records it committed, and its result came here first.
    h.engine
        .transport()
        .publish_result(elsewhere::completed(&id, 1, 50), None)
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let step_0 = elsewhere::completed(&id, 0, 5);
    h.store
        .apply_result_and_commit(
            &step_0,
            &claim,
            suspended.attempt,
            elsewhere::sends_step(1, 5),
            3,
        )
        .await
        .expect("commit")
        .expect("the run was untouched: the early result wrote nothing");

    let done = wait_for(&h.store, &id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(50)), "the early result was applied");
    assert_eq!(
        kinds(&heard(&mut events).await),
        [
            TenantEventKind::StepCompleted,
            TenantEventKind::RunCompleted
        ],
        "applied with the last turn, in one write"
    );
    h.stop().await;
}

/// A result for a run that another control plane moved on since this one parked it is not
/// applied to the stale cached history: with a peer on the store, the run is read again, and the
/// result still takes the sticky path (recorded with the run's next turn in one write, the run
/// never `running`) rather than a write to record it and another for the turn.
async fn a_result_for_a_run_a_peer_moved_on_takes_the_sticky_path_from_the_store(backend: Backend) {
    // It serves the workflow too: on a shared results queue either may take the result, and a
    // workflow turned by a worker has its result recorded before the turn, not with it.
    let peer = backend.peer_serving(elsewhere::two_steps()).await;
    let h = backend.start(elsewhere::two_steps()).await;
    let acme = Namespace::tenant("acme").unwrap();
    let mut events = h.events(acme.clone()).await;
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "two".into(),
            input: json!(1),
            namespace: Some(acme),
            ..Default::default()
        })
        .await
        .expect("start");
    assert_eq!(run.status, RunStatus::Suspended, "parked here, on step 0");

    // Another control plane takes step 0's result and moves the run on to step 1.
    let step_0 = elsewhere::completed(&run.id, 0, 5);
    let to_step_1 = elsewhere::sends_step(1, 5);
    h.store
        .apply_result_and_commit(&step_0, &elsewhere::claim(), run.attempt, to_step_1, 2)
        .await
        .expect("commit")
        .expect("the run was as this control plane left it");

    h.engine
        .transport()
        .publish_result(elsewhere::completed(&run.id, 1, 50), None)
        .await
        .expect("publish");
    let done = wait_for(&h.store, &run.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!(50)));
    assert_eq!(
        kinds(&heard(&mut events).await),
        [
            TenantEventKind::RunStarted,
            TenantEventKind::StepCompleted,
            TenantEventKind::RunCompleted
        ],
        "step 1's result and the last turn were one write"
    );
    h.stop().await;
    peer.shutdown().await;
}

/// A control plane that drives one namespace never turns another's run, even on the sticky path
/// from the store: a `globex` result that reaches an `acme` control plane is recorded (the store
/// wakes the run for its own control plane) but its run is not read, claimed or completed here.
async fn a_tenants_control_plane_never_turns_another_tenants_run_from_its_result(backend: Backend) {
    let store = backend.store().await;
    let acme_only = Engine::new(
        store.clone(),
        backend.transport().await,
        Arc::new(elsewhere::two_steps()),
        EngineConfig {
            namespace: Some(Namespace::tenant("acme").unwrap()),
            ..EngineConfig::default()
        },
    );
    acme_only.start().await.expect("engine starts");
    let id = elsewhere::creates(&store, "globex", "two", 1).await;
    store
        .commit_turn(
            &elsewhere::claim(),
            &id,
            durable::store::conformance::attempt_of(&store, &id).await,
            elsewhere::sends_step(0, 1),
            2,
        )
        .await
        .expect("commit")
        .expect("still leased");

    acme_only
        .transport()
        .publish_result(elsewhere::completed(&id, 0, 5), None)
        .await
        .expect("publish");
    let recorded = async {
        loop {
            let cps = store.checkpoints(&Scope::All, &id).await.expect("read");
            if cps[0].status == CheckpointStatus::Completed {
                return cps;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let cps = tokio::time::timeout(Duration::from_secs(10), recorded)
        .await
        .expect("the result is recorded");
    assert_eq!(cps.len(), 1, "no turn of globex's run ran here");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let run = store
        .get_run(&Scope::All, &id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(run.status, RunStatus::Suspended, "{run:?}");
    assert_eq!(run.locked_by, None, "never claimed by acme's control plane");
    assert_eq!(
        store
            .checkpoints(&Scope::All, &id)
            .await
            .expect("read")
            .len(),
        1,
        "still no turn"
    );
    acme_only.shutdown().await;
}
