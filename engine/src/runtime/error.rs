use serde_json::Value;

use crate::model::{RunId, StepFailure};

/// A step's failure, as its handler reports it and as the workflow awaiting it sees it.
///
/// The handler says whether retrying makes sense: [`StepError::retryable`] (the default for
/// unexpected errors) or [`StepError::fatal`], which skips any remaining attempts.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct StepError(pub StepFailure);

impl StepError {
    /// A failure worth retrying.
    pub fn retryable(message: impl Into<String>) -> Self {
        StepError(StepFailure::new(message))
    }

    /// A failure that retrying cannot fix.
    pub fn fatal(message: impl Into<String>) -> Self {
        StepError(StepFailure::new(message).fatal())
    }

    /// Adds a stable machine code.
    pub fn with_code(self, code: impl Into<String>) -> Self {
        StepError(self.0.with_code(code))
    }

    /// The wire form.
    pub fn failure(&self) -> &StepFailure {
        &self.0
    }
}

impl From<StepFailure> for StepError {
    fn from(f: StepFailure) -> Self {
        StepError(f)
    }
}

/// Why a workflow run failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WorkflowError {
    /// A step failed and the workflow let the error through.
    #[error("step failed: {0}")]
    Step(#[from] StepError),
    /// The code no longer matches the run's history at `seq`.
    #[error(
        "non-determinism in run {run_id} at seq {seq}: history has {expected}, code reached {found}; \
         deploy the code the run started with or register the change as a new workflow version"
    )]
    NonDeterminism {
        /// The run.
        run_id: RunId,
        /// The position.
        seq: u32,
        /// What the history recorded (`kind/name`).
        expected: String,
        /// What the code asked for.
        found: String,
    },
    /// The run's input does not fit the workflow's input type.
    #[error("invalid workflow input: {0}")]
    Input(String),
    /// The workflow's own failure.
    #[error("{0}")]
    Failed(StepFailure),
    /// Not a failure: end this run as `continued` and start a successor with this input and a
    /// clean history (see [`crate::runtime::WorkflowContext::continue_as_new`]).
    #[error("continued as new")]
    ContinueAsNew(Value),
}

impl WorkflowError {
    /// A failure with a message, for workflow code.
    pub fn msg(message: impl Into<String>) -> Self {
        WorkflowError::Failed(StepFailure::new(message))
    }

    /// The stored form of this error.
    pub fn to_failure(&self) -> StepFailure {
        match self {
            WorkflowError::Step(e) => e.0.clone(),
            WorkflowError::Failed(f) => f.clone(),
            WorkflowError::NonDeterminism {
                run_id,
                seq,
                expected,
                found,
            } => {
                let mut f = StepFailure::new(self.to_string())
                    .with_code("non_determinism")
                    .fatal();
                f.details = Some(serde_json::json!({
                    "runId": run_id, "seq": seq, "expected": expected, "found": found,
                }));
                f
            }
            WorkflowError::Input(_) => StepFailure::new(self.to_string())
                .with_code("invalid_input")
                .fatal(),
            WorkflowError::ContinueAsNew(_) => {
                StepFailure::new("continued as new").with_code("continued")
            }
        }
    }
}

/// Converts an output or error value at the edges of the typed API.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    value: Value,
    what: &str,
) -> Result<T, String> {
    serde_json::from_value(value)
        .map_err(|e| format!("{what} does not match the expected type: {e}"))
}
