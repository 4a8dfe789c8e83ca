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

    durable::transport_conformance!(fresh());

    /// A control plane's own dashboard gets its events straight from it, and one on another
    /// process through Redis: each exactly once.
    #[tokio::test]
    async fn events_reach_this_process_and_the_others_once_each() {
        use std::time::Duration;

        use durable::model::{Namespace, RunId, RunStatus, Scope, TenantEvent, TenantEventKind};
        use durable::transport::{EventDelivery, RedisConfig, RedisTransport, Subscription};
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
}
