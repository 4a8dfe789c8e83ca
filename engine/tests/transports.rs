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
}
