//! Two tenants' runs on one embedded engine, for the tests of other crates that try to cross
//! the tenant line from outside the engine (the dashboard's session view, the API's tenant
//! view): one place that builds the engine, starts the runs and waits on them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::model::{Namespace, Run, RunId, RunStatus, Scope};
use crate::runtime::{Registry, WorkflowContext, WorkflowError};
use crate::store::{SqliteStore, Store};
use crate::transport::MemoryTransport;
use crate::{Engine, EngineConfig, StartRun};

/// An engine on a fresh SQLite file with one suspended `approval` run (it waits for the
/// `approve` signal) in acme and one in globex.
pub struct TwoTenants {
    _dir: tempfile::TempDir,
    /// The store, as the dashboard's accounts need it too.
    pub sqlite: Arc<SqliteStore>,
    /// The same store, unscoped: what the test reads a run's true state from.
    pub store: Arc<dyn Store>,
    /// The in-process transport the engine runs on.
    pub transport: Arc<MemoryTransport>,
    /// The engine, started.
    pub engine: Engine,
    /// Acme's waiting run.
    pub acme: RunId,
    /// Globex's waiting run.
    pub globex: RunId,
}

impl TwoTenants {
    /// Starts the engine and both runs, and waits until both wait.
    pub async fn new() -> TwoTenants {
        let dir = tempfile::tempdir().expect("temporary directory");
        let sqlite = Arc::new(
            SqliteStore::connect(&format!("sqlite://{}/runs.db", dir.path().display()))
                .await
                .expect("store"),
        );
        let store: Arc<dyn Store> = sqlite.clone();
        let transport = Arc::new(MemoryTransport::new());
        let mut registry = Registry::new();
        registry.workflow("approval", 1, |ctx: WorkflowContext, _: Value| async move {
            let got: Option<Value> = ctx.wait_signal("approve", None).await?;
            Ok::<_, WorkflowError>(json!({ "approved": got }))
        });
        let engine = Engine::new(
            store.clone(),
            transport.clone(),
            Arc::new(registry),
            EngineConfig::default(),
        );
        engine.start().await.expect("engine starts");
        let mut world = TwoTenants {
            _dir: dir,
            sqlite,
            store,
            transport,
            engine,
            acme: RunId::generate(),
            globex: RunId::generate(),
        };
        world.acme = world.start_waiting("acme").await;
        world.globex = world.start_waiting("globex").await;
        world
    }

    /// Starts an `approval` run in `tenant` straight on the engine and waits until it waits.
    pub async fn start_waiting(&self, tenant: &str) -> RunId {
        let run = self
            .engine
            .start_run(StartRun {
                workflow: "approval".into(),
                input: json!({}),
                namespace: Some(Namespace::parse(tenant).expect("namespace")),
                ..StartRun::default()
            })
            .await
            .expect("start");
        self.wait_for(&run.id, RunStatus::Suspended).await;
        run.id
    }

    /// Run `id` as it is in the store, whatever its namespace.
    pub async fn run(&self, id: &RunId) -> Run {
        self.store
            .get_run(&Scope::All, id)
            .await
            .expect("read")
            .expect("the run exists")
    }

    /// Waits (up to 10 s) until run `id` is in `status`.
    pub async fn wait_for(&self, id: &RunId, status: RunStatus) {
        for _ in 0..500 {
            if self.run(id).await.status == status {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("run {id} never became {status}");
    }

    /// Stops the engine.
    pub async fn stop(self) {
        self.engine.shutdown().await;
    }
}
