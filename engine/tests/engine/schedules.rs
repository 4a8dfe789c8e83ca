//! Schedules: one run per tick across control planes and restarts, each overlap policy, the
//! catch-up window, and a tenant's schedules out of another's reach.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{
    AttributeFilter, Cadence, Interval, Millis, Namespace, Overlap, Run, RunQuery, RunStatus,
    ScheduleId, SchedulePatch, ScheduleSpec, Scope, TickOutcome,
};
use durable::prelude::*;
use durable::runtime::Clock;
use durable::store::Store;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::common::wait_for;

engine_cases! {
    [multi_thread] a_schedule_fires_once_per_tick_with_three_control_planes,
    [multi_thread] ticks_missed_while_no_control_plane_ran_fire_once_each_on_restart,
    each_overlap_policy_does_what_it_says_while_the_previous_run_is_going,
    ticks_older_than_the_catch_up_window_are_counted_missed_not_fired,
    a_tenants_schedules_are_out_of_another_tenants_reach,
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.workflow(
        "tick",
        1,
        |_ctx: WorkflowContext, input: Value| async move { Ok::<_, WorkflowError>(input) },
    );
    r.workflow("waiter", 1, |ctx: WorkflowContext, _: Value| async move {
        let got: Option<Value> = ctx.wait_signal("go", None).await?;
        Ok::<_, WorkflowError>(got.unwrap_or(Value::Null))
    });
    r
}

fn acme() -> Namespace {
    Namespace::tenant("acme").unwrap()
}

fn spec(workflow: &str, cadence: Cadence) -> ScheduleSpec {
    ScheduleSpec {
        workflow: workflow.into(),
        input: json!({"from": "schedule"}),
        cadence,
        timezone: "UTC".into(),
        overlap: Overlap::Skip,
        catchup_window: ScheduleSpec::DEFAULT_CATCHUP,
        jitter: Interval::default(),
        paused: false,
    }
}

fn every(raw: &str) -> Cadence {
    Cadence::Every(raw.parse().unwrap())
}

/// A cadence that does not fire during a case: ticks come from triggers only.
fn yearly() -> Cadence {
    Cadence::Cron("0 0 1 1 *".into())
}

fn sid(raw: &str) -> ScheduleId {
    ScheduleId::parse(raw).unwrap()
}

/// The runs schedule `id` of acme started, oldest tick first.
async fn runs_of(store: &Arc<dyn Store>, id: &str) -> Vec<Run> {
    let query = RunQuery {
        attribute: Some(AttributeFilter::new("schedule", json!(id)).unwrap()),
        limit: 200,
        ..RunQuery::default()
    };
    let mut runs = store
        .list_runs(&Scope::Only(acme()), &query)
        .await
        .unwrap()
        .runs;
    runs.sort_by_key(tick_ms);
    runs
}

fn tick_of(run: &Run) -> String {
    run.search_attributes["scheduled_at"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every tick from the first run's to the last's has exactly one run: none missed, none twice.
fn one_run_per_tick(runs: &[Run], step: Millis) {
    let ticks: Vec<Millis> = runs.iter().map(tick_ms).collect();
    for pair in ticks.windows(2) {
        assert_eq!(pair[1] - pair[0], step, "ticks {ticks:?}");
    }
    assert!(runs.iter().all(|r| r.namespace == acme()));
}

/// A tick's time, from the RFC 3339 `scheduled_at` its run carries.
fn tick_ms(run: &Run) -> Millis {
    chrono::DateTime::parse_from_rfc3339(&tick_of(run))
        .unwrap()
        .timestamp_millis()
}

/// Three control planes on one store: every tick of a one-second schedule starts one run,
/// none is skipped, and no tick starts two.
async fn a_schedule_fires_once_per_tick_with_three_control_planes(backend: Backend) {
    let a = backend.start(registry()).await;
    let b = backend.start(registry()).await;
    let c = backend.start(registry()).await;
    a.engine
        .create_schedule(&acme(), sid("pulse"), spec("tick", every("1s")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(4_600)).await;
    a.engine
        .update_schedule(
            &acme(),
            &sid("pulse"),
            &SchedulePatch {
                paused: Some(true),
                ..SchedulePatch::default()
            },
        )
        .await
        .unwrap();
    let runs = runs_of(&a.store, "pulse").await;
    assert!(runs.len() >= 3, "{} runs in 4.6 s", runs.len());
    one_run_per_tick(&runs, 1_000);
    for run in &runs {
        let done = wait_for(&a.store, &run.id, RunStatus::Completed).await;
        assert_eq!(done.output, Some(json!({"from": "schedule"})));
    }
    for h in [a, b, c] {
        h.stop().await;
    }
}

/// No control plane runs for a few ticks; the next one to start fires each of them once
/// (they are within the catch-up window), then carries on. The ticks start runs whatever the
/// previous run is doing: with `skip`, the first missed tick would be dropped whenever the run
/// the stopped plane left behind had not ended yet (that is the overlap policy's business,
/// tested on its own).
async fn ticks_missed_while_no_control_plane_ran_fire_once_each_on_restart(backend: Backend) {
    let first = backend.start(registry()).await;
    let spec = ScheduleSpec {
        overlap: Overlap::AllowAll,
        ..spec("tick", every("1s"))
    };
    first
        .engine
        .create_schedule(&acme(), sid("pulse"), spec)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    first.stop().await;
    let before = runs_of(&backend.store().await, "pulse").await.len();
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let second = backend.start(registry()).await;
    // The missed ticks and the next one, however slow the machine is right now (at most 10 s).
    let store = backend.store().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while runs_of(&store, "pulse").await.len() < before + 4 && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    second.stop().await;
    let runs = runs_of(&store, "pulse").await;
    assert!(
        runs.len() >= before + 4,
        "{before} runs before the gap, {} after",
        runs.len()
    );
    one_run_per_tick(&runs, 1_000);
}

/// Ticks while the previous run waits for a signal: `skip` drops them, `allow_all` starts
/// them, `buffer_one` keeps one and starts it when the previous run ends, `cancel_previous`
/// cancels the previous run and starts.
async fn each_overlap_policy_does_what_it_says_while_the_previous_run_is_going(backend: Backend) {
    let h = backend.start(registry()).await;
    let e = &h.engine;
    let trigger = |id: &'static str| async move {
        e.trigger_schedule(&acme(), &sid(id))
            .await
            .unwrap()
            .unwrap()
    };
    for (id, overlap) in [
        ("skip", Overlap::Skip),
        ("allow", Overlap::AllowAll),
        ("buffer", Overlap::BufferOne),
        ("cancel", Overlap::CancelPrevious),
    ] {
        let mut s = spec("waiter", yearly());
        s.overlap = overlap;
        e.create_schedule(&acme(), sid(id), s).await.unwrap();
    }

    assert_eq!(trigger("skip").await.outcome, TickOutcome::Started);
    let skipped = trigger("skip").await;
    assert_eq!(skipped.outcome, TickOutcome::Skipped);
    assert!(skipped.message.unwrap().contains("still going"));
    assert_eq!(runs_of(&h.store, "skip").await.len(), 1);

    assert_eq!(trigger("allow").await.outcome, TickOutcome::Started);
    assert_eq!(trigger("allow").await.outcome, TickOutcome::Started);
    assert_eq!(runs_of(&h.store, "allow").await.len(), 2);

    let first = trigger("buffer").await.run_id.unwrap();
    assert_eq!(trigger("buffer").await.outcome, TickOutcome::Buffered);
    assert_eq!(
        trigger("buffer").await.outcome,
        TickOutcome::Skipped,
        "one waits at most"
    );
    assert_eq!(runs_of(&h.store, "buffer").await.len(), 1);
    e.signal(&Scope::Only(acme()), &first, "go", json!(1))
        .await
        .unwrap();
    wait_for(&h.store, &first, RunStatus::Completed).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while runs_of(&h.store, "buffer").await.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the buffered tick never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let schedule = e.schedule(&acme(), &sid("buffer")).await.unwrap().unwrap();
    assert_eq!(schedule.buffered, None);

    let previous = trigger("cancel").await.run_id.unwrap();
    let replaced = trigger("cancel").await;
    assert_eq!(replaced.outcome, TickOutcome::Replaced);
    assert_ne!(replaced.run_id, Some(previous.clone()));
    wait_for(&h.store, &previous, RunStatus::Cancelled).await;
    h.stop().await;
}

/// With engine time jumped a minute past a ten-second schedule with a fifteen-second window,
/// the ticks before the window are counted missed and only those inside it fire.
async fn ticks_older_than_the_catch_up_window_are_counted_missed_not_fired(mut backend: Backend) {
    let clock = backend.test_clock();
    let h = backend.start(registry()).await;
    let mut s = spec("tick", every("10s"));
    s.catchup_window = "15s".parse().unwrap();
    let created = h
        .engine
        .create_schedule(&acme(), sid("slow"), s)
        .await
        .unwrap();
    let first = created.next_tick.unwrap();
    clock.advance(Duration::from_millis((first - clock.now()) as u64 + 60_000));
    let now = clock.now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let schedule = loop {
        let s = h
            .engine
            .schedule(&acme(), &sid("slow"))
            .await
            .unwrap()
            .unwrap();
        if s.next_tick.is_some_and(|t| t > now) {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never caught up: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let runs = runs_of(&h.store, "slow").await;
    let fired: Vec<Millis> = runs.iter().map(tick_ms).collect();
    let window: Vec<Millis> = (0..=7)
        .map(|k| first + k * 10_000)
        .filter(|t| *t >= now - 15_000 && *t <= now)
        .collect();
    assert_eq!(fired, window, "only the ticks inside the window fire");
    assert_eq!(
        schedule.missed as usize,
        7 - window.len(),
        "the rest were missed"
    );
    h.stop().await;
}

/// Another tenant does not find, change, trigger or delete acme's schedule, and may use the
/// same id for its own.
async fn a_tenants_schedules_are_out_of_another_tenants_reach(backend: Backend) {
    let h = backend.start(registry()).await;
    let e = &h.engine;
    let globex = Namespace::tenant("globex").unwrap();
    e.create_schedule(&acme(), sid("nightly"), spec("tick", yearly()))
        .await
        .unwrap();
    assert!(
        e.schedule(&globex, &sid("nightly"))
            .await
            .unwrap()
            .is_none()
    );
    let pause = SchedulePatch {
        paused: Some(true),
        ..SchedulePatch::default()
    };
    assert!(
        e.update_schedule(&globex, &sid("nightly"), &pause)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        e.trigger_schedule(&globex, &sid("nightly"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(!e.delete_schedule(&globex, &sid("nightly")).await.unwrap());
    let theirs = e
        .create_schedule(&globex, sid("nightly"), spec("tick", yearly()))
        .await
        .unwrap();
    assert_eq!(theirs.namespace, globex);
    let mine = e.schedule(&acme(), &sid("nightly")).await.unwrap().unwrap();
    assert!(!mine.spec.paused);
    assert_ne!(
        mine.key, theirs.key,
        "each schedule's runs have ids of their own"
    );
    let listed = e
        .schedules(&Scope::Only(globex.clone()), None, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].namespace, globex);
    h.stop().await;
}
