//! Malformed messages and announcements from workers are dropped and change nothing.

use std::sync::Arc;
use std::time::Duration;

use durable::model::{RunId, Scope};
use durable::prelude::*;
use durable::store::NewRun;
use durable::transport::redis_testing::{add_raw_job, fresh_transport};
use durable::transport::{WorkerRegistry, naming};
use serde_json::json;

use crate::harness::*;

/// Garbage on every channel and queue the control plane's inbox reads (decisions, relays,
/// beats, step events) is dropped without stopping the loop and changes nothing. Step events
/// that are not a completed step, or name a missing run, write nothing; the one valid event
/// after all of it is still checkpointed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_worker_messages_are_dropped_and_change_nothing() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let (_dir, store, engine) =
        control_plane_on_sqlite(&transport, Arc::new(Registry::new())).await;
    let id = RunId::parse("run-garbage").expect("id");
    store
        .create_run(
            NewRun::top_level(id.clone(), ns("acme"), "py.flow", 1, json!(null)),
            1,
            None,
        )
        .await
        .expect("a run");
    let p = transport.prefix().to_owned();
    let mut redis = raw_redis().await;
    for channel in [
        naming::heartbeat_channel(&p),
        naming::decision_relay_channel(&p),
    ] {
        for payload in ["{not json", r#"{"runId":"no spaces allowed"}"#, "[]"] {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(&channel)
                .arg(payload)
                .query_async(&mut redis)
                .await
                .expect("PUBLISH");
        }
    }
    let decisions = naming::decisions_queue(&p);
    for data in [
        "{not json",
        r#"{"status":"completed"}"#,
        r#"{"taskId":"run-garbage:wf:nobody"}"#,
    ] {
        add_raw_job(&transport, &decisions, "decision", data)
            .await
            .expect("add");
    }
    let events = naming::step_events_queue(&p);
    let completed = |run: &str, seq: u32| {
        json!({ "runId": run, "seq": seq, "name": "reserve", "phase": "completed",
                "startedAt": 5, "finishedAt": 6, "output": { "ok": seq } })
        .to_string()
    };
    let running = json!({ "runId": "run-garbage", "seq": 1, "name": "reserve", "phase": "running", "startedAt": 5 });
    for data in [
        "{not json".to_owned(),
        r#"{"runId":"run-garbage"}"#.to_owned(),
        running.to_string(),
        completed("run-missing", 0),
        completed("run-garbage", 2),
    ] {
        add_raw_job(&transport, &events, "stepEvent", &data)
            .await
            .expect("add");
    }
    let acme = Scope::Only(ns("acme"));
    let mut checkpoints = Vec::new();
    for _ in 0..500 {
        checkpoints = store.checkpoints(&acme, &id).await.expect("read");
        if !checkpoints.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        checkpoints.len(),
        1,
        "only the valid step event wrote: {checkpoints:?}"
    );
    assert_eq!(checkpoints[0].seq, 2);
    assert_eq!(checkpoints[0].output, Some(json!({ "ok": 2 })));
    let missing = RunId::parse("run-missing").expect("id");
    assert!(
        store
            .get_run(&Scope::All, &missing)
            .await
            .expect("read")
            .is_none()
    );
    let mut left = -1;
    for _ in 0..500 {
        left = redis::cmd("LLEN")
            .arg(format!("bull:{decisions}:wait"))
            .query_async(&mut redis)
            .await
            .expect("LLEN");
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        left, 0,
        "malformed decisions are taken off the queue, not left to block it"
    );
    engine.shutdown().await;
}

/// What a foreign worker announces cannot break the dispatch guard: a descriptor that does not
/// parse, or a liveness key with no descriptor (a worker older than the handshake), is left out,
/// and the well-formed announcement beside them is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_worker_announcements_are_skipped() {
    let Some(transport) = fresh_transport().await else {
        return;
    };
    let p = transport.prefix().to_owned();
    let mut redis = raw_redis().await;
    let token = "ship@acme";
    let beat = r#"{"ts": 1795939520882, "status": {}, "descriptorHash": "0000000000000000"}"#;
    let good = json!({
        "instanceId": "py-good", "runtime": "python",
        "capabilities": ["saga", "geo-v2"], "steps": ["ship"], "partition": "acme"
    })
    .to_string();
    for (instance, descriptor) in [
        ("py-good", Some(good.as_str())),
        ("py-garbage", Some("{not json")),
        ("py-wrong-shape", Some(r#"{"instanceId": 7}"#)),
        ("py-legacy", None),
    ] {
        let mut pipe = redis::pipe();
        // Announcements expire as real ones do.
        pipe.set_ex(naming::worker_heartbeat_key(&p, token, instance), beat, 60);
        if let Some(descriptor) = descriptor {
            pipe.set_ex(
                naming::worker_descriptor_key(&p, token, instance),
                descriptor,
                60,
            );
        }
        let _: () = pipe.query_async(&mut redis).await.expect("announce");
    }
    let live = transport
        .worker_descriptors(token)
        .await
        .expect("descriptors");
    assert_eq!(
        live.iter()
            .map(|d| d.instance_id.as_str())
            .collect::<Vec<_>>(),
        ["py-good"],
        "only the well-formed announcement is read"
    );
    assert_eq!(live[0].capabilities, ["saga", "geo-v2"]);
}
