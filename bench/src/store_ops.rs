//! The store's hot-path operations one at a time, SQLite and PostgreSQL side by side: what one
//! write and one read cost, which bounds how fast a run can go end to end.
//!
//! `cargo run --release -p durable-bench --bin store_ops [-- N]` (PostgreSQL on 127.0.0.1:5432
//! or `DURABLE_TEST_POSTGRES`; `DURABLE_SKIP_POSTGRES=1` measures SQLite alone.)

use std::time::{Duration, Instant};

use durable::model::{Namespace, RunId, Scope, StepOutcome, StepResult};
use durable::store::{
    Claim, NewCheckpoint, NewRun, PgStore, SqliteStore, Store, TurnCommit, TurnOutcome,
    postgres_testing,
};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000);
    let dir = tempfile::tempdir()?;
    let sqlite = SqliteStore::connect(&format!("sqlite://{}/ops.db", dir.path().display())).await?;
    let mut columns = vec![("SQLite", measure(&sqlite, n).await?)];
    let mut floor = None;
    if let Some(url) = postgres_testing::fresh_database().await {
        let postgres = PgStore::connect(&url).await?;
        columns.push(("PostgreSQL", measure(&postgres, n).await?));
        floor = Some(driver_floor(&url, n).await?);
    }
    print!("| one at a time ({n} each) |");
    for (name, _) in &columns {
        print!(" {name} p50 | {name} p99 |");
    }
    println!();
    println!("| ---{} |", " | ---".repeat(columns.len() * 2));
    for (row, op) in OPS.iter().enumerate() {
        print!("| {op} |");
        for (_, samples) in &columns {
            let v = &samples[row];
            print!(" {:.3} ms | {:.3} ms |", ms(pct(v, 50.0)), ms(pct(v, 99.0)));
        }
        println!();
    }
    if let Some(floor) = floor {
        println!(
            "\nThe driver's floor: `SELECT 1` through an sqlx pool, p50 {:.3} ms, p99 {:.3} ms \
             (compare `pgbench -f select1.sql -M prepared` on the same server).",
            ms(pct(&floor, 50.0)),
            ms(pct(&floor, 99.0))
        );
    }
    Ok(())
}

/// `SELECT 1` through a plain sqlx pool on `url`, `n` times one at a time: the least any store
/// statement can cost from this process.
async fn driver_floor(url: &str, n: usize) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let pool = sqlx::PgPool::connect(url).await?;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        sqlx::query("SELECT 1").execute(&pool).await?;
        samples.push(t.elapsed());
    }
    samples.sort();
    Ok(samples)
}

/// The operations measured, in the order [`measure`] returns their samples.
const OPS: [&str; 4] = [
    "create_run (claimed)",
    "read history (checkpoints + signals)",
    "commit_turn (one step)",
    "apply_step_result (claims)",
];

/// Runs `n` runs through `store`, one operation at a time; each operation's sorted samples.
async fn measure(
    store: &dyn Store,
    n: usize,
) -> Result<Vec<Vec<Duration>>, Box<dyn std::error::Error>> {
    let claim = Claim {
        scope: Scope::All,
        owner: "bench".into(),
        until: i64::MAX / 2,
    };
    let mut create = Vec::with_capacity(n);
    let mut read = Vec::with_capacity(n);
    let mut commit = Vec::with_capacity(n);
    let mut apply = Vec::with_capacity(n);
    for i in 0..n {
        let id = RunId::parse(&format!("r{i}"))?;
        let new = NewRun::top_level(id.clone(), Namespace::default(), "wf", 1, json!({"i": i}));
        let t = Instant::now();
        let created = store.create_run(new, 1, Some(&claim)).await?;
        create.push(t.elapsed());
        let t = Instant::now();
        store.checkpoints(&Scope::All, &id).await?;
        store.buffered_signals(&id).await?;
        read.push(t.elapsed());
        let step = NewCheckpoint::remote_step(0, "add".into(), "add".into(), json!(i), 2);
        let turn = TurnCommit {
            checkpoints: vec![step],
            ..TurnCommit::new(TurnOutcome::Suspend { wake_at: None })
        };
        let t = Instant::now();
        store
            .commit_turn(&claim, &id, created.attempt, turn, 2)
            .await?;
        commit.push(t.elapsed());
        let result = StepResult {
            run_id: id.clone(),
            seq: 0,
            step_id: format!("{id}:0"),
            started_at: Some(3),
            outcome: StepOutcome::Completed { output: json!(i) },
            receipt: Default::default(),
        };
        let t = Instant::now();
        store.apply_step_result(&result, 4, Some(&claim)).await?;
        apply.push(t.elapsed());
    }
    let mut samples = vec![create, read, commit, apply];
    for v in &mut samples {
        v.sort();
    }
    Ok(samples)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((p / 100.0) * (sorted.len().saturating_sub(1)) as f64).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
