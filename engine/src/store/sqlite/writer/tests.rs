use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;

use super::{Writer, Wrote};
use crate::fair::{self, Lane, Weight};
use crate::model::Namespace;

fn lane(tenant: &str) -> Lane {
    Lane {
        tenant: Namespace::parse(tenant).expect("a tenant name"),
        key: "w".into(),
        weight: Weight::default(),
    }
}

/// A write of `tenant` that notes when it ran and when its caller heard it committed.
async fn noted(writer: Writer, tenant: &'static str, log: Arc<Mutex<Vec<String>>>, work: Duration) {
    let ran = log.clone();
    let write = writer.write(move |conn: &mut Connection| {
        std::thread::sleep(work);
        conn.execute("INSERT INTO t (tenant) VALUES (?1)", [tenant])
            .expect("insert");
        ran.lock().unwrap().push(format!("ran {tenant}"));
        Ok(Wrote::Keep(()))
    });
    fair::within(lane(tenant), write).await.expect("written");
    log.lock().unwrap().push(format!("committed {tenant}"));
}

/// A quiet tenant's write queued behind hundreds of a busy tenant's runs among the first and is
/// committed while most of the busy tenant's are still to run: first come first served, it
/// would have run last, in the last of their batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_tenants_write_passes_a_busy_tenants_queue() {
    let conn = Connection::open_in_memory().expect("sqlite");
    conn.execute_batch("CREATE TABLE t (tenant TEXT)")
        .expect("table");
    let writer = Writer::start(conn).expect("writer");
    // The writer is held on a first write until everything else is queued.
    let (hold, held) = std::sync::mpsc::channel::<()>();
    let holding = writer.clone();
    let first = tokio::spawn(fair::within(lane("acme"), async move {
        holding
            .write(move |_conn: &mut Connection| {
                let _ = held.recv();
                Ok(Wrote::Keep(()))
            })
            .await
    }));
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut writes = Vec::new();
    for _ in 0..400 {
        writes.push(tokio::spawn(noted(
            writer.clone(),
            "acme",
            log.clone(),
            Duration::from_micros(100),
        )));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    writes.push(tokio::spawn(noted(
        writer.clone(),
        "globex",
        log.clone(),
        Duration::ZERO,
    )));
    tokio::time::sleep(Duration::from_millis(50)).await;
    hold.send(()).expect("the first write waits");
    first.await.unwrap().expect("written");
    for write in writes {
        write.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let ran = log
        .iter()
        .filter(|e| e.starts_with("ran"))
        .collect::<Vec<_>>();
    let globex_ran = ran.iter().position(|e| *e == "ran globex").unwrap();
    assert!(globex_ran <= 2, "globex's write ran {globex_ran}th");
    let committed = log.iter().position(|e| e == "committed globex").unwrap();
    let acme_ran_before = log[..committed].iter().filter(|e| *e == "ran acme").count();
    assert!(
        acme_ran_before < 200,
        "globex's write waited for {acme_ran_before} of acme's 400 to run before it committed"
    );
}

/// A write made outside any lane (the engine's own) is served, in the system lane.
#[tokio::test]
async fn a_write_without_a_lane_is_the_systems() {
    assert_eq!(Lane::current().tenant, Namespace::system());
    let conn = Connection::open_in_memory().expect("sqlite");
    let writer = Writer::start(conn).expect("writer");
    let answer = writer
        .write(|_conn: &mut Connection| Ok(Wrote::Keep(7)))
        .await
        .expect("written");
    assert_eq!(answer, 7);
}
