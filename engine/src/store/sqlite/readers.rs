//! Reads: a few threads, each owning a read-only connection, take queries from one queue. WAL
//! mode lets them read while the writer commits; each read sees one committed snapshot.

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::store::{StoreError, StoreResult};

type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// The sending side of the reader threads; they end when every clone is dropped.
#[derive(Clone)]
pub(super) struct Readers {
    jobs: flume::Sender<ReadJob>,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("queued", &self.jobs.len())
            .finish()
    }
}

impl Readers {
    /// Starts one thread per connection.
    pub(super) fn start(conns: Vec<Connection>) -> StoreResult<Self> {
        let (jobs, rx) = flume::unbounded::<ReadJob>();
        for (i, conn) in conns.into_iter().enumerate() {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("durable-sqlite-reader-{i}"))
                .spawn(move || {
                    while let Some(job) = next_job(&rx) {
                        job(&conn);
                    }
                })
                .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        }
        Ok(Readers { jobs })
    }

    /// Runs `body` on a free reader.
    pub(super) async fn read<T, F>(&self, body: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Box::new(move |conn: &Connection| {
                let _ = reply.send(body(conn));
            }))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// How long a store thread keeps looking for the next job before it sleeps. Waking a sleeping
/// thread costs far more than a short spin (tens of microseconds on a virtual machine), and
/// work comes in bursts: a turn's write is followed by its result's write moments later.
const SPIN: std::time::Duration = std::time::Duration::from_micros(100);

/// The next job, spinning briefly before blocking; `None` once every sender is gone.
pub(super) fn next_job<J>(rx: &flume::Receiver<J>) -> Option<J> {
    let start = std::time::Instant::now();
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(flume::TryRecvError::Disconnected) => return None,
            Err(flume::TryRecvError::Empty) if start.elapsed() < SPIN => std::thread::yield_now(),
            Err(flume::TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the store's readers have stopped (the store was shut down)".into())
}
