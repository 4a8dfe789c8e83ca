//! [`engine_cases!`], which stamps a module's cases once per backend.

/// Stamps each listed case of the invoking module as one `#[tokio::test]` per backend:
/// `embedded::<case>` on the embedded pair and `postgres_redis::<case>` on PostgreSQL + Redis.
/// A case is an `async fn(Backend)` of the invoking module; `[multi_thread]` before its name runs
/// it on a runtime of two threads. The cases after `; embedded_only:` are stamped for the
/// embedded pair alone (say why beside them).
macro_rules! engine_cases {
    (
        $($([$flavor:ident])? $case:ident),* $(,)?
        $(; embedded_only: $($([$only_flavor:ident])? $only:ident),* $(,)?)?
    ) => {
        mod embedded {
            $(engine_cases!(@test [$($flavor)?] $case, embedded);)*
            $($(engine_cases!(@test [$($only_flavor)?] $only, embedded);)*)?
        }
        mod postgres_redis {
            $(engine_cases!(@test [$($flavor)?] $case, postgres_redis);)*
        }
    };
    (@test [] $case:ident, $backend:ident) => {
        #[tokio::test]
        async fn $case() {
            engine_cases!(@run $case, $backend);
        }
    };
    (@test [multi_thread] $case:ident, $backend:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            engine_cases!(@run $case, $backend);
        }
    };
    (@run $case:ident, embedded) => {
        super::$case($crate::backend::Backend::embedded().await).await
    };
    // `None`: the PostgreSQL or the Redis suites are skipped here, and the backend said so.
    (@run $case:ident, postgres_redis) => {
        if let Some(backend) = $crate::backend::Backend::postgres_redis().await {
            super::$case(backend).await;
        }
    };
}
