//! Runs parked `blocked` until a process can serve them: a version nobody serves, or a step
//! no live worker can take.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use durable::StartRun;
use durable::model::{
    CheckpointKind, CheckpointStatus, Namespace, RunStatus, Scope, TenantEventKind,
};
use durable::prelude::*;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::{wait_for, wait_until};
use crate::events::{heard, kinds};

engine_cases! {
    a_step_no_live_worker_can_take_parks_the_run_until_one_can,
    runs_stay_on_their_version_and_unpark_when_a_process_serves_it,
}

async fn runs_stay_on_their_version_and_unpark_when_a_process_serves_it(mut backend: Backend) {
    let clock = backend.test_clock();
    let v1 = |r: &mut Registry| {
        r.workflow("greet", 1, |ctx: WorkflowContext, _: Value| async move {
            ctx.sleep(Duration::from_millis(200)).await;
            Ok::<_, WorkflowError>(json!("v1"))
        });
    };
    let v2 = |r: &mut Registry| {
        r.workflow("greet", 2, |_ctx: WorkflowContext, _: Value| async move {
            Ok::<_, WorkflowError>(json!("v2"))
        });
    };
    // A v1 process starts a run, which suspends on its timer; the process goes away.
    let mut old = Registry::new();
    v1(&mut old);
    let h = backend.start(old).await;
    let pinned = h.start_run("greet", json!({})).await;
    assert_eq!(pinned.workflow_version, 1);
    wait_for(&h.store, &pinned.id, RunStatus::Suspended).await;
    h.stop().await;

    // Only v2 is deployed: new runs start on v2, the v1 run parks as blocked with the reason.
    let mut new = Registry::new();
    v2(&mut new);
    let h = backend.start(new).await;
    let fresh = h.start_run("greet", json!({})).await;
    assert_eq!(fresh.workflow_version, 2);
    let fresh = wait_for(&h.store, &fresh.id, RunStatus::Completed).await;
    assert_eq!(fresh.output, Some(json!("v2")));
    // The v1 run's timer comes due, and no process here can run its turn.
    clock.advance(Duration::from_millis(200));
    let blocked = wait_for(&h.store, &pinned.id, RunStatus::Blocked).await;
    let reason = blocked.error.expect("a reason");
    assert_eq!(reason.code.as_deref(), Some("no_worker"));
    assert!(reason.message.contains("version 1"), "{}", reason.message);
    h.stop().await;

    // A process serving both versions un-parks it, and it finishes on v1.
    let mut both = Registry::new();
    v1(&mut both);
    v2(&mut both);
    let h = backend.start(both).await;
    let done = wait_for(&h.store, &pinned.id, RunStatus::Completed).await;
    assert_eq!(done.output, Some(json!("v1")));
    assert_eq!(done.workflow_version, 1);
    h.stop().await;
}

/// The dispatch guard (wire §6.4): a step requiring a capability that no live worker on its
/// token advertises is not queued; the run parks `blocked` with the wire's reason, keeping the
/// local step it already ran and sending the fan-out's other step, whose result it keeps while
/// parked. Once a worker advertising the capability is live, the recheck sends the held step and
/// the run completes, no step run twice.
async fn a_step_no_live_worker_can_take_parks_the_run_until_one_can(backend: Backend) {
    let counters = [(); 3].map(|()| Arc::new(AtomicU32::new(0)));
    let [prepared, geocoded, forecast] = counters.clone();
    let registry = |extra: Option<&str>| {
        let mut r = Registry::new();
        let geocoded = geocoded.clone();
        r.step("geocode", move |_ctx: StepContext, city: String| {
            let geocoded = geocoded.clone();
            async move {
                geocoded.fetch_add(1, Ordering::SeqCst);
                Ok::<_, StepError>(format!("{city}: 52.52N"))
            }
        });
        let forecast = forecast.clone();
        r.step("forecast", move |_ctx: StepContext, city: String| {
            let forecast = forecast.clone();
            async move {
                forecast.fetch_add(1, Ordering::SeqCst);
                Ok::<_, StepError>(format!("{city}: sunny"))
            }
        });
        let prepared = prepared.clone();
        r.workflow("locate", 1, move |ctx: WorkflowContext, city: String| {
            let prepared = prepared.clone();
            async move {
                let city: String = ctx
                    .local_step("prepare", || async move {
                        prepared.fetch_add(1, Ordering::SeqCst);
                        Ok(city.to_uppercase())
                    })
                    .await?;
                let options = StepOptions::default().requires(["geo-v2"]);
                let (at, sky): (String, String) = futures::future::try_join(
                    ctx.step_with("geocode", &city, options),
                    ctx.step("forecast", &city),
                )
                .await?;
                Ok::<_, WorkflowError>(format!("{at}; {sky}"))
            }
        });
        if let Some(capability) = extra {
            r.advertise(capability);
        }
        r
    };
    let mut h = backend.start(registry(None)).await;
    let acme = Namespace::tenant("acme").expect("tenant");
    let mut events = h.events(acme.clone()).await;
    let run = h
        .engine
        .start_run(StartRun {
            workflow: "locate".into(),
            input: json!("berlin"),
            namespace: Some(acme.clone()),
            ..Default::default()
        })
        .await
        .expect("start");
    let parked = wait_for(&h.store, &run.id, RunStatus::Blocked).await;
    let error = parked.error.expect("a parked run says why");
    assert_eq!(
        error.message,
        "blocked: no compatible worker (requires geo-v2)"
    );
    assert_eq!(error.code.as_deref(), Some("capability.unavailable"));
    let details = error.details.expect("details name the fix");
    assert_eq!(details["token"], json!("geocode@acme"));
    assert_eq!(details["missingCapabilities"], json!(["geo-v2"]));
    assert!(parked.wake_at.is_some(), "it looks again later");
    // The step that could go went, and its result is kept while the run is parked.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let cps = h
            .store
            .checkpoints(&Scope::All, &run.id)
            .await
            .expect("cps");
        let seen: Vec<_> = cps
            .iter()
            .map(|c| (c.kind, c.name.as_str(), c.status))
            .collect();
        if seen
            == [
                (
                    CheckpointKind::LocalStep,
                    "prepare",
                    CheckpointStatus::Completed,
                ),
                (
                    CheckpointKind::RemoteStep,
                    "forecast",
                    CheckpointStatus::Completed,
                ),
            ]
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the held step is never queued, the other one's result is kept: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(geocoded.load(Ordering::SeqCst), 0);

    // Rechecks that park it again for the same reason are not news on the tenant's stream.
    wait_until(&h.store, &run.id, Duration::from_secs(20), |now| {
        now.status == RunStatus::Blocked && now.updated_at > parked.updated_at
    })
    .await;
    let lifecycle: Vec<_> = kinds(&heard(&mut events).await)
        .into_iter()
        .filter(|kind| {
            matches!(
                kind,
                TenantEventKind::RunRunning | TenantEventKind::RunBlocked
            )
        })
        .collect();
    assert_eq!(
        lifecycle,
        [TenantEventKind::RunRunning, TenantEventKind::RunBlocked],
        "one turn, one parking; the recheck said nothing"
    );

    // A worker that can take it replaces the one that cannot.
    if let Some(w) = h.worker.take() {
        w.shutdown().await;
    }
    h.worker = Some(
        backend
            .worker(
                Arc::new(registry(Some("geo-v2"))),
                h.engine.transport().clone(),
            )
            .await,
    );
    let done = wait_until(&h.store, &run.id, Duration::from_secs(30), |now| {
        now.status == RunStatus::Completed
    })
    .await;
    assert_eq!(done.output, Some(json!("BERLIN: 52.52N; BERLIN: sunny")));
    assert_eq!(done.error, None);
    let ran = counters.map(|c| c.load(Ordering::SeqCst));
    assert_eq!(
        ran,
        [1, 1, 1],
        "prepare, geocode and forecast each ran once"
    );
    h.stop().await;
}
