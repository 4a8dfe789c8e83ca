//! The dashboard's reads at scale, side by side on both backends: 1,000,000 runs across 100
//! tenants; the runs list's first page, a filtered page (status + workflow + tag), the facets
//! for one tenant and for the operator, and what the operator's loads and a `/metrics` scrape
//! read.
//!
//! `cargo run --release -p durable-bench --bin lists [-- RUNS [POSTGRES_ADMIN_URL]]`
//! (PostgreSQL defaults to `postgres://postgres@127.0.0.1:5432/postgres`; a database is created
//! for the run and dropped after it.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use durable::model::{AttributeFilter, Namespace, RunQuery, RunStatus, Scope};
use durable::store::{PgStore, SqliteStore, Store};
use sqlx::Connection;

const TENANTS: u64 = 100;
const SAMPLES: usize = 200;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let runs: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let admin = args
        .next()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());

    let dir = tempfile::tempdir()?;
    let sqlite =
        SqliteStore::connect(&format!("sqlite://{}/lists.db", dir.path().display())).await?;
    let t = Instant::now();
    sqlite.execute_raw(&fill_sqlite(runs)).await?;
    // What the store writes beside each run it creates (the migration's backfill, in bulk).
    sqlite
        .execute_raw(
            "INSERT OR IGNORE INTO run_tags (run_id, namespace, tag, created_at) \
             SELECT r.id, r.namespace, t.value, r.created_at FROM runs r, json_each(r.tags) t",
        )
        .await?;
    sqlite
        .execute_raw(
            "INSERT INTO run_attributes (run_id, namespace, key, value, created_at) \
             SELECT r.id, r.namespace, a.key, json_quote(a.value), r.created_at \
             FROM runs r, json_each(r.search_attributes) a",
        )
        .await?;
    sqlite.execute_raw("ANALYZE").await?;
    eprintln!(
        "sqlite: {runs} runs inserted in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let db = format!("durable_bench_lists_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(&admin).await?;
    sqlx::query(&format!("CREATE DATABASE {db}"))
        .execute(&mut conn)
        .await?;
    let url = format!(
        "{}/{db}",
        admin.rsplit_once('/').map_or(admin.as_str(), |(s, _)| s)
    );
    let postgres = PgStore::connect(&url).await?;
    let t = Instant::now();
    postgres.execute_raw(&fill_postgres(runs)).await?;
    postgres.execute_raw("VACUUM ANALYZE runs").await?;
    eprintln!(
        "postgres: {runs} runs inserted in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let backends: [(&str, Arc<dyn Store>); 2] = [
        ("SQLite", Arc::new(sqlite)),
        ("PostgreSQL", Arc::new(postgres)),
    ];
    let tenant = Scope::Only(Namespace::tenant("tenant-7")?);
    // tenant-7's runs are all `suspended` (n ≡ 7 mod 100 ⇒ n ≡ 3 mod 4); 1 in 7 carry tag-3.
    let filtered = RunQuery {
        status: Some(RunStatus::Suspended),
        workflow: Some("wf-2".into()),
        tag: Some("tag-3".into()),
        ..RunQuery::default()
    };
    println!(
        "| {runs} runs, {TENANTS} tenants ({SAMPLES} samples) | SQLite p50 | SQLite p95 | PostgreSQL p50 | PostgreSQL p95 |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let rare = RunQuery {
        tag: Some("rare".into()),
        ..RunQuery::default()
    };
    let region = RunQuery {
        attribute: Some(AttributeFilter::new("region", serde_json::json!("r-3"))?),
        ..RunQuery::default()
    };
    for (label, scope, query) in [
        ("tenant: first page", &tenant, RunQuery::default()),
        ("tenant: rare tag only (1 run)", &tenant, rare.clone()),
        ("tenant: attribute only (1 in 6)", &tenant, region.clone()),
        (
            "operator: rare tag only (99 runs)",
            &Scope::All,
            rare.clone(),
        ),
        ("tenant: status + workflow + tag", &tenant, filtered.clone()),
        ("operator: first page", &Scope::All, RunQuery::default()),
        (
            "operator: status + workflow + tag",
            &Scope::All,
            filtered.clone(),
        ),
    ] {
        let mut row = format!("| {label} |");
        for (_, store) in &backends {
            let mut times = Vec::with_capacity(SAMPLES);
            for _ in 0..SAMPLES {
                let t = Instant::now();
                let page = store.list_runs(scope, &query).await?;
                times.push(t.elapsed());
                assert!(!page.runs.is_empty(), "{label}: the page is empty");
            }
            row.push_str(&cells(&mut times));
        }
        println!("{row}");
    }
    for (label, scope, samples) in [
        ("tenant: facets", &tenant, SAMPLES),
        ("operator: facets", &Scope::All, SAMPLES),
    ] {
        let mut row = format!("| {label} |");
        for (_, store) in &backends {
            let mut times = Vec::with_capacity(samples);
            for _ in 0..samples {
                let t = Instant::now();
                store.facets(scope).await?;
                times.push(t.elapsed());
            }
            row.push_str(&cells(&mut times));
        }
        println!("{row}");
    }
    // What the operator's view and a `/metrics` scrape read besides the facets.
    let mut row = "| operator: loads + run counts + totals |".to_owned();
    for (_, store) in &backends {
        let mut times = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let t = Instant::now();
            store
                .namespace_loads(&Scope::All, 1_700_000_000_000)
                .await?;
            store.run_counts(&Scope::All).await?;
            store.run_totals(&Scope::All).await?;
            times.push(t.elapsed());
        }
        row.push_str(&cells(&mut times));
    }
    println!("{row}");
    let mut row = "| tenant: value facets of `region` |".to_owned();
    for (_, store) in &backends {
        let mut times = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let t = Instant::now();
            store.value_facets(&tenant, "region").await?;
            times.push(t.elapsed());
        }
        row.push_str(&cells(&mut times));
    }
    println!("{row}");

    drop(backends);
    sqlx::query(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// Rows spread over tenants, workflows, statuses, tags and regions; newest last.
fn fill_sqlite(runs: u64) -> String {
    format!(
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {runs}) \
         INSERT INTO runs (id, namespace, workflow, workflow_version, status, input, tags, \
         search_attributes, root_run_id, created_at, updated_at) \
         SELECT 'run-' || n, 'tenant-' || (n % {TENANTS}), 'wf-' || (n % 5), 1, \
         CASE n % 4 WHEN 0 THEN 'completed' WHEN 1 THEN 'failed' WHEN 2 THEN 'completed' ELSE 'suspended' END, \
         '{{}}', CASE WHEN n % 10007 = 0 THEN json_array('tag-' || (n % 7), 'tag-' || (n % 11), 'rare') \
         ELSE json_array('tag-' || (n % 7), 'tag-' || (n % 11)) END, \
         json_object('region', 'r-' || (n % 6)), 'run-' || n, 1700000000000 + n, 1700000000000 + n FROM g"
    )
}

fn fill_postgres(runs: u64) -> String {
    format!(
        "INSERT INTO runs (id, namespace, workflow, workflow_version, status, input, tags, \
         search_attributes, root_run_id, created_at, updated_at) \
         SELECT 'run-' || n, 'tenant-' || (n % {TENANTS}), 'wf-' || (n % 5), 1, \
         CASE n % 4 WHEN 0 THEN 'completed' WHEN 1 THEN 'failed' WHEN 2 THEN 'completed' ELSE 'suspended' END, \
         '{{}}', CASE WHEN n % 10007 = 0 THEN jsonb_build_array('tag-' || (n % 7), 'tag-' || (n % 11), 'rare') \
         ELSE jsonb_build_array('tag-' || (n % 7), 'tag-' || (n % 11)) END, \
         jsonb_build_object('region', 'r-' || (n % 6)), 'run-' || n, 1700000000000 + n, 1700000000000 + n \
         FROM generate_series(1, {runs}) n"
    )
}

fn cells(times: &mut [Duration]) -> String {
    times.sort();
    let pct = |p: f64| {
        let i = ((p / 100.0) * (times.len().saturating_sub(1)) as f64).round() as usize;
        times.get(i).copied().unwrap_or_default().as_secs_f64() * 1000.0
    };
    format!(" {:.2} ms | {:.2} ms |", pct(50.0), pct(95.0))
}
