//! Delivering a published event: the statements of `rules::events`, in one write of the writer
//! thread (whose single writer makes a repeat under the same id find the first kept).

use async_trait::async_trait;
use rusqlite::{Connection, params};
use serde_json::Value;

use super::SqliteStore;
use super::rows::{col, from_json, run_id};
use super::sql::{Sql, db};
use super::writer::{Wrote, at_once};
use crate::model::{EventId, Millis, Namespace, PublishedEvent, RunId, Scope};
use crate::store::rules::events::{self, EventStatements};
use crate::store::{EventDelivered, Events, StoreResult};

#[async_trait]
impl Events for SqliteStore {
    async fn deliver_event(
        &self,
        tenant: &Namespace,
        event: &PublishedEvent,
        now: Millis,
    ) -> StoreResult<EventDelivered> {
        let (tenant, event) = (tenant.clone(), event.clone());
        self.writer
            .write(move |conn| {
                let delivered = at_once(events::deliver_event(conn, &tenant, &event, now))?;
                Ok(match delivered {
                    EventDelivered::Repeated(_) => Wrote::Discard(delivered),
                    EventDelivered::Delivered(_) => Wrote::Keep(delivered),
                })
            })
            .await
    }
}

impl EventStatements for Connection {
    async fn delivered_before(
        &mut self,
        tenant: &Namespace,
        id: &EventId,
    ) -> StoreResult<Option<u32>> {
        let mut sql = Sql::new("SELECT delivered FROM events WHERE namespace = ");
        sql.bind(tenant.as_str().to_owned())
            .push(" AND id = ")
            .bind(id.as_str().to_owned());
        sql.one(self, |row| {
            let n: i64 = col(row, "delivered")?;
            Ok(u32::try_from(n).unwrap_or(0))
        })
    }

    async fn waits_for(
        &mut self,
        tenant: &Namespace,
        signal: &str,
    ) -> StoreResult<Vec<(RunId, u32, Option<Value>)>> {
        let mut sql = Sql::new(
            "SELECT c.run_id, c.seq, c.input FROM checkpoints c JOIN runs r ON r.id = c.run_id \
             WHERE c.kind = 'signal' AND c.status = 'pending' AND c.name = ",
        );
        sql.bind(signal.to_owned())
            .push(" AND r.status IN ('pending', 'running', 'suspended', 'blocked')")
            .scope("r.namespace", &Scope::Only(tenant.clone()))
            .push(" ORDER BY c.run_id, c.seq");
        sql.all(self, |row| {
            let input: Option<String> = col(row, "input")?;
            let seq: i64 = col(row, "seq")?;
            Ok((
                run_id(col(row, "run_id")?)?,
                u32::try_from(seq).unwrap_or_default(),
                input
                    .map(|raw| from_json(&raw, "a wait's filter"))
                    .transpose()?,
            ))
        })
    }

    async fn keep_event(
        &mut self,
        tenant: &Namespace,
        id: &EventId,
        name: &str,
        delivered: u32,
        now: Millis,
    ) -> StoreResult<()> {
        self.prepare_cached(
            "INSERT INTO events (namespace, id, name, delivered, created_at) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .map_err(db)?
        .execute(params![tenant.as_str(), id.as_str(), name, delivered, now])
        .map_err(db)?;
        Ok(())
    }
}
