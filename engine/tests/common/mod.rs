//! Helpers the engine's integration tests share.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{Run, RunId, RunStatus, Scope};
use durable::store::Store;

/// Polls until run `id` reaches `want` (at most 10 s), and returns it.
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
