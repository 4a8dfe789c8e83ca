//! The transport conformance suite on the in-process transport and on a real Redis (each test
//! on a key prefix of its own).

use std::sync::Arc;

use durable::transport::{MemoryTransport, Transport};

mod memory {
    use super::*;

    async fn fresh() -> Option<Arc<dyn Transport>> {
        Some(Arc::new(MemoryTransport::new()))
    }

    durable::transport_conformance!(fresh());
}

mod redis {
    use super::*;

    async fn fresh() -> Option<Arc<dyn Transport>> {
        durable::transport::redis_testing::fresh_transport()
            .await
            .map(|t| Arc::new(t) as Arc<dyn Transport>)
    }

    durable::transport_conformance!(fresh(), remote_turns);

    /// A control plane's own dashboard gets its events straight from it, and one on another
    /// process through Redis: each exactly once.
    #[tokio::test]
    async fn events_reach_this_process_and_the_others_once_each() {
        use std::time::Duration;

        use durable::model::{Namespace, RunId, RunStatus, Scope, TenantEvent, TenantEventKind};
        use durable::transport::{
            EventDelivery, RedisConfig, RedisTransport, Subscription, TenantEvents,
        };
        use futures::StreamExt;

        let Some(here) = durable::transport::redis_testing::fresh_transport().await else {
            return;
        };
        let config = RedisConfig {
            prefix: here.prefix().to_owned(),
            ..RedisConfig::new(durable::transport::redis_testing::test_url())
        };
        let there = RedisTransport::connect(config).await.expect("connect");
        let acme = || Scope::Only(Namespace::parse("acme").expect("ns"));
        let mut mine = here.subscribe_events(acme()).await.expect("subscribe");
        let mut theirs = there.subscribe_events(acme()).await.expect("subscribe");
        let event = |run: &str| TenantEvent {
            kind: TenantEventKind::RunCompleted,
            namespace: Namespace::parse("acme").expect("ns"),
            run_id: RunId::parse(run).expect("id"),
            workflow: "wf".into(),
            status: RunStatus::Completed,
            seq: None,
            at: 1,
        };
        here.publish_event(event("from-here"))
            .await
            .expect("publish");
        there
            .publish_event(event("from-there"))
            .await
            .expect("publish");
        async fn heard(stream: &mut Subscription<EventDelivery>) -> Vec<String> {
            let mut runs = Vec::new();
            while let Ok(Some(delivery)) =
                tokio::time::timeout(Duration::from_millis(500), stream.next()).await
            {
                match delivery {
                    EventDelivery::Event(e) => runs.push(e.run_id.to_string()),
                    other => panic!("expected events only, got {other:?}"),
                }
            }
            runs.sort();
            runs
        }
        assert_eq!(heard(&mut mine).await, ["from-here", "from-there"]);
        assert_eq!(heard(&mut theirs).await, ["from-here", "from-there"]);
    }

    mod replies {
        use std::time::Duration;

        use durable::model::{Namespace, RunId, StepOutcome, StepResult};
        use durable::transport::naming::{
            reply_owner_key, reply_owners_key, reply_queue, results_queue,
        };
        use durable::transport::redis_testing::{add_raw_job, fresh_transport, test_url};
        use durable::transport::{
            Partitions, RedisConfig, RedisTransport, StepQueues, Subscription, TaskSubscription,
        };
        use futures::StreamExt;

        /// Another process on `of`'s prefix.
        async fn peer(of: &RedisTransport) -> RedisTransport {
            let config = RedisConfig {
                prefix: of.prefix().to_owned(),
                ..RedisConfig::new(test_url())
            };
            RedisTransport::connect(config).await.expect("connect")
        }

        fn completed(run: &str) -> StepResult {
            let run_id = RunId::parse(run).expect("id");
            StepResult {
                step_id: format!("{run_id}:0"),
                run_id,
                seq: 0,
                started_at: None,
                outcome: StepOutcome::Completed {
                    output: serde_json::json!(run),
                },
                receipt: Default::default(),
            }
        }

        /// The runs of the results heard within `wait`, sorted.
        async fn heard(results: &mut Subscription<StepResult>, wait: Duration) -> Vec<String> {
            let mut runs = Vec::new();
            while let Ok(Some(r)) = tokio::time::timeout(wait, results.next()).await {
                runs.push(r.run_id.to_string());
            }
            runs.sort();
            runs
        }

        /// A try of a step sent again while its job still waits, or runs on an SDK worker (in
        /// BullMQ's active list, unfinished), stays one job: a backlog or a long step is not
        /// copied at every redispatch. Another try is a job of its own, and a try whose job
        /// finished (a failed one is kept a day) can be queued again.
        #[tokio::test]
        async fn a_try_sent_again_while_its_job_waits_or_runs_is_queued_once() {
            let Some(transport) = fresh_transport().await else {
                return;
            };
            let mut conn = redis::Client::open(test_url())
                .expect("url")
                .get_multiplexed_async_connection()
                .await
                .expect("connect");
            let acme = Namespace::tenant("acme").expect("ns");
            let queue = format!("bull:{}-tasks-charge@acme", transport.prefix());
            let task = |attempt: u32| durable::model::RemoteTask {
                run_id: RunId::parse("run_t:c1").expect("id"),
                seq: 2,
                name: "charge".into(),
                step_id: "run_t:c1:2".into(),
                group: "charge@acme".into(),
                input: Some(serde_json::json!(attempt)),
                context: None,
                traceparent: None,
                attempt,
                reply_to: None,
                priority: None,
                receipt: Default::default(),
            };
            let waiting = |conn: &mut redis::aio::MultiplexedConnection| {
                let mut conn = conn.clone();
                let key = format!("{queue}:wait");
                async move {
                    redis::cmd("LRANGE")
                        .arg(key)
                        .arg(0)
                        .arg(-1)
                        .query_async::<Vec<String>>(&mut conn)
                        .await
                        .expect("wait list")
                }
            };
            transport.dispatch(task(1)).await.expect("send");
            transport.dispatch(task(1)).await.expect("send again");
            assert_eq!(waiting(&mut conn).await, ["run_t~c1@2@1"]);
            transport.dispatch(task(2)).await.expect("second try");
            assert_eq!(waiting(&mut conn).await, ["run_t~c1@2@2", "run_t~c1@2@1"]);

            // An SDK worker takes try 1 (BullMQ moves it to its active list): sent again, it is
            // not queued beside the running one.
            let first = format!("{queue}:run_t~c1@2@1");
            let _: () = redis::pipe()
                .cmd("LREM")
                .arg(format!("{queue}:wait"))
                .arg(0)
                .arg("run_t~c1@2@1")
                .cmd("LPUSH")
                .arg(format!("{queue}:active"))
                .arg("run_t~c1@2@1")
                .query_async(&mut conn)
                .await
                .expect("activate");
            transport
                .dispatch(task(1))
                .await
                .expect("send while running");
            assert_eq!(waiting(&mut conn).await, ["run_t~c1@2@2"]);
            // It fails, and BullMQ keeps the failed job: the same try can go out again.
            let _: () = redis::pipe()
                .cmd("LREM")
                .arg(format!("{queue}:active"))
                .arg(0)
                .arg("run_t~c1@2@1")
                .cmd("HSET")
                .arg(&first)
                .arg("finishedOn")
                .arg(1)
                .arg("failedReason")
                .arg("boom")
                .cmd("ZADD")
                .arg(format!("{queue}:failed"))
                .arg(1)
                .arg("run_t~c1@2@1")
                .query_async(&mut conn)
                .await
                .expect("fail");
            transport
                .dispatch(task(1))
                .await
                .expect("send after it failed");
            assert_eq!(waiting(&mut conn).await, ["run_t~c1@2@1", "run_t~c1@2@2"]);
            let (finished, failed): (bool, Option<f64>) = redis::pipe()
                .cmd("HEXISTS")
                .arg(&first)
                .arg("finishedOn")
                .cmd("ZSCORE")
                .arg(format!("{queue}:failed"))
                .arg("run_t~c1@2@1")
                .query_async(&mut conn)
                .await
                .expect("read");
            assert_eq!(
                (finished, failed),
                (false, None),
                "a fresh job, not the failed one"
            );

            // A worker gets each queued try once.
            let mut tasks = transport
                .consume_tasks(TaskSubscription {
                    names: vec!["charge".into()],
                    partitions: Partitions::Only(vec![acme.into()]),
                    concurrency: 1,
                    workflows: Vec::new(),
                    capabilities: Vec::new(),
                })
                .await
                .expect("tasks");
            let mut tries = Vec::new();
            while let Ok(Some(t)) =
                tokio::time::timeout(Duration::from_millis(500), tasks.next()).await
            {
                tries.push(t.attempt);
                // Taken and dropped unanswered, a task would go back to the queue.
                t.receipt.done();
            }
            tries.sort_unstable();
            assert_eq!(tries, [1, 2]);
        }

        /// With two control planes on one Redis, a worker answers each task on the queue of the
        /// control plane that sent it: that one applies the result with the run's history in
        /// memory, and the other never sees it.
        #[tokio::test]
        async fn a_result_returns_to_the_control_plane_that_sent_its_step() {
            let Some(a) = fresh_transport().await else {
                return;
            };
            let (b, worker) = (peer(&a).await, peer(&a).await);
            let mut from_a = a.consume_results().await.expect("results");
            let mut from_b = b.consume_results().await.expect("results");
            let acme = Namespace::parse("acme").expect("ns");
            let mut tasks = worker
                .consume_tasks(TaskSubscription {
                    names: vec!["charge".into()],
                    partitions: Partitions::Only(vec![acme.clone().into()]),
                    concurrency: 1,
                    workflows: Vec::new(),
                    capabilities: Vec::new(),
                })
                .await
                .expect("tasks");
            let task = |run: &str| durable::model::RemoteTask {
                run_id: RunId::parse(run).expect("id"),
                seq: 0,
                name: "charge".into(),
                step_id: format!("{run}:0"),
                group: "charge@acme".into(),
                input: None,
                context: None,
                traceparent: None,
                attempt: 1,
                reply_to: None,
                priority: None,
                receipt: Default::default(),
            };
            for i in 0..6 {
                let sender = if i % 2 == 0 { &a } else { &b };
                sender
                    .dispatch(task(&format!("run-{i}")))
                    .await
                    .expect("dispatch");
            }
            for _ in 0..6 {
                let task = tokio::time::timeout(Duration::from_secs(5), tasks.next())
                    .await
                    .expect("a task in time")
                    .expect("a task");
                let reply_to = task.reply_to.clone();
                assert!(reply_to.is_some(), "a control plane's task names its queue");
                worker
                    .publish_result(completed(task.run_id.as_str()), reply_to.as_deref())
                    .await
                    .expect("publish");
            }
            let wait = Duration::from_millis(500);
            assert_eq!(heard(&mut from_a, wait).await, ["run-0", "run-2", "run-4"]);
            assert_eq!(heard(&mut from_b, wait).await, ["run-1", "run-3", "run-5"]);
        }

        /// A control plane that stopped gets no more results: they go to the shared queue,
        /// which a live one consumes. What a crashed one left in its own queue is moved to the
        /// shared queue by a live control plane, which then forgets the queue. And a task cannot
        /// send its result to a queue that is not a control plane's under the prefix, even one
        /// whose name ends like a live control plane's.
        #[tokio::test]
        async fn a_stopped_control_planes_results_reach_a_live_one() {
            let Some(live) = fresh_transport().await else {
                return;
            };
            let p = live.prefix().to_owned();
            let mut conn = redis::Client::open(test_url())
                .expect("url")
                .get_multiplexed_async_connection()
                .await
                .expect("connect");
            // One that stopped: its key is set while it consumes, withdrawn once it stops.
            let stopping = peer(&live).await;
            let stopped = reply_queue(&p, stopping.instance_id());
            let stopping_key = reply_owner_key(&p, stopping.instance_id());
            let exists = |key: String| {
                let mut conn = conn.clone();
                async move {
                    redis::cmd("EXISTS")
                        .arg(key)
                        .query_async::<bool>(&mut conn)
                        .await
                        .expect("exists")
                }
            };
            let results = stopping.consume_results().await.expect("results");
            assert!(
                exists(stopping_key.clone()).await,
                "a consuming control plane's key"
            );
            drop(results);
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(
                !exists(stopping_key).await,
                "a stopped control plane withdraws its key"
            );
            // One that crashed: listed, its key lapsed, a result left in its queue. (Set up once the
            // stopped one is gone: while it consumed, it would have moved the result and taken it.)
            let crashed = reply_queue(&p, "rs-crashed-1");
            let _: () = redis::cmd("SADD")
                .arg(reply_owners_key(&p))
                .arg("rs-crashed-1")
                .query_async(&mut conn)
                .await
                .expect("sadd");
            let left = serde_json::to_string(&completed("left")).expect("json");
            add_raw_job(&live, &crashed, "result", &left)
                .await
                .expect("add");
            // A live owner whose name a lax check would find in another prefix's queue name.
            let _: () = redis::cmd("SET")
                .arg(reply_owner_key(&p, "rs-other-1"))
                .arg("1")
                .query_async(&mut conn)
                .await
                .expect("set");

            let mut results = live.consume_results().await.expect("results");
            let worker = peer(&live).await;
            for (run, reply_to) in [
                ("late", stopped),
                ("elsewhere", format!("{p}-tasks-charge@acme")),
                (
                    "other-prefix",
                    format!("x{}", reply_queue(&p, "rs-other-1")),
                ),
            ] {
                worker
                    .publish_result(completed(run), Some(&reply_to))
                    .await
                    .expect("publish");
            }
            assert_eq!(
                heard(&mut results, Duration::from_millis(800)).await,
                ["elsewhere", "late", "left", "other-prefix"]
            );
            // Only the shared queue and the live one's hold keys: the others were emptied and
            // forgotten, and nothing was queued anywhere else.
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("bull:*{p}*"))
                .query_async(&mut conn)
                .await
                .expect("keys");
            let mut queues: Vec<&str> = keys.iter().filter_map(|k| k.split(':').nth(1)).collect();
            queues.sort();
            queues.dedup();
            let mut expected = [results_queue(&p), reply_queue(&p, live.instance_id())];
            expected.sort();
            assert!(
                queues.iter().all(|q| expected.iter().any(|e| e == q)),
                "queues under the prefix: {queues:?}"
            );
            let owners: Vec<String> = redis::cmd("SMEMBERS")
                .arg(reply_owners_key(&p))
                .query_async(&mut conn)
                .await
                .expect("owners");
            assert_eq!(
                owners,
                [live.instance_id()],
                "the queues of control planes that are gone are forgotten once emptied"
            );
        }
    }
}
