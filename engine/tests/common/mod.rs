//! Helpers the engine's integration tests share.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{Millis, Run, RunId, RunStatus, Scope};
use durable::runtime::{Clock, TestClock};
use durable::store::Store;

/// Polls until run `id` reaches `want` (at most 10 s), and returns it.
#[allow(dead_code)]
pub async fn wait_for(store: &Arc<dyn Store>, id: &RunId, want: RunStatus) -> Run {
    wait_until(store, id, Duration::from_secs(10), |run| run.status == want).await
}

/// Polls until run `id` satisfies `done` (at most `within`), and returns it.
pub async fn wait_until(
    store: &Arc<dyn Store>,
    id: &RunId,
    within: Duration,
    done: impl Fn(&Run) -> bool,
) -> Run {
    let deadline = std::time::Instant::now() + within;
    loop {
        let run = store
            .get_run(&Scope::All, id)
            .await
            .expect("get")
            .expect("exists");
        if done(&run) {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {id} never got there: {run:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Skips `clock` to run `id`'s next wake-up (a timer, a retry's backoff, a step's timeout), as
/// a time-skipping test server does: waits (at most 10 s) until the run is suspended until a
/// time still ahead of the clock, sets the clock there, and returns that time.
#[allow(dead_code)]
pub async fn skip_to_wake(clock: &TestClock, store: &Arc<dyn Store>, id: &RunId) -> Millis {
    let run = wait_until(store, id, Duration::from_secs(10), |run| {
        run.status == RunStatus::Suspended && run.wake_at.is_some_and(|at| at > clock.now())
    })
    .await;
    let at = run.wake_at.expect("a wake-up ahead");
    clock.set(at);
    at
}

/// Polls until run `id` waits for a signal (a pending signal checkpoint; 30 s at most).
#[allow(dead_code)]
pub async fn wait_for_signal_wait(store: &Arc<dyn Store>, id: &RunId) {
    use durable::model::{CheckpointKind, CheckpointStatus};

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let checkpoints = store
            .checkpoints(&Scope::All, id)
            .await
            .expect("checkpoints");
        if checkpoints
            .iter()
            .any(|c| c.kind == CheckpointKind::Signal && c.status == CheckpointStatus::Pending)
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {id} never reached its signal wait: {checkpoints:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Another control plane on the same store, played by the test: its lease, and what its turns
/// write and its workers answer, for runs of [`elsewhere::two_steps`].
#[allow(dead_code)]
pub mod elsewhere {
    use std::sync::Arc;

    use durable::model::{Namespace, RunId, Scope, StepOutcome, StepResult, step_id};
    use durable::prelude::*;
    use durable::store::{Claim, NewCheckpoint, NewRun, Store, TurnCommit, TurnOutcome};
    use serde_json::json;

    /// Its lease, held for good.
    pub fn claim() -> Claim {
        Claim {
            scope: Scope::All,
            owner: "another-control-plane".into(),
            until: i64::MAX / 2,
        }
    }

    /// A run of `workflow` on `tenant`, with `input`, created (and claimed) there.
    pub async fn creates(
        store: &Arc<dyn Store>,
        tenant: &str,
        workflow: &str,
        input: i64,
    ) -> RunId {
        let id = RunId::generate();
        let ns = Namespace::tenant(tenant).expect("a tenant name");
        let new = NewRun::top_level(id.clone(), ns, workflow, 1, json!(input));
        store
            .create_run(new, 1, Some(&claim()))
            .await
            .expect("create");
        id
    }

    /// A turn that sends remote step `seq` (`remote` on `acme`) with `input`, and suspends.
    pub fn sends_step(seq: u32, input: i64) -> TurnCommit {
        let mut commit = TurnCommit::new(TurnOutcome::Suspend { wake_at: None });
        commit.checkpoints.push(NewCheckpoint::remote_step(
            seq,
            "remote".into(),
            "remote@acme".into(),
            json!(input),
            2,
        ));
        commit
    }

    /// Step `seq` of run `id` completed with `output`.
    pub fn completed(id: &RunId, seq: u32, output: i64) -> StepResult {
        StepResult {
            run_id: id.clone(),
            seq,
            step_id: step_id(id, seq),
            started_at: None,
            outcome: StepOutcome::Completed {
                output: json!(output),
            },
            receipt: Default::default(),
        }
    }

    /// Workflow `two`: two `remote` steps, the second fed the first's output, returning the
    /// second's.
    pub fn two_steps() -> Registry {
        let mut r = Registry::new();
        r.workflow("two", 1, |ctx: WorkflowContext, n: i64| async move {
            let a: i64 = ctx.step("remote", &n).await?;
            let b: i64 = ctx.step("remote", &a).await?;
            Ok::<_, WorkflowError>(b)
        });
        r
    }
}
