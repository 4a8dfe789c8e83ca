//! The store-backed [`RunGateway`]: a tenant's view of runs read and changed through the
//! engine and its store, confined to that tenant. It is what the control plane's responder
//! answers pods with, and what a process that owns the store uses directly.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::RunGateway;
use crate::model::{MAX_PAGE_SIZE, Namespace, ReplyError, Run, RunId, RunQuery, RunStatus, Scope};
use crate::store::{ScopedStore, SignalSent, StoreError};
use crate::{Control, Engine, EngineError, StartRun};

/// Why a verb could not be carried out; becomes the reply's error.
struct Refusal {
    message: String,
    code: Option<&'static str>,
}

impl Refusal {
    fn bad(message: impl Into<String>) -> Self {
        Refusal {
            message: message.into(),
            code: Some("bad-request"),
        }
    }
}

impl From<EngineError> for Refusal {
    fn from(e: EngineError) -> Self {
        // Exhaustive, unlike `EngineError::is_callers`: a new variant must be given its code.
        let code = match e {
            EngineError::UnknownWorkflow(..)
            | EngineError::BadInput(_)
            | EngineError::Input(_)
            | EngineError::Store(StoreError::Refused(_))
            | EngineError::BadPlan(_)
            | EngineError::BadSchedule(_)
            | EngineError::BadConnection(_)
            | EngineError::Handler(_) => "bad-request",
            EngineError::NoHandler { .. } => "not-found",
            EngineError::QuotaExceeded(_) => "quota-exceeded",
            EngineError::ShuttingDown => "unavailable",
            EngineError::RunExists(_)
            | EngineError::ScheduleExists(_)
            | EngineError::UpdateIdTaken { .. }
            | EngineError::RunEnded(_)
            | EngineError::CodeElsewhere { .. }
            | EngineError::Replay(..)
            | EngineError::ConnectionEdited(_) => "conflict",
            // The pod cannot act on the database's or broker's own words, and they are not its
            // business: they stay in this control plane's log. Only a failure that may pass is
            // worth trying again.
            EngineError::Store(_)
            | EngineError::Transport(_)
            | EngineError::AlreadyStarted
            | EngineError::Secrets(_) => {
                tracing::warn!(error = %e, "a run request failed on the control plane");
                let passing = match &e {
                    EngineError::Store(s) => s.is_retryable(),
                    EngineError::Transport(t) => {
                        matches!(t, crate::transport::TransportError::Unavailable(_))
                    }
                    _ => false,
                };
                return if passing {
                    Refusal {
                        message: "the control plane could not carry this out (its database or broker is unavailable); try again shortly".into(),
                        code: Some("unavailable"),
                    }
                } else {
                    Refusal {
                        message:
                            "the control plane failed to carry this out; its log has the details"
                                .into(),
                        code: Some("internal"),
                    }
                };
            }
        };
        Refusal {
            message: e.to_string(),
            code: Some(code),
        }
    }
}

impl From<crate::store::StoreError> for Refusal {
    fn from(e: crate::store::StoreError) -> Self {
        EngineError::from(e).into()
    }
}

/// One tenant's gateway over the engine and its store.
#[derive(Clone)]
pub struct StoreGateway {
    engine: Engine,
    tenant: Namespace,
}

#[async_trait]
impl RunGateway for StoreGateway {
    async fn request(&self, body: Value) -> Result<Value, ReplyError> {
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind == super::connections::CONNECTION_VERB {
            return super::connections::answer(&self.engine, &self.tenant, &body).await;
        }
        self.verb(&self.tenant, kind, &body)
            .await
            .map_err(|r| ReplyError {
                message: r.message,
                code: r.code.map(str::to_owned),
            })
    }
}

impl StoreGateway {
    /// `tenant`'s gateway (the tenant was verified by whoever builds this).
    pub fn new(engine: Engine, tenant: Namespace) -> Self {
        StoreGateway { engine, tenant }
    }

    /// Starts the run a start-run message (wire §4.1) asks for, in this gateway's tenant.
    /// Idempotent on `runId`: a redelivered message answers with the run it started before,
    /// if that run is the tenant's and of the same workflow.
    pub async fn start_once(&self, message: &Value) -> Result<Run, ReplyError> {
        let started = async {
            let req = start_request(&self.tenant, message)?;
            // Answered from the run a first delivery started, before anything else is checked:
            // its workflow may no longer be served, and it still started.
            if let Some(run) = self.started_before(&req).await? {
                return Ok(run);
            }
            match self.engine.start_run(req.clone()).await {
                // A delivery of the same message that started it meanwhile.
                Err(EngineError::RunExists(id)) => self
                    .started_before(&req)
                    .await?
                    .ok_or_else(|| EngineError::RunExists(id).into()),
                started => Ok(started?),
            }
        };
        started.await.map_err(|r: Refusal| ReplyError {
            message: r.message,
            code: r.code.map(str::to_owned),
        })
    }

    /// The run an earlier delivery of start `req` started: the tenant's run with its `runId`
    /// and workflow.
    async fn started_before(&self, req: &StartRun) -> Result<Option<Run>, Refusal> {
        let Some(id) = &req.id else {
            return Ok(None);
        };
        let scope = Scope::Only(self.tenant.clone());
        let run = self.engine.store().get_run(&scope, id).await?;
        Ok(run.filter(|run| run.workflow == req.workflow))
    }

    /// The run a run-id verb names, if it exists and is `tenant`'s; `Ok(None)` when it does not
    /// exist; `cross-tenant` when it is another tenant's.
    async fn owned(&self, tenant: &Namespace, body: &Value) -> Result<Option<Run>, Refusal> {
        let raw = body
            .get("runId")
            .and_then(Value::as_str)
            .ok_or_else(|| Refusal::bad("this verb needs `runId`"))?;
        let id = RunId::parse(raw).map_err(|e| Refusal::bad(e.to_string()))?;
        match self.engine.store().get_run(&Scope::All, &id).await? {
            None => Ok(None),
            Some(run) if &run.namespace == tenant => Ok(Some(run)),
            Some(_) => Err(Refusal {
                message: "run belongs to another tenant".into(),
                code: Some("cross-tenant"),
            }),
        }
    }

    async fn verb(&self, tenant: &Namespace, kind: &str, body: &Value) -> Result<Value, Refusal> {
        let scope = Scope::Only(tenant.clone());
        let reads = ScopedStore::new(self.engine.store().clone(), tenant.clone());
        let engine = &self.engine;
        match kind {
            "listRuns" => {
                // The query's namespace, if any, is overwritten by the token's tenant.
                let query = list_query(body.get("query"))?;
                query
                    .check(engine.limits())
                    .map_err(|e| Refusal::bad(e.to_string()))?;
                Ok(to_json(&reads.list_runs(&query).await?.runs))
            }
            "runFacets" => Ok(to_json(&reads.facets().await?)),
            "runValueFacets" => {
                let key = body
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Refusal::bad("runValueFacets needs `key`"))?;
                crate::model::AttributeFilter::check_key(key)
                    .map_err(|e| Refusal::bad(e.to_string()))?;
                Ok(to_json(&reads.value_facets(key).await?))
            }
            "workerHealth" => {
                let groups = engine
                    .transport()
                    .worker_groups(&scope)
                    .await
                    .map_err(EngineError::from)?;
                Ok(to_json(&groups))
            }
            "waitingFor" => {
                let ids = body
                    .get("runIds")
                    .and_then(Value::as_array)
                    .ok_or_else(|| Refusal::bad("waitingFor needs `runIds`"))?;
                let mut out = Map::new();
                for id in ids
                    .iter()
                    .filter_map(Value::as_str)
                    .take(MAX_PAGE_SIZE as usize)
                {
                    let Ok(id) = RunId::parse(id) else { continue };
                    // Only the tenant's own runs are answered; others are left out silently.
                    if let Some(run) = reads.get_run(&id).await? {
                        let checkpoints = reads.checkpoints(&id).await?;
                        let detail = crate::model::RunDetail { run, checkpoints };
                        out.insert(id.to_string(), to_json(&detail.waiting_for()));
                    }
                }
                Ok(Value::Object(out))
            }
            "start" => {
                let run = engine.start_run(start_request(tenant, body)?).await?;
                Ok(started(&run))
            }
            "getRun"
            | "getRunDetail"
            | "getCheckpoints"
            | "getSearchAttributes"
            | "getRunChildren"
            | "signal"
            | "cancel"
            | "retry"
            | "continue"
            | "retryWithInput"
            | "redispatch" => {
                let Some(run) = self.owned(tenant, body).await? else {
                    return Ok(Value::Null);
                };
                self.run_verb(&scope, &reads, kind, run, body).await
            }
            other => Err(Refusal {
                message: format!("unknown run-request verb: {other}"),
                code: Some("unknown-verb"),
            }),
        }
    }

    /// A verb on `run`, already loaded and known to be the tenant's (the read verbs answer
    /// from it without reading it again).
    async fn run_verb(
        &self,
        scope: &Scope,
        reads: &ScopedStore,
        kind: &str,
        run: Run,
        body: &Value,
    ) -> Result<Value, Refusal> {
        let engine = &self.engine;
        let id = &run.id;
        let result = |control: Control| match control {
            Control::Done(run) => Ok(
                json!({ "runId": run.id, "status": run.status, "output": run.output, "error": run.error }),
            ),
            Control::NotFound => Ok(Value::Null),
            Control::WrongStatus(run) => Err(Refusal::bad(format!(
                "the run is {}; `{kind}` does not apply",
                run.status
            ))),
        };
        match kind {
            "getRun" => Ok(to_json(&run)),
            "getRunDetail" => {
                let timeline = reads.checkpoints(id).await?;
                let children = children(reads, &run).await?;
                Ok(json!({ "run": run, "timeline": timeline, "children": children }))
            }
            "getCheckpoints" => Ok(to_json(&reads.checkpoints(id).await?)),
            "getSearchAttributes" => Ok(Value::Object(run.search_attributes.clone())),
            "getRunChildren" => Ok(to_json(&children(reads, &run).await?)),
            "signal" => {
                let name = body
                    .get("signal")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Refusal::bad("signal needs `signal` (its name)"))?;
                let payload = body.get("payload").cloned().unwrap_or(Value::Null);
                match engine.signal(scope, id, name, payload).await? {
                    SignalSent::Delivered(run) => {
                        Ok(json!({ "runId": run.id, "status": run.status }))
                    }
                    SignalSent::NotFound => Ok(Value::Null),
                    SignalSent::RunFinished(run) => Err(Refusal::bad(format!(
                        "the run already ended ({}); it takes no signals",
                        run.status
                    ))),
                }
            }
            "cancel" => {
                let compensate = body
                    .pointer("/opts/compensate")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if compensate {
                    result(engine.cancel_compensating(scope, id).await?)
                } else {
                    result(engine.cancel(scope, id).await?)
                }
            }
            "retry" => result(engine.retry(scope, id).await?),
            "continue" => result(engine.continue_run(scope, id).await?),
            "retryWithInput" => {
                let input = body
                    .get("input")
                    .cloned()
                    .ok_or_else(|| Refusal::bad("retryWithInput needs `input`"))?;
                match engine.retry_with_input(scope, id, input).await? {
                    Control::Done(run) => Ok(json!({ "runId": run.id })),
                    other => result(other),
                }
            }
            "redispatch" => {
                let (control, n) = engine.redispatch(scope, id).await?;
                let mut reply = result(control)?;
                if let Some(o) = reply.as_object_mut() {
                    o.insert("redispatched".into(), json!(n));
                }
                Ok(reply)
            }
            _ => Err(Refusal::bad(format!("unknown run verb {kind}"))),
        }
    }
}

/// The ids of `run`'s direct children, newest first: its family (the runs under its root) read
/// page by page, so a wide fan-out is answered whole.
async fn children(reads: &ScopedStore, run: &crate::model::Run) -> Result<Vec<RunId>, Refusal> {
    let mut query = RunQuery {
        family: Some(run.root_run_id.clone()),
        limit: MAX_PAGE_SIZE,
        ..RunQuery::default()
    };
    let mut children = Vec::new();
    loop {
        let page = reads.list_runs(&query).await?;
        children.extend(
            page.runs
                .into_iter()
                .filter(|r| r.parent_run_id.as_ref() == Some(&run.id))
                .map(|r| r.id),
        );
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(children),
        }
    }
}

/// What the wire answers a start with: the run's id and status.
pub(super) fn started(run: &Run) -> Value {
    json!({ "runId": run.id, "status": run.status })
}

/// A start as the wire spells it (the `start` verb's body, or a start-run message): `workflow`
/// and `input` required; `runId`, `tags` (strings) and `searchAttributes` (an object) optional.
/// Any tenant or namespace in it is ignored: the run is `tenant`'s.
fn start_request(tenant: &Namespace, body: &Value) -> Result<StartRun, Refusal> {
    let workflow = body
        .get("workflow")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::bad("a start needs `workflow`, the name of a workflow"))?;
    let input = body
        .get("input")
        .cloned()
        .ok_or_else(|| Refusal::bad("a start needs `input` (`null` if the workflow takes none)"))?;
    let id = match body.get("runId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(RunId::parse(id).map_err(|e| Refusal::bad(e.to_string()))?),
        Some(_) => return Err(Refusal::bad("`runId` must be a string")),
    };
    let tags = match body.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tags)) => tags
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Refusal::bad("`tags` must be an array of strings"))?,
        Some(_) => return Err(Refusal::bad("`tags` must be an array of strings")),
    };
    let search_attributes = match body.get("searchAttributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(attributes)) => attributes.clone(),
        Some(_) => {
            return Err(Refusal::bad(
                "`searchAttributes` must be an object of strings, numbers and booleans",
            ));
        }
    };
    Ok(StartRun {
        workflow: workflow.to_owned(),
        input,
        // Always the verified tenant, whatever the body claims.
        namespace: Some(tenant.clone()),
        id,
        tags,
        search_attributes,
        timeout: None,
    })
}

/// A `listRuns` query as the wire spells it; `namespace` is deliberately not read. Its texts
/// are checked against the input limits by the caller ([`RunQuery::check`]).
fn list_query(raw: Option<&Value>) -> Result<RunQuery, Refusal> {
    let empty = Map::new();
    let q = raw.and_then(Value::as_object).unwrap_or(&empty);
    let text = |k: &str| q.get(k).and_then(Value::as_str).map(str::to_owned);
    let status = text("status")
        .map(|s| s.parse::<RunStatus>())
        .transpose()
        .map_err(|e| Refusal::bad(e.to_string()))?;
    let limit = q
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(50, |l| l.clamp(1, u64::from(MAX_PAGE_SIZE)) as u32);
    Ok(RunQuery {
        status,
        workflow: text("workflow"),
        tag: text("tag"),
        limit,
        ..RunQuery::default()
    })
}

/// JSON of a model value (they always serialize; `null` if one ever did not).
fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
