//! The weighted split: three tenants with weights 3, 2 and 1 each start the same backlog at
//! once; the runs each finishes while all three have plenty of work, as a share of all of
//! them, against the share its weight asks for (goal: within ±10% of it). Two windows: from
//! the first start, and from when every start had been accepted.

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
    // Two windows, each ending when the first tenant has finished half of what it had to do
    // (near its end a tenant has too few runs left to use its share, and the others take what
    // it leaves, as they should). From the first start: the split while the starts come in,
    // where a start that turns its run at once competes with the fair claim. Once every start
    // has been accepted: the split of a backlog waiting in the store, whoever's clients got in
    // first.
    let t0 = Instant::now();
    let mut done: HashMap<Namespace, usize> = HashMap::new();
    let mut bursts: Vec<_> = names
        .iter()
        .map(|tenant| d.burst(tenant, runs, load.workflows, load.step_ms))
        .collect();
    let accepted = futures::future::try_join_all(bursts.iter_mut());
    tokio::pin!(accepted);
    let mut from_start: Option<Window> = None;
    let mut in_store: Option<Window> = None;
    let mut all_in: Option<(HashMap<Namespace, usize>, Instant)> = None;
    while from_start.is_none() || in_store.is_none() {
        tokio::select! {
            joined = &mut accepted, if all_in.is_none() => {
                for burst in joined? {
                    burst?;
                }
                all_in = Some((done.clone(), Instant::now()));
            }
            next = completions.recv() => {
                let (tenant, _) = next.ok_or("the event reader stopped")?;
                let n = *done.entry(tenant.clone()).and_modify(|n| *n += 1).or_insert(1);
                if from_start.is_none() && n >= runs.div_ceil(2) {
                    from_start = Some(Window::since(&HashMap::new(), &done, t0));
                }
                if let Some((before, at)) = &all_in {
                    let had = before.get(&tenant).copied().unwrap_or(0);
                    if in_store.is_none() && n - had >= (runs - had).div_ceil(2) {
                        in_store = Some(Window::since(before, &done, *at));
                    }
                }
            }
        }
    }
    let (from_start, in_store) = from_start.zip(in_store).ok_or("a window never closed")?;
    let weights: u32 = tenants.iter().map(|(_, w)| w).sum();
    println!(
        "| weighted split, {}: three tenants start {runs} runs each at once over {} workflows (steps {} ms) | weight | weight's share | from the first start ({:.1} s): runs, share | ratio | once all were accepted ({:.1} s): runs, share | ratio |",
        deployment::name(),
        load.workflows,
        load.step_ms,
        from_start.took.as_secs_f64(),
        in_store.took.as_secs_f64(),
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (tenant, weight) in &tenants {
        let want = f64::from(*weight) / f64::from(weights);
        let (a, a_share) = from_start.of(tenant);
        let (b, b_share) = in_store.of(tenant);
        println!(
            "| {tenant} | {weight} | {:.1}% | {a}, {:.1}% | {:.2}× | {b}, {:.1}% | {:.2}× |",
            want * 100.0,
            a_share * 100.0,
            a_share / want,
            b_share * 100.0,
            b_share / want
        );
    }
    d.stop().await;
    Ok(())
}

/// The runs each tenant finished in one window, and how long it lasted.
struct Window {
    finished: HashMap<Namespace, usize>,
    took: std::time::Duration,
}

impl Window {
    /// What was `done` by now and not yet `before`, since `at`.
    fn since(
        before: &HashMap<Namespace, usize>,
        done: &HashMap<Namespace, usize>,
        at: Instant,
    ) -> Self {
        let finished = done
            .iter()
            .map(|(t, n)| (t.clone(), n - before.get(t).copied().unwrap_or(0)))
            .collect();
        Window {
            finished,
            took: at.elapsed(),
        }
    }

    /// The runs `tenant` finished in the window, and its share of all of them.
    fn of(&self, tenant: &Namespace) -> (usize, f64) {
        let total: usize = self.finished.values().sum();
        let n = self.finished.get(tenant).copied().unwrap_or(0);
        (n, n as f64 / total.max(1) as f64)
    }
}
