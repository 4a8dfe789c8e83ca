//! Plain serde types shared by the engine, the HTTP API and the dashboard (which compiles them to
//! wasm). No IO lives here.

mod account;
mod activity;
mod api_token;
mod checkpoint;
mod compatibility;
mod connection;
mod event;
mod flow;
mod gateway;
mod handshake;
mod health;
mod history;
mod limits;
mod namespace;
mod partition;
mod plan;
mod pool;
mod published_event;
mod query;
mod receipt;
mod retry;
mod route;
mod routing;
mod run;
mod run_id;
mod saga;
mod schedule;
mod signal;
mod update;
mod waiting;
mod wire;

pub use account::Role;
pub use activity::{
    ACTIVITY_KEPT_MINUTES, ActivityMinute, ActivityPoint, ActivityWindow, LATENCY_BUCKETS,
    LATENCY_SLOTS, StepTally, latency_slot, quantile, series,
};
pub use api_token::{ApiToken, TokenScope};
pub use checkpoint::{
    ATTRIBUTES_MARKER, Checkpoint, CheckpointKind, CheckpointStatus, PATCH_MARKER,
};
pub use compatibility::{Incompatibility, check_dispatch, parked_by_guard};
pub use connection::{
    Connection, ConnectionError, ConnectionInfo, ConnectionKind, ConnectionName, ConnectionSpec,
    MAX_BASE_URL_BYTES, MAX_CONNECTION_FIELDS, MAX_FIELD_NAME_CHARS, MAX_FIELD_VALUE_BYTES,
    SecretField, check_header,
};
pub use event::{TenantEvent, TenantEventKind};
pub use flow::{Concurrency, ConcurrencySlot, KeyPointer, MAX_FLOW_KEY_CHARS, RateLimit, StepFlow};
pub use gateway::{ReplyError, ReplyResult, RunReply};
pub use handshake::{
    ENGINE_CAPABILITIES, Protocol, Registration, Sdk, V1_CAPABILITIES, WorkerDescriptor,
    v1_capabilities,
};
pub use health::{NamespaceLoad, WorkerGroup};
pub use history::{HISTORY_FORMAT, RunHistory};
pub use limits::{InputError, InputLimits, is_attribute_key};
pub use namespace::{Namespace, NamespaceError, Scope};
pub use partition::{Partition, PartitionError, PoolName};
pub use plan::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_POOLS, DEFAULT_MAX_RULES, Limit, MAX_WEIGHT, Plan,
    PlanError, Usage,
};
pub use pool::{
    LabelError, MAX_LABEL_KEY_CHARS, MAX_LABEL_VALUE_CHARS, MAX_POOL_LABELS, Pool, PoolStatus,
    PoolWorkers, SharedPool, check_labels,
};
pub use published_event::{
    EVENT_SIGNAL_PREFIX, EventFilter, EventId, EventIdError, EventOutcome, MAX_EVENT_ID_CHARS,
    PublishedEvent, event_signal,
};
pub use query::{
    AttributeFilter, Cursor, Facets, MAX_FACET_VALUES, MAX_PAGE_SIZE, RunCount, RunPage, RunQuery,
    RunQueryError, RunTotals, StatusCount, ValueCount,
};
pub use receipt::{Receipt, Settle};
pub use retry::RetryPolicy;
pub use route::{RoutePreview, RoutedBy, StepRoute};
pub use routing::{
    DEFAULT_POOL, MAX_INPUT_CONDITIONS, MAX_POINTER_CHARS, RouteTarget, RoutingError, RoutingRules,
    Rule, RuleMatch,
};
pub use run::{Run, RunDetail, RunStatus, UnknownStatus};
pub use run_id::{RunId, RunIdError};
pub use saga::{COMPENSATE_SIGNAL, Saga};
pub use schedule::{
    Cadence, Interval, MAX_SCHEDULE_ID_CHARS, Overlap, Schedule, ScheduleError, ScheduleFields,
    ScheduleId, SchedulePatch, ScheduleSpec, TickOutcome, TickRecord,
};
pub use signal::BufferedSignal;
pub use update::{AcceptedUpdate, MAX_UPDATE_ID_CHARS, StoredUpdate, UpdateId, UpdateIdError};
pub use waiting::Waiting;
pub use wire::{
    ControlMessage, ControlNotice, Heartbeat, RemoteTask, StepFailure, StepOutcome, StepResult,
    step_id,
};

/// Milliseconds since the Unix epoch: the one time representation on the wire, in the store and
/// in the UI.
pub type Millis = i64;
