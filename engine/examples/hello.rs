//! A complete embedded engine in one file: SQLite store, in-process transport, one step, one
//! workflow. Run with `cargo run -p durable --example hello`.

use std::sync::Arc;
use std::time::Duration;

use durable::StartRun;
use durable::model::{RunStatus, Scope};
use durable::prelude::*;
use durable::runtime::{SystemClock, Worker, WorkerConfig};
use durable::store::{SqliteStore, Store};
use durable::transport::{MemoryTransport, Partitions, Transport};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut registry = Registry::new();
    registry.step("greet", |ctx: StepContext, name: String| async move {
        // `ctx.step_id` is stable across redeliveries: use it to make side effects idempotent.
        println!("running {} for {name}", ctx.step_id);
        Ok::<_, StepError>(format!("hello, {name}"))
    });
    registry.workflow(
        "hello",
        1,
        |ctx: WorkflowContext, name: String| async move {
            let greeting: String = ctx.step("greet", &name).await?;
            let shout: String = ctx
                .local_step("shout", || async { Ok(greeting.to_uppercase()) })
                .await?;
            Ok::<_, WorkflowError>(shout)
        },
    );
    let registry = Arc::new(registry);

    let dir = std::env::temp_dir().join(format!("durable-hello-{}", std::process::id()));
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::connect(&format!("sqlite://{}/hello.db", dir.display())).await?);
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let engine = Engine::new(
        store.clone(),
        transport.clone(),
        registry.clone(),
        EngineConfig::default(),
    );
    engine.start().await?;
    let worker = Worker::start(
        registry,
        transport,
        Arc::new(SystemClock),
        WorkerConfig {
            partitions: Partitions::All,
            concurrency: 4,
            connections: None,
        },
    )
    .await?;

    let run = engine
        .start_run(StartRun {
            workflow: "hello".into(),
            input: "world".into(),
            ..StartRun::default()
        })
        .await?;
    loop {
        let now = store
            .get_run(&Scope::All, &run.id)
            .await?
            .ok_or("run vanished")?;
        if now.status == RunStatus::Completed {
            println!(
                "{} completed with {}",
                now.id,
                now.output.unwrap_or_default()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.shutdown().await;
    engine.shutdown().await;
    Ok(())
}
