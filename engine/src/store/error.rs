/// Why a store call failed, normalised across backends.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A row with that key already exists (e.g. a run id reused).
    #[error("{0} already exists")]
    Conflict(String),
    /// The database refused a value it cannot keep (a NUL in text, a number out of range, a
    /// value too large to index): the request is at fault, and retrying it cannot help.
    #[error("the database cannot store a value of this request: {0}")]
    Refused(String),
    /// The database could not be reached or refused the operation; retrying may help. (The
    /// driver's error is in the message, not chained: drivers repeat it in their own chain.)
    #[error("the database is unavailable: {0}")]
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
    /// Applying migrations failed.
    #[error("applying database migrations failed: {0}")]
    Migrate(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored value could not be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The database URL names a backend this build does not have.
    #[error("unsupported database URL `{0}`: use sqlite://PATH or postgres://USER@HOST/DATABASE")]
    UnsupportedUrl(String),
}

impl StoreError {
    /// Whether retrying the same call may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// The result of a store call.
pub type StoreResult<T, E = StoreError> = Result<T, E>;
