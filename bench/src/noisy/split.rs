//! The weighted split: three tenants with weights 3, 2 and 1 each start the same backlog at
//! once; the runs each finishes while all three still have plenty of work, as a share of all
//! of them, against the share its weight asks for (goal: within ±10% of it).

use std::collections::HashMap;
use std::time::Instant;

use durable::model::{Namespace, Plan};

use super::deployment::{self, Deployment};
use super::{BoxError, Load};

/// The tenants and their weights.
const TENANTS: [(&str, u32); 3] = [("acme", 3), ("globex", 2), ("initech", 1)];

/// Starts `runs` runs for each tenant at once and prints the table.
pub async fn measure(load: Load, runs: usize) -> Result<(), BoxError> {
    let tenants = TENANTS
        .iter()
        .map(|(name, weight)| Ok((Namespace::tenant(name)?, *weight)))
        .collect::<Result<Vec<_>, BoxError>>()?;
    let names: Vec<Namespace> = tenants.iter().map(|(t, _)| t.clone()).collect();
    let d = Deployment::start(load.workflows, &names).await?;
    for (tenant, weight) in &tenants {
        let plan = Plan {
            weight: Some(*weight),
            ..Plan::default()
        };
        d.engine.set_plan(Some(tenant), plan).await?;
    }

    let mut completions = d.completions().await?;
    let t0 = Instant::now();
    // Counted until the first tenant has finished half its backlog, while every tenant still
    // has plenty queued: near its end a tenant has too few runs left to use its share, and
    // the others take what it leaves, as they should.
    let mut finished: HashMap<Namespace, usize> = HashMap::new();
    let bursts: Vec<_> = names
        .iter()
        .map(|tenant| d.burst(tenant, runs, load.workflows, load.step_ms))
        .collect();
    let window = loop {
        let (tenant, _) = completions.recv().await.ok_or("the event reader stopped")?;
        let n = finished.entry(tenant).or_default();
        *n += 1;
        if *n == runs.div_ceil(2) {
            break t0.elapsed();
        }
    };
    // Starts still in flight go with the engine.
    for burst in bursts {
        burst.abort();
    }
    let total: usize = finished.values().sum();
    let weights: u32 = tenants.iter().map(|(_, w)| w).sum();
    println!(
        "| weighted split, {}: three tenants start {runs} runs each at once over {} workflows (steps {} ms); runs finished in the {:.1} s until the first had finished half | weight | runs | share | weight's share | ratio |",
        deployment::name(),
        load.workflows,
        load.step_ms,
        window.as_secs_f64()
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (tenant, weight) in &tenants {
        let n = finished.get(tenant).copied().unwrap_or(0);
        let share = n as f64 / total.max(1) as f64;
        let want = f64::from(*weight) / f64::from(weights);
        println!(
            "| {tenant} | {weight} | {n} | {:.1}% | {:.1}% | {:.2}× |",
            share * 100.0,
            want * 100.0,
            share / want
        );
    }
    d.stop().await;
    Ok(())
}
