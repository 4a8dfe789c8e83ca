//! Dead letters: a workflow a registry names for another (`Registry::dead_letter`) starts when a
//! run of that other one ends failed, dead or with a compensation failed, in the run's tenant,
//! with what happened as its input. A turn that fails a run inserts it in the same commit; the
//! sweep, which buries dead runs, inserts it right after. Its id is derived from the run's, so
//! it starts once.

use serde_json::{Map, Value, json};

use crate::model::{Run, RunId, RunStatus, StepFailure};
use crate::runtime::Registry;
use crate::store::NewRun;

/// The run to start because `run` ended `status` with `error`, if its workflow names a
/// dead-letter workflow (and is not itself one's run: a failing hook starts nothing).
pub(crate) fn dead_letter_run(
    registry: &Registry,
    run: &Run,
    status: RunStatus,
    error: &StepFailure,
) -> Option<NewRun> {
    if run.search_attributes.contains_key(DEAD_LETTER_OF) {
        return None;
    }
    let hook = registry.dead_letter_of(&run.workflow)?;
    let version = registry.latest(hook).map_or(1, |w| w.version);
    let input = json!({
        "run_id": run.id,
        "workflow": run.workflow,
        "status": status,
        "error": error,
        "input": run.input,
    });
    let mut new = NewRun::top_level(
        dead_letter_id(&run.id),
        run.namespace.clone(),
        hook.to_owned(),
        version,
        input,
    );
    let mut attributes = Map::new();
    attributes.insert(DEAD_LETTER_OF.into(), Value::String(run.id.to_string()));
    new.search_attributes = attributes;
    // In the failed run's trace.
    new.traceparent = run.traceparent.clone();
    Some(new)
}

/// The search attribute a dead-letter run names the run it is for with.
pub(crate) const DEAD_LETTER_OF: &str = "dead_letter_of";

/// `<run>.dead-letter`, or for an id too long for that, a digest of it.
fn dead_letter_id(run: &RunId) -> RunId {
    use sha2::{Digest, Sha256};

    RunId::parse(&format!("{run}.dead-letter")).unwrap_or_else(|_| {
        let digest = Sha256::digest(run.as_str().as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        RunId::parse(&format!("dlq_{hex}")).unwrap_or_else(|_| RunId::generate())
    })
}
