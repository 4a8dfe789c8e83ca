//! The dashboard's charts, drawn on the server as SVG markup from the store's activity minutes
//! and load counts. Nothing here reaches the browser's bundle: a page gets the markup from a
//! server function and sets it as its chart's inner HTML, so the charts cost the hydrate
//! bundle nothing and render with JavaScript off.
//!
//! - `line.rs`: a line chart over time (throughput, latency percentiles);
//! - `backlog.rs`: a bar per tenant of runs waiting, running and blocked.

mod backlog;
mod line;

use durable::model::{ActivityPoint, ActivityWindow, Millis};

pub use backlog::backlog_chart;
use line::{LineChart, Series, Unit};

/// Runs started, completed and failed per point of `window`.
pub fn throughput_chart(points: &[ActivityPoint], window: ActivityWindow) -> String {
    let per = match window {
        ActivityWindow::Hour => "minute",
        ActivityWindow::Day => "15 minutes",
    };
    let count = |f: fn(&ActivityPoint) -> u64| -> Vec<Option<f64>> {
        points.iter().map(|p| Some(f(p) as f64)).collect()
    };
    LineChart {
        label: format!(
            "Runs started, completed and failed per {per}, last {}",
            window.as_str()
        ),
        testid: "chart-throughput",
        times: points.iter().map(|p| p.at).collect(),
        series: vec![
            Series {
                name: "started",
                color: "#6366f1",
                values: count(|p| p.started),
            },
            Series {
                name: "completed",
                color: "#10b981",
                values: count(|p| p.completed),
            },
            Series {
                name: "failed",
                color: "#ef4444",
                values: count(|p| p.failed),
            },
        ],
        unit: Unit::Count,
        empty: format!("No run started or ended in the last {}.", window.as_str()),
    }
    .render()
}

/// The step run time's median, 95th and 99th percentiles per point of `window`.
pub fn latency_chart(points: &[ActivityPoint], window: ActivityWindow) -> String {
    LineChart {
        label: format!(
            "Step run time percentiles (p50, p95, p99), last {}",
            window.as_str()
        ),
        testid: "chart-latency",
        times: points.iter().map(|p| p.at).collect(),
        series: vec![
            Series {
                name: "p50",
                color: "#0ea5e9",
                values: points.iter().map(|p| p.p50).collect(),
            },
            Series {
                name: "p95",
                color: "#f59e0b",
                values: points.iter().map(|p| p.p95).collect(),
            },
            Series {
                name: "p99",
                color: "#ef4444",
                values: points.iter().map(|p| p.p99).collect(),
            },
        ],
        unit: Unit::Seconds,
        empty: format!("No step finished in the last {}.", window.as_str()),
    }
    .render()
}

/// `text` safe inside SVG text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `HH:MM` in UTC, as every time on the dashboard is shown.
fn hh_mm(at: Millis) -> String {
    let minutes = at.div_euclid(60_000).rem_euclid(24 * 60);
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}
