//! What a Redis transport sends: jobs added to queues (with the queue scripts of [`super::queue`])
//! and messages published on channels.

use super::queue::{NewJob, Retention};
use super::{RedisTransport, unavailable};
use crate::transport::TransportResult;

impl RedisTransport {
    pub(super) async fn add(
        &self,
        queue: &str,
        name: &str,
        data: String,
        retention: Retention,
    ) -> TransportResult<()> {
        self.add_unless_gone(queue, None, name, data, retention)
            .await
    }

    /// [`RedisTransport::add`] to a consumer's own queue, or to `unless_gone.1` while its
    /// liveness key `unless_gone.0` is missing.
    pub(super) async fn add_unless_gone(
        &self,
        queue: &str,
        unless_gone: Option<(&str, &str)>,
        name: &str,
        data: String,
        retention: Retention,
    ) -> TransportResult<()> {
        self.add_job(NewJob {
            queue,
            unless_gone,
            name,
            data: &data,
            retention,
            priority: None,
            job_id: None,
        })
        .await
    }

    pub(super) async fn add_job(&self, job: NewJob<'_>) -> TransportResult<()> {
        let (queue, name) = (job.queue, job.name);
        let mut conn = self.shared.conn.clone();
        self.shared
            .scripts
            .add(&mut conn, &job)
            .await
            .map(|_| ())
            .map_err(|e| unavailable(format!("adding a `{name}` job to {queue}: {e}")))
    }

    pub(super) async fn publish(&self, channel: &str, payload: String) -> TransportResult<()> {
        let mut conn = self.shared.conn.clone();
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload)
            .query_async::<i64>(&mut conn)
            .await
            .map(|_| ())
            .map_err(|e| unavailable(format!("publishing on {channel}: {e}")))
    }
}
