//! Replay as a pure function: one turn over a hand-made history, no store and no transport.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{Either, join, select};
use serde_json::{Value, json};

use super::{TurnInput, run_turn};
use crate::model::{Checkpoint, CheckpointKind, CheckpointStatus, Millis, Namespace, RunId};
use crate::runtime::{
    Command, Decision, DecisionStatus, Registry, SystemClock, WorkflowContext, WorkflowError,
};

const NOW: Millis = 1_000_000;
const HOUR: Millis = 3_600_000;

/// One turn of the only workflow in `registry`, at [`NOW`], over `history`.
async fn turn(registry: &Registry, history: Vec<Checkpoint>) -> Decision {
    let workflow = registry.latest("w").unwrap();
    let input = TurnInput {
        run_id: RunId::parse("r1").unwrap(),
        namespace: Namespace::default(),
        input: Value::Null,
        history,
        signals: Vec::new(),
        now: NOW,
    };
    run_turn(workflow, input, Arc::new(SystemClock)).await
}

/// A checkpoint at `seq` of `kind` named `name`, with no outcome yet.
fn pending(seq: u32, kind: CheckpointKind, name: &str) -> Checkpoint {
    Checkpoint {
        run_id: RunId::parse("r1").unwrap(),
        seq,
        kind,
        name: name.to_owned(),
        status: CheckpointStatus::Pending,
        attempts: 1,
        worker_group: None,
        input: None,
        output: None,
        error: None,
        wake_at: None,
        enqueued_at: Some(NOW - 10),
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

/// A remote step at `seq` named `name` that returned `output`.
fn completed(seq: u32, name: &str, output: Value) -> Checkpoint {
    Checkpoint {
        status: CheckpointStatus::Completed,
        output: Some(output),
        finished_at: Some(NOW - 1),
        ..pending(seq, CheckpointKind::RemoteStep, name)
    }
}

/// An hour's timer at `seq`, set just before [`NOW`].
fn timer(seq: u32) -> Checkpoint {
    Checkpoint {
        wake_at: Some(NOW + HOUR),
        ..pending(seq, CheckpointKind::Sleep, &format!("sleep:{seq}"))
    }
}

/// The seq and name of each remote step a decision dispatches.
fn calls(decision: &Decision) -> Vec<(u32, String)> {
    decision
        .commands
        .iter()
        .filter_map(|c| match c {
            Command::Call { seq, name, .. } => Some((*seq, name.clone())),
            _ => None,
        })
        .collect()
}

/// `ship` raced against an hour, the step written (and polled) first, then `after`.
fn step_first_race() -> Registry {
    let mut r = Registry::new();
    r.workflow("w", 1, |ctx: WorkflowContext, _: Value| async move {
        let ship = ctx.step::<_, i64>("ship", &1);
        let hour = ctx.sleep(Duration::from_secs(3600));
        let shipped = match select(ship, hour).await {
            Either::Left((out, _)) => out?,
            Either::Right(_) => -1,
        };
        let after: i64 = ctx.step("after", &shipped).await?;
        Ok::<_, WorkflowError>(after)
    });
    r
}

#[tokio::test]
async fn a_race_issues_both_operations_in_the_order_they_were_written() {
    let decision = turn(&step_first_race(), Vec::new()).await;
    assert_eq!(decision.status, DecisionStatus::Continue);
    assert_eq!(
        decision.commands,
        vec![
            Command::Call {
                seq: 0,
                name: "ship".into(),
                input: json!(1),
                retry: Some(Default::default()),
                timeout_ms: None,
                flow: Default::default(),
                saga: None,
            },
            Command::Sleep {
                seq: 1,
                ms: 3_600_000
            },
        ]
    );
    assert_eq!(decision.next_wake, Some(NOW + HOUR));
}

/// Once `ship` is done, `select` never polls the timer; it still holds position 1, so `after`
/// takes position 2 and the replay matches its history.
#[tokio::test]
async fn a_race_won_by_the_step_written_first_replays_alike() {
    let history = vec![completed(0, "ship", json!(7)), timer(1)];
    let decision = turn(&step_first_race(), history).await;
    assert_eq!(decision.status, DecisionStatus::Continue, "{decision:?}");
    assert_eq!(calls(&decision), vec![(2, "after".to_owned())]);
    let after = decision.commands.iter().find_map(|c| match c {
        Command::Call { input, .. } => Some(input.clone()),
        _ => None,
    });
    assert_eq!(after, Some(json!(7)));

    let done = turn(
        &step_first_race(),
        vec![
            completed(0, "ship", json!(7)),
            timer(1),
            completed(2, "after", json!(70)),
        ],
    )
    .await;
    assert_eq!(done.status, DecisionStatus::Completed { output: json!(70) });
}

/// Operations joined in another order than they were written keep the written order.
#[tokio::test]
async fn operations_take_their_positions_when_created_not_when_polled() {
    let mut r = Registry::new();
    r.workflow("w", 1, |ctx: WorkflowContext, _: Value| async move {
        let first = ctx.step::<_, Value>("first", &1);
        let second = ctx.step::<_, Value>("second", &2);
        let (b, a) = join(second, first).await;
        Ok::<_, WorkflowError>(json!([a?, b?]))
    });
    let decision = turn(&r, Vec::new()).await;
    assert_eq!(
        calls(&decision),
        vec![(0, "first".to_owned()), (1, "second".to_owned())]
    );
    let done = turn(
        &r,
        vec![
            completed(0, "first", json!("a")),
            completed(1, "second", json!("b")),
        ],
    )
    .await;
    assert_eq!(
        done.status,
        DecisionStatus::Completed {
            output: json!(["a", "b"])
        }
    );
}

/// An operation created and never awaited still holds its position: the one after it replays
/// at the next.
#[tokio::test]
async fn an_operation_never_awaited_keeps_its_position() {
    let mut r = Registry::new();
    r.workflow("w", 1, |ctx: WorkflowContext, _: Value| async move {
        let reminder = ctx.sleep(Duration::from_secs(3600));
        drop(reminder);
        let out: Value = ctx.step("work", &1).await?;
        Ok::<_, WorkflowError>(out)
    });
    let first = turn(&r, Vec::new()).await;
    assert!(
        matches!(first.commands.first(), Some(Command::Sleep { seq: 0, .. })),
        "{first:?}"
    );
    assert_eq!(calls(&first), vec![(1, "work".to_owned())]);
    let done = turn(&r, vec![timer(0), completed(1, "work", json!("ok"))]).await;
    assert_eq!(
        done.status,
        DecisionStatus::Completed {
            output: json!("ok")
        }
    );
}
