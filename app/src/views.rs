//! View types that only the dashboard needs; run data itself uses `durable::model` unchanged.

use durable::model::{
    ActivityWindow, Facets, Namespace, NamespaceLoad, Plan, Role, Run, RunDetail, RunPage, Usage,
    WorkerGroup,
};
use serde::{Deserialize, Serialize};

/// The logged-in user, as the pages show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Me {
    /// Login email.
    pub email: String,
    /// The tenant; `None` for an operator.
    pub tenant: Option<Namespace>,
    /// Role.
    pub role: Role,
}

impl Me {
    /// Whether this user sees every namespace.
    pub fn is_operator(&self) -> bool {
        self.role == Role::Operator
    }
}

/// Everything the runs list shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunsView {
    /// The page of runs.
    pub page: RunPage,
    /// Runs per status, workflow and tag in the reader's scope, for the chips.
    pub facets: Facets,
    /// Workflows that can be started.
    pub workflows: Vec<String>,
    /// What a bulk action over these filters would do, when one is being previewed.
    pub bulk: Option<BulkPreview>,
    /// The session's tenant's plan in force and usage; `None` for an operator.
    pub plan: Option<PlanRow>,
    /// The server's clock when it read the page: relative times ("3 min ago") are computed
    /// from it, so the server and the browser render the same text.
    pub now: durable::model::Millis,
}

/// How many runs a bulk action over the current filters would act on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkPreview {
    /// `cancel` or `retry`.
    pub verb: String,
    /// Matching runs the verb applies to, at most `cap`.
    pub count: usize,
    /// Whether more match than one bulk action may touch.
    pub capped: bool,
    /// The most runs one bulk action touches.
    pub cap: usize,
}

/// Everything the run detail screen shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    /// The run and its checkpoints.
    pub detail: RunDetail,
    /// Its family: the root and every run started under it (newest 200), for the child tree.
    pub family: Vec<Run>,
    /// Whether the family has more runs than `family` holds.
    pub family_truncated: bool,
    /// The live worker groups the reader may see, to tell whether a waiting step has a worker.
    pub workers: Vec<WorkerGroup>,
    /// The command that starts a worker for the run's steps (see `ssr::SessionView::worker_command`).
    pub worker_command: String,
    /// Set when the run waits queued behind its tenant's concurrency ceiling.
    pub quota: Option<QuotaHold>,
}

/// What holds a queued run back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum QuotaHold {
    /// Its tenant's `max_concurrent_runs`.
    Tenant {
        /// The ceiling.
        ceiling: u32,
        /// The tenant's runs started and not ended.
        running: u64,
        /// Its runs waiting to start.
        queued: u64,
    },
    /// Its workflow's concurrency limit, for its key.
    Key {
        /// The workflow.
        workflow: String,
        /// The key its input gave (empty: one limit for the whole workflow).
        key: String,
        /// The limit.
        limit: u32,
        /// The workflow's runs with this key started and not ended.
        running: u64,
    },
}

/// One plan on the operator screen (or a tenant's own, on its runs page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanRow {
    /// The tenant; `None` for the default plan.
    pub tenant: Option<Namespace>,
    /// The fields as set.
    pub own: Plan,
    /// The plan in force (its own over the default).
    pub effective: Plan,
    /// What the tenant uses now; `None` for the default plan.
    pub usage: Option<Usage>,
}

/// Everything the operator screen shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatorView {
    /// Per-namespace load: backlog, running, failed in the last hour.
    pub loads: Vec<NamespaceLoad>,
    /// Every live worker group.
    pub workers: Vec<WorkerGroup>,
    /// The command that starts a worker, with `NAME` for the tenant.
    pub worker_command: String,
    /// When the "last hour" window starts.
    pub failed_since: durable::model::Millis,
    /// The default plan and every tenant's, with usage.
    pub plans: Vec<PlanRow>,
    /// The loads as a bar chart per tenant: `<svg>` markup drawn on the server.
    pub backlog_chart: String,
}

/// The activity charts of a page, drawn on the server (see `ssr::charts`), with the window's
/// totals for the text beside them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivityView {
    /// The window drawn.
    pub window: ActivityWindow,
    /// Runs started, completed and failed over time: `<svg>` markup.
    pub throughput: String,
    /// Step run time percentiles over time: `<svg>` markup.
    pub latency: String,
    /// Runs started in the window.
    pub started: u64,
    /// Runs completed in the window.
    pub completed: u64,
    /// Runs failed in the window.
    pub failed: u64,
    /// Step results recorded in the window.
    pub steps: u64,
}

/// Everything the schedules page shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchedulesView {
    /// The session tenant's schedules, by id.
    pub schedules: Vec<ShownSchedule>,
    /// Workflows a schedule can start, for the form's suggestions.
    pub workflows: Vec<String>,
    /// Whether the session's user may create, change and fire schedules.
    pub can_act: bool,
}

/// A schedule with its next fire times on its own zone's wall clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShownSchedule {
    /// The schedule.
    pub schedule: durable::model::Schedule,
    /// Its next five fire times, as its zone's wall clock shows them (none while paused).
    pub next: Vec<String>,
}
