//! Starting a run through a [`SessionView`]: the namespace is the session user's tenant,
//! whatever the request says.

use durable::StartRun;
use durable::model::Run;

use super::SessionView;
use crate::AppError;
use crate::ssr::engine_error;

impl SessionView {
    /// Starts `req` in the session user's tenant; any namespace `req` names is replaced. An
    /// operator bound to no tenant starts in the engine's own namespace (`default` on an
    /// operator engine), whatever its `?ns=` filter narrows reads to.
    pub async fn start_run(&self, req: StartRun) -> Result<Run, AppError> {
        let req = StartRun {
            namespace: self.user.tenant.clone(),
            ..req
        };
        self.engine.start_run(req).await.map_err(engine_error)
    }
}
