//! The noisy neighbour: tenant `acme` starts a backlog of runs spread over many workflows, then
//! tenant `globex` starts runs one at a time for as long as acme's backlog lasts; the latency
//! of globex's runs that overlapped the backlog against globex alone (`B_RUNS` runs), and
//! acme's throughput against acme alone. Each phase runs on a fresh engine and database.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use durable::StartRun;
use durable::model::Namespace;
use serde_json::json;
use tokio::sync::mpsc;

use super::deployment::{self, Deployment};
use super::{BoxError, Load};

/// What one phase measured.
struct Measured {
    /// globex's end-to-end latencies, sorted.
    b: Vec<Duration>,
    /// acme's runs per second, from its first start to its last completion.
    a_rate: Option<f64>,
}

/// Globex alone, acme alone, then both; prints the table.
pub async fn measure(load: Load) -> Result<(), BoxError> {
    let alone_b = phase(load, false, true).await?;
    let alone_a = phase(load, true, false).await?;
    let together = phase(load, true, true).await?;

    let a_alone = alone_a.a_rate.unwrap_or(0.0);
    let a_with = together.a_rate.unwrap_or(0.0);
    println!(
        "| noisy neighbour, {}: acme {} runs over {} workflows (steps {} ms), globex one at a time ({} alone, {} beside acme's backlog) | globex alone | globex beside acme | ratio |",
        deployment::name(),
        load.a_runs,
        load.workflows,
        load.step_ms,
        alone_b.b.len(),
        together.b.len()
    );
    println!("| --- | --- | --- | --- |");
    for p in [50.0, 99.0] {
        let (alone, with) = (ms(pct(&alone_b.b, p)), ms(pct(&together.b, p)));
        println!(
            "| globex p{p:.0} end-to-end | {alone:.1} ms | {with:.1} ms | {:.2}× |",
            with / alone.max(0.001)
        );
    }
    println!(
        "| acme throughput (alone / beside globex) | {a_alone:.0} runs/s | {a_with:.0} runs/s | {:.2}× |",
        a_with / a_alone.max(0.001)
    );
    Ok(())
}

/// One phase on a fresh engine: acme's backlog if `with_a`, then globex one at a time if
/// `with_b`, until acme's backlog has drained.
async fn phase(load: Load, with_a: bool, with_b: bool) -> Result<Measured, BoxError> {
    let acme = Namespace::tenant("acme")?;
    let globex = Namespace::tenant("globex")?;
    let d = Deployment::start(load.workflows, &[acme.clone(), globex.clone()]).await?;

    // One reader of completions: acme's are counted, globex's handed to its driver.
    let mut completions = d.completions().await?;
    let (b_done_tx, mut b_done) = mpsc::unbounded_channel();
    let a_expected = if with_a { load.a_runs } else { 0 };
    let a_done = Arc::new(AtomicBool::new(!with_a));
    let reader = {
        let a_done = a_done.clone();
        let acme = acme.clone();
        tokio::spawn(async move {
            let mut a_left = a_expected;
            let mut a_finished = None;
            while a_left > 0 || !b_done_tx.is_closed() {
                let next = tokio::select! {
                    next = completions.recv() => next,
                    () = b_done_tx.closed(), if !b_done_tx.is_closed() => continue,
                };
                let Some((tenant, run)) = next else {
                    break;
                };
                if tenant == acme {
                    a_left = a_left.saturating_sub(1);
                    if a_left == 0 {
                        a_finished = Some(Instant::now());
                        a_done.store(true, Ordering::SeqCst);
                    }
                } else {
                    let _ = b_done_tx.send(run);
                }
            }
            a_finished
        })
    };

    let t0 = Instant::now();
    if with_a {
        d.burst(&acme, load.a_runs, load.workflows, load.step_ms)
            .await??;
    }
    let mut b = Vec::with_capacity(load.b_runs);
    if with_b {
        // Beside acme, globex keeps going one at a time until acme's backlog drained, and only
        // the runs that started while it had runs outstanding count: after that globex is alone.
        while (with_a && !a_done.load(Ordering::SeqCst)) || (!with_a && b.len() < load.b_runs) {
            let overlapped = !a_done.load(Ordering::SeqCst);
            let started = Instant::now();
            let run = d
                .engine
                .start_run(StartRun {
                    workflow: "noisy.w0".into(),
                    input: json!({ "sleep_ms": 0 }),
                    namespace: Some(globex.clone()),
                    ..StartRun::default()
                })
                .await?;
            loop {
                match b_done.recv().await {
                    Some(id) if id == run.id => break,
                    Some(_) => {}
                    None => return Err("the event reader stopped".into()),
                }
            }
            if overlapped || !with_a {
                b.push(started.elapsed());
            }
        }
    }
    drop(b_done);
    let a_finished = reader.await?;
    b.sort();
    d.stop().await;
    Ok(Measured {
        b,
        a_rate: a_finished.map(|at| load.a_runs as f64 / (at - t0).as_secs_f64()),
    })
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((p / 100.0) * (sorted.len().saturating_sub(1)) as f64).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
