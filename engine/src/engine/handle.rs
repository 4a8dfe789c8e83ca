//! The engine's handle: what every door holds, built over a store, a transport and the
//! registered code. Its life (loops started, shutdown) is [`super::lifecycle`].

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::EngineConfig;
use crate::driver::loops::results::Requeued;
use crate::driver::state::State;
use crate::model::Namespace;
use crate::runtime::{Clock, Registry, SystemClock};
use crate::store::Store;
use crate::transport::Transport;

/// A workflow engine: owns the control loops for its namespace and starts runs.
#[derive(Clone)]
pub struct Engine {
    pub(crate) state: Arc<State>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) loops: Arc<Mutex<Option<Vec<JoinHandle<()>>>>>,
    /// The results loop's queue of held results, until [`Engine::start`] hands it over.
    pub(super) requeued: Arc<Mutex<Option<Requeued>>>,
}

impl Engine {
    /// An engine over `store` and `transport` running the code in `registry`. Nothing runs
    /// until [`Engine::start`].
    pub fn new(
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        config: EngineConfig,
    ) -> Self {
        Self::with_clock(store, transport, registry, config, Arc::new(SystemClock))
    }

    /// Like [`Engine::new`] with an explicit clock.
    pub fn with_clock(
        store: Arc<dyn Store>,
        transport: Arc<dyn Transport>,
        registry: Arc<Registry>,
        config: EngineConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let (stop, _) = watch::channel(false);
        let (requeue, requeued) = mpsc::unbounded_channel();
        let state = State::new(store, transport, registry, clock, config, requeue);
        Engine {
            state: Arc::new(state),
            stop,
            loops: Arc::new(Mutex::new(None)),
            requeued: Arc::new(Mutex::new(Some(requeued))),
        }
    }

    /// The namespace this engine polls, `None` for an operator (every namespace).
    pub fn namespace(&self) -> Option<&Namespace> {
        self.state.config.namespace.as_ref()
    }

    /// The namespace a start that names none is stamped with.
    pub fn stamp_namespace(&self) -> Namespace {
        self.state.config.namespace.clone().unwrap_or_default()
    }

    /// The code this engine runs.
    pub fn registry(&self) -> &Registry {
        &self.state.registry
    }

    /// What one request may carry: the edges check list filters against it too.
    pub fn limits(&self) -> &crate::model::InputLimits {
        &self.state.config.limits
    }

    /// The store this engine drives.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.state.store
    }

    /// The transport this engine uses.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.state.transport
    }
}
