//! Demo workflows and first-start demo data, so a fresh `make run` shows a living dashboard.
//!
//! Registered here: `demo.order` (three sequential remote steps; reserve and charge are undone
//! by `order.release` and `order.refund`, and `input.fail_at` names a step that fails for good),
//! `demo.flaky` (fails unless
//! `input.ok == true`, to show retry with edited input), `demo.sleepy` (a durable timer of
//! `input.seconds`), `demo.approval` (waits for signal `approve`, or update `approve` with a
//! non-empty `by`, and completes with its payload; query `state` says where it stands),
//! `demo.parcel` (waits a day at most for event `parcel.delivered` with key `input.order`; and
//! event `order.placed` starts a `demo.order` with its payload), `demo.alert` (the dead-letter
//! workflow of `demo.flaky`: a failed `demo.flaky` starts one)
//! `demo.fanout` (gathers `input.n` child `demo.order` runs), `demo.tour` (every primitive in
//! one run: a step, a timer, optionally a signal wait, a child and another step) and
//! `demo.external` (one step, `billing.invoice`, that only an external worker serves).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use durable::model::{EventFilter, Namespace, Role, RunId};
use durable::prelude::*;
use durable::store::{Accounts, NewRun, NewUser};
use durable::{Engine, StartRun};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::secret;

/// A directory where demo steps record their side effects, when set: every execution appends
/// `<step_id>\t<started_ms>\t<pid>` to `executions.log`, and the effect itself is applied once per
/// `step_id` (the idempotency key every delivery of a step carries) as the file
/// `applied/<step_id>`. The crash test reads both.
const EFFECTS_ENV: &str = "DURABLE_DEMO_EFFECTS";

/// The most children one `demo.fanout` run gathers.
const MAX_FANOUT: u64 = 50;

/// The longest `demo.sleepy` nap: a week.
const MAX_SLEEP_SECONDS: f64 = 7.0 * 24.0 * 3600.0;

/// `demo.order` input; every field has a default so `{}` works.
#[derive(Debug, Deserialize)]
#[serde(default)]
struct OrderInput {
    item: String,
    qty: u32,
    /// How long each step pretends to work, so progress is visible.
    delay_ms: u64,
    /// A step (`reserve`, `charge` or `ship`) that fails for good, so the run compensates.
    fail_at: Option<String>,
    /// A connection of the tenant the charge pays through (it reads it; the run keeps only
    /// its name).
    connection: Option<String>,
}

impl Default for OrderInput {
    fn default() -> Self {
        OrderInput {
            item: "book".into(),
            qty: 1,
            delay_ms: 400,
            fail_at: None,
            connection: None,
        }
    }
}

/// `demo.tour` input; every field has a default so `{}` works.
#[derive(Debug, Deserialize)]
#[serde(default)]
struct TourInput {
    /// The timer between the two steps.
    sleep_ms: u64,
    /// Whether to wait for signal `approve` after the timer.
    wait_signal: bool,
    /// Whether to run a `demo.order` child.
    child: bool,
    /// How long each step pretends to work.
    delay_ms: u64,
}

impl Default for TourInput {
    fn default() -> Self {
        TourInput {
            sleep_ms: 2000,
            wait_signal: false,
            child: true,
            delay_ms: 300,
        }
    }
}

/// The demo workflows and their step handlers.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    for (step, verb) in [
        ("order.reserve", "reserved"),
        ("order.charge", "charged"),
        ("order.ship", "shipped"),
        ("order.release", "released"),
        ("order.refund", "refunded"),
    ] {
        r.step(step, move |ctx: StepContext, input: Value| async move {
            record_effect(&ctx);
            let delay = input
                .get("delay_ms")
                .and_then(Value::as_u64)
                .unwrap_or(400)
                .min(60_000);
            // Even a zero sleep waits for the timer's next millisecond tick.
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            let failing = input.get("fail_at").and_then(Value::as_str);
            if failing.is_some_and(|at| step.strip_prefix("order.") == Some(at)) {
                return Err(StepError::fatal(format!(
                    "{step} failed for good (input.fail_at is {:?}); the order's completed steps are compensated",
                    failing.unwrap_or_default()
                ))
                .with_code("demo_failure"));
            }
            // A charge given `connection` pays through it, as a real one reads its payment
            // provider's key: from the tenant's connections, never from its input.
            if step == "order.charge"
                && let Some(name) = input.get("connection").and_then(Value::as_str)
            {
                let provider = ctx.connection(name).await?;
                return Ok(json!({ verb: true, "step_id": ctx.step_id, "paid_with": provider.name }));
            }
            Ok::<_, StepError>(json!({ verb: true, "step_id": ctx.step_id }))
        });
    }
    r.workflow(
        "demo.order",
        1,
        |ctx: WorkflowContext, input: OrderInput| async move {
            let mut args = json!({
                "item": input.item, "qty": input.qty, "delay_ms": input.delay_ms,
                "fail_at": input.fail_at,
            });
            if let Some(connection) = &input.connection {
                args["connection"] = json!(connection);
            }
            // Each completed step names the step that undoes it: should a later one fail for
            // good (or the run be cancelled with compensation), they run newest first.
            let undo = json!({ "item": input.item, "qty": input.qty, "delay_ms": input.delay_ms });
            let reserve = StepOptions::compensate_with("order.release", &undo);
            let reservation: Value = ctx.step_with("order.reserve", &args, reserve).await?;
            let refund = StepOptions::compensate_with("order.refund", &undo);
            let charge: Value = ctx.step_with("order.charge", &args, refund).await?;
            let shipment: Value = ctx.step("order.ship", &args).await?;
            Ok::<_, WorkflowError>(
                json!({ "reservation": reservation, "charge": charge, "shipment": shipment }),
            )
        },
    );
    r.step("flaky.check", |ctx: StepContext, input: Value| async move {
        record_effect(&ctx);
        if input.get("ok") == Some(&Value::Bool(true)) {
            Ok(json!({ "checked": true }))
        } else {
            // Retrying the same input cannot help: it needs new input.
            Err(
                StepError::fatal("input.ok is not true; retry this run with {\"ok\": true}")
                    .with_code("flaky"),
            )
        }
    });
    r.workflow(
        "demo.sleepy",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let seconds = input.get("seconds").and_then(Value::as_f64).unwrap_or(5.0);
            if !(0.0..=MAX_SLEEP_SECONDS).contains(&seconds) {
                return Err(WorkflowError::msg(format!(
                    "input.seconds must be between 0 and {MAX_SLEEP_SECONDS}; got {seconds}"
                )));
            }
            let started = ctx.now().await;
            ctx.sleep(Duration::from_secs_f64(seconds)).await;
            let woke = ctx.now().await;
            Ok(json!({ "slept_seconds": seconds, "started_at": started, "woke_at": woke }))
        },
    );
    r.workflow(
        "demo.fanout",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let n = input.get("n").and_then(Value::as_u64).unwrap_or(3);
            if !(1..=MAX_FANOUT).contains(&n) {
                return Err(WorkflowError::msg(format!(
                    "input.n must be between 1 and {MAX_FANOUT}; got {n}"
                )));
            }
            let children = (0..n).map(|i| {
                let ctx = ctx.clone();
                let order = json!({ "item": format!("item-{i}"), "qty": 1, "delay_ms": 200 });
                async move { ctx.child::<_, Value>("demo.order", &order).await }
            });
            let results: Vec<Value> = futures::future::try_join_all(children).await?;
            Ok(json!({ "children": results.len() }))
        },
    );
    r.workflow(
        "demo.tour",
        1,
        |ctx: WorkflowContext, input: TourInput| async move {
            if input.sleep_ms as f64 > MAX_SLEEP_SECONDS * 1000.0 {
                return Err(WorkflowError::msg(format!(
                    "input.sleep_ms must be at most {}; got {}",
                    MAX_SLEEP_SECONDS * 1000.0,
                    input.sleep_ms
                )));
            }
            let args = json!({ "item": "tour", "qty": 1, "delay_ms": input.delay_ms });
            let reserved: Value = ctx.step("order.reserve", &args).await?;
            ctx.sleep(Duration::from_millis(input.sleep_ms)).await;
            let approval: Option<Value> = if input.wait_signal {
                ctx.wait_signal("approve", None).await?
            } else {
                None
            };
            let child: Option<Value> = if input.child {
                Some(ctx.child("demo.order", &args).await?)
            } else {
                None
            };
            let charged: Value = ctx.step("order.charge", &args).await?;
            Ok::<_, WorkflowError>(json!({
                "reserved": reserved, "approval": approval, "child": child, "charged": charged
            }))
        },
    );
    r.workflow(
        "demo.approval",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let state = Arc::new(Mutex::new(json!({
                "status": "waiting", "request": input.get("request"),
            })));
            let shown = state.clone();
            ctx.on_query("state", move |_: Value| locked(&shown).clone());
            ctx.on_update("approve", |approval: Approval| {
                let by = approval.by.trim();
                if by.is_empty() {
                    Err("`by` must name who approves, for example {\"by\": \"ann\"}")
                } else {
                    Ok(json!({ "approved": true, "by": by }))
                }
            });
            let approval: Option<Value> = ctx.wait_signal("approve", None).await?;
            *locked(&state) = json!({ "status": "approved", "approval": approval });
            Ok::<_, WorkflowError>(json!({ "approved": approval }))
        },
    );
    r.workflow(
        "demo.parcel",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let order = input["order"].as_str().unwrap_or("o-1").to_owned();
            let about = EventFilter::key(order.clone());
            let day = Some(Duration::from_secs(24 * 3600));
            let delivered: Option<Value> = ctx.wait_event("parcel.delivered", about, day).await?;
            Ok::<_, WorkflowError>(json!({ "order": order, "delivered": delivered }))
        },
    );
    r.trigger("order.placed", "demo.order");
    r.workflow(
        "demo.alert",
        1,
        |_ctx: WorkflowContext, dead: Value| async move {
            // A stand-in for paging someone: what died, kept as the output.
            Ok::<_, WorkflowError>(
                json!({ "alerted_about": dead["run_id"], "error": dead["error"] }),
            )
        },
    );
    r.dead_letter("demo.flaky", "demo.alert");
    r.workflow(
        "demo.flaky",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            let checked: Value = ctx.step("flaky.check", &input).await?;
            Ok::<_, WorkflowError>(checked)
        },
    );
    r.workflow(
        "demo.http",
        1,
        |ctx: WorkflowContext, call: Value| async move {
            // The engine's own step: a call through one of the tenant's connections
            // (`{"connection": "...", "method": "POST", "path": "...", "body": {...}}`), its
            // secret headers added where the step runs, never part of this run's history.
            let reply: Value = ctx.step(durable::builtin::http::HTTP_STEP, &call).await?;
            Ok::<_, WorkflowError>(reply)
        },
    );
    r.workflow(
        "demo.external",
        1,
        |ctx: WorkflowContext, input: Value| async move {
            // No handler here: a worker elsewhere (the Python `durable-worker`, say) serves it.
            let invoice: Value = ctx.step(EXTERNAL_STEP, &input).await?;
            Ok::<_, WorkflowError>(json!({ "invoice": invoice }))
        },
    );
    r
}

/// `demo.approval`'s update `approve`: who approves.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Approval {
    by: String,
}

/// A demo workflow's state, shared with its query handler (a handler that panicked while
/// holding it left it whole: it only ever replaces the value).
fn locked(state: &Mutex<Value>) -> std::sync::MutexGuard<'_, Value> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The step `demo.external` calls, which no process of this binary serves.
pub const EXTERNAL_STEP: &str = "billing.invoice";

fn record_effect(ctx: &StepContext) {
    let Ok(dir) = std::env::var(EFFECTS_ENV) else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let line = format!(
        "{}\t{}\t{}\n",
        ctx.step_id,
        secret::now_ms(),
        std::process::id()
    );
    // One short O_APPEND write per execution: lines never interleave.
    let logged = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("executions.log"))
        .and_then(|mut f| f.write_all(line.as_bytes()));
    // The effect, applied at most once per step id however often the step is delivered.
    let applied =
        std::fs::create_dir_all(dir.join("applied")).and_then(
            |()| match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(
                    dir.join("applied")
                        .join(ctx.step_id.replace(['/', '\\'], "_")),
                ) {
                Ok(mut f) => f.write_all(line.as_bytes()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(e),
            },
        );
    if let Err(e) = logged.and(applied) {
        tracing::warn!(dir = %dir.display(), error = %e, "could not record a demo step effect");
    }
}

/// On the very first start (no users yet): demo tenants `acme` and `globex`, an operator, an
/// acme admin and a globex viewer (passwords printed once; `DURABLE_DEMO_PASSWORD` fixes them
/// for automated tests), and a few runs.
pub async fn seed(engine: &Engine, accounts: &dyn Accounts) -> anyhow::Result<()> {
    if accounts.count_users().await? > 0 {
        return Ok(());
    }
    let fixed = std::env::var("DURABLE_DEMO_PASSWORD")
        .ok()
        .filter(|p| p.len() >= 8);
    let acme = Namespace::tenant("acme")?;
    let globex = Namespace::tenant("globex")?;
    let users = [
        ("operator@durable.local", None, Role::Operator),
        ("admin@acme.test", Some(acme.clone()), Role::Admin),
        ("viewer@globex.test", Some(globex.clone()), Role::Viewer),
    ];
    let mut lines = Vec::new();
    for (email, tenant, role) in users {
        let password = fixed.clone().unwrap_or_else(secret::generate_password);
        let hash = app::ssr::hash_password(&password)
            .map_err(|e| anyhow::anyhow!("hashing a demo password: {e}"))?;
        accounts
            .create_user(
                NewUser {
                    email: email.into(),
                    tenant: tenant.clone(),
                    role,
                    password_hash: hash,
                },
                secret::now_ms(),
            )
            .await
            .with_context(|| format!("creating demo user {email}"))?;
        let scope = tenant
            .map(|t| format!("{role} of {t}"))
            .unwrap_or_else(|| "operator, every namespace".into());
        lines.push(format!("  {email:<24} {password:<22} {scope}"));
    }
    println!("\nFirst start: demo users created. These passwords are shown only once:\n");
    println!("  {:<24} {:<22} role", "email", "password");
    for l in lines {
        println!("{l}");
    }
    println!();
    let runs = [
        (&acme, "demo.order", json!({ "item": "keyboard", "qty": 2 })),
        (&acme, "demo.order", json!({ "item": "monitor", "qty": 1 })),
        (&acme, "demo.flaky", json!({ "ok": false })),
        (&globex, "demo.order", json!({ "item": "laptop", "qty": 1 })),
        (&globex, "demo.flaky", json!({ "ok": true })),
        (&globex, "demo.sleepy", json!({ "seconds": 30 })),
        (&acme, "demo.approval", json!({ "request": "new laptop" })),
        (&acme, "demo.fanout", json!({ "n": 3 })),
        (&globex, "demo.tour", json!({ "wait_signal": true })),
        (
            &acme,
            "demo.external",
            json!({ "customer": "c-42", "amount": 120 }),
        ),
    ];
    for (ns, workflow, input) in runs {
        engine
            .start_run(StartRun {
                workflow: workflow.into(),
                input,
                namespace: Some(ns.clone()),
                ..StartRun::default()
            })
            .await
            .with_context(|| format!("starting a demo {workflow} run"))?;
    }
    // A run pinned to a version no process serves any more: it parks as blocked with the
    // reason, and shows what Continue does.
    let retired = NewRun::top_level(
        RunId::generate(),
        acme.clone(),
        "demo.order",
        0,
        json!({ "item": "fax machine", "qty": 1 }),
    );
    engine
        .store()
        .create_run(retired, secret::now_ms(), None)
        .await
        .context("creating the demo run of a retired version")?;
    Ok(())
}
