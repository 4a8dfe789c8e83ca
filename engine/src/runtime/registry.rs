use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::decode;
use super::{StepContext, StepError, WorkflowContext, WorkflowError};
use crate::model::Concurrency;

type WorkflowFn = Arc<
    dyn Fn(WorkflowContext, Value) -> BoxFuture<'static, Result<Value, WorkflowError>>
        + Send
        + Sync,
>;
type StepFn =
    Arc<dyn Fn(StepContext, Value) -> BoxFuture<'static, Result<Value, StepError>> + Send + Sync>;

/// A workflow body registered under a name and version.
#[derive(Clone)]
pub struct RegisteredWorkflow {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: u32,
    body: WorkflowFn,
}

impl RegisteredWorkflow {
    /// Runs the body (one replay) with an untyped input.
    pub(crate) fn call(
        &self,
        ctx: WorkflowContext,
        input: Value,
    ) -> BoxFuture<'static, Result<Value, WorkflowError>> {
        (self.body)(ctx, input)
    }
}

/// The workflows and steps this process can run. Several versions of a workflow may be
/// registered side by side; new runs start on the newest, existing runs stay on theirs.
#[derive(Clone, Default)]
pub struct Registry {
    workflows: HashMap<String, BTreeMap<u32, RegisteredWorkflow>>,
    steps: HashMap<String, StepFn>,
    /// Capabilities advertised beyond the v1 baseline.
    extra_capabilities: Vec<String>,
    /// Concurrency limits by workflow name.
    limits: HashMap<String, Concurrency>,
    /// The workflows each event name starts.
    triggers: BTreeMap<String, Vec<String>>,
    /// The dead-letter workflow of each workflow that has one.
    dead_letters: HashMap<String, String>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `body` as version `version` of workflow `name`. Inputs and outputs are any
    /// serde types; a run whose input does not fit fails with [`WorkflowError::Input`].
    pub fn workflow<I, O, F, Fut>(&mut self, name: &str, version: u32, body: F) -> &mut Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(WorkflowContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
    {
        let body = Arc::new(body);
        let erased: WorkflowFn = Arc::new(move |ctx, input| {
            let body = body.clone();
            Box::pin(async move {
                let input: I = decode(input, "the run input").map_err(WorkflowError::Input)?;
                let output = body(ctx, input).await?;
                serde_json::to_value(output).map_err(|e| {
                    WorkflowError::msg(format!("the workflow output cannot be serialised: {e}"))
                })
            })
        });
        self.workflows.entry(name.to_owned()).or_default().insert(
            version,
            RegisteredWorkflow {
                name: name.to_owned(),
                version,
                body: erased,
            },
        );
        self
    }

    /// Registers a step handler under `name`, served to `name@<partition>` tasks.
    pub fn step<I, O, F, Fut>(&mut self, name: &str, handler: F) -> &mut Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(StepContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, StepError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let erased: StepFn = Arc::new(move |ctx, input| {
            let handler = handler.clone();
            Box::pin(async move {
                let input: I = decode(input, "the step input")
                    .map_err(|m| StepError::fatal(m).with_code("invalid_input"))?;
                let output = handler(ctx, input).await?;
                serde_json::to_value(output).map_err(|e| {
                    StepError::fatal(format!("the step output cannot be serialised: {e}"))
                })
            })
        });
        self.steps.insert(name.to_owned(), erased);
        self
    }

    /// Limits how many runs of workflow `name` (every version, and a workflow whose turns run
    /// on SDK workers alike) run at once in a tenant: `Concurrency::at_most(1).per("/customer")`
    /// runs one per customer at a time. A start over the limit is accepted and queued; it
    /// starts by itself, in the order it came, when a run with its key ends, and its page says
    /// what holds it. A start whose input lacks the key is refused. Top-level runs only: a
    /// child is part of the run that started it.
    pub fn limit_concurrency(&mut self, name: &str, limit: Concurrency) -> &mut Self {
        self.limits.insert(name.to_owned(), limit);
        self
    }

    /// Starts workflow `workflow` (its newest version) whenever event `event` is published to a
    /// tenant, in that tenant, with the event's payload as its input and the search attributes
    /// `event` (the name) and `event_id`. An event published with an id starts one run per
    /// workflow however often it is published.
    pub fn trigger(&mut self, event: &str, workflow: &str) -> &mut Self {
        let workflows = self.triggers.entry(event.to_owned()).or_default();
        if !workflows.iter().any(|w| w == workflow) {
            workflows.push(workflow.to_owned());
        }
        self
    }

    /// The workflows event `event` starts, in the order their triggers were declared.
    pub fn triggered_by(&self, event: &str) -> &[String] {
        self.triggers.get(event).map_or(&[], Vec::as_slice)
    }

    /// Starts workflow `hook` when a run of workflow `workflow` ends failed, dead or with a
    /// compensation failed: once per such run, in its tenant, with `{"run_id", "workflow",
    /// "status", "error", "input"}` as input and the search attribute `dead_letter_of` naming
    /// it. A failing dead-letter run starts nothing more.
    pub fn dead_letter(&mut self, workflow: &str, hook: &str) -> &mut Self {
        self.dead_letters
            .insert(workflow.to_owned(), hook.to_owned());
        self
    }

    /// The dead-letter workflow of workflow `workflow`, if it has one.
    pub fn dead_letter_of(&self, workflow: &str) -> Option<&str> {
        self.dead_letters.get(workflow).map(String::as_str)
    }

    /// The concurrency limit of workflow `name`, if it has one.
    pub fn concurrency(&self, name: &str) -> Option<&Concurrency> {
        self.limits.get(name)
    }

    /// A specific version of a workflow.
    pub fn get(&self, name: &str, version: u32) -> Option<&RegisteredWorkflow> {
        self.workflows.get(name)?.get(&version)
    }

    /// The newest version of a workflow, which new runs start on.
    pub fn latest(&self, name: &str) -> Option<&RegisteredWorkflow> {
        self.workflows.get(name)?.values().next_back()
    }

    /// Registered workflow names, sorted.
    pub fn workflow_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.workflows.keys().cloned().collect();
        names.sort();
        names
    }

    /// Every registered `(workflow, version)`, sorted.
    pub fn workflow_versions(&self) -> Vec<(String, u32)> {
        let mut all: Vec<(String, u32)> = self
            .workflows
            .iter()
            .flat_map(|(name, versions)| versions.keys().map(|v| (name.clone(), *v)))
            .collect();
        all.sort();
        all
    }

    /// Advertises `capability` (beyond what the engine implements, which every worker
    /// advertises), so a control plane dispatches steps that require it here (wire §6.4).
    pub fn advertise(&mut self, capability: &str) -> &mut Self {
        if !self.extra_capabilities.iter().any(|c| c == capability) {
            self.extra_capabilities.push(capability.to_owned());
        }
        self
    }

    /// The capabilities a worker with this registry advertises: what of the v1 baseline the
    /// engine implements ([`crate::model::ENGINE_CAPABILITIES`]) plus those given to
    /// [`Registry::advertise`], sorted.
    pub fn capabilities(&self) -> Vec<String> {
        let mut all: Vec<String> = crate::model::ENGINE_CAPABILITIES
            .iter()
            .map(|c| (*c).to_owned())
            .collect();
        all.extend(self.extra_capabilities.iter().cloned());
        all.sort();
        all.dedup();
        all
    }

    /// Registered step names, sorted.
    pub fn step_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.steps.keys().cloned().collect();
        names.sort();
        names
    }

    pub(crate) fn step_handler(&self, name: &str) -> Option<StepFn> {
        self.steps.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker claims only what the engine does: no entities or singletons, which a control
    /// plane would otherwise send it; what a registry advertises on top is added.
    #[test]
    fn workers_advertise_what_the_engine_implements_and_no_more() {
        let mut registry = Registry::new();
        let plain = registry.capabilities();
        for missing in ["entities", "singleton"] {
            assert!(!plain.iter().any(|c| c == missing), "{missing} advertised");
        }
        for implemented in ["saga", "schedules", "signals", "queries", "cancellation"] {
            assert!(
                plain.iter().any(|c| c == implemented),
                "{implemented} missing"
            );
        }
        registry.advertise("gpu");
        assert_eq!(registry.capabilities().len(), plain.len() + 1);
    }
}
