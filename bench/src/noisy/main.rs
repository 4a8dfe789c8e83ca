//! Fairness between tenants, in two tables: the noisy neighbour ([`neighbour`]) and the
//! weighted split ([`split`]).
//!
//! `cargo run --release -p durable-bench --bin noisy [-- A_RUNS WORKFLOWS B_RUNS STEP_MS SPLIT_RUNS]`
//! (defaults 10,000, 50, 20, 0, 3,000; `STEP_MS` is how long each of the busy tenants' steps
//! sleeps; `SPLIT_RUNS` is each tenant's backlog in the split, 0 to leave it out, and an
//! `A_RUNS` of 0 leaves the neighbour out).
//!
//! The embedded default unless `DURABLE_BENCH_CLUSTER=1` (see [`deployment`]; then
//! `DURABLE_TEST_POSTGRES` and `DURABLE_TEST_REDIS` say where).

mod deployment;
mod neighbour;
mod split;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the busy tenants are asked to do.
#[derive(Clone, Copy)]
struct Load {
    a_runs: usize,
    workflows: usize,
    b_runs: usize,
    step_ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: u64| -> Result<u64, BoxError> {
        Ok(args
            .next()
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let load = Load {
        a_runs: next(10_000)? as usize,
        workflows: next(50)?.max(1) as usize,
        b_runs: next(20)? as usize,
        step_ms: next(0)?,
    };
    let split_runs = next(10_000)? as usize;
    if load.a_runs > 0 {
        neighbour::measure(load).await?;
    }
    if split_runs > 0 {
        split::measure(load, split_runs).await?;
    }
    Ok(())
}
