//! Helpers the engine's integration tests share.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{Run, RunId, RunStatus, Scope};
use durable::store::Store;

/// Polls until run `id` reaches `want` (at most 10 s), and returns it.
pub async fn wait_for(store: &Arc<dyn Store>, id: &RunId, want: RunStatus) -> Run {
    for _ in 0..1000 {
        let run = store
            .get_run(&Scope::All, id)
            .await
            .expect("get")
            .expect("exists");
        if run.status == want {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = store.get_run(&Scope::All, id).await.expect("get");
    panic!("run {id} never reached {want}: {run:?}");
}
