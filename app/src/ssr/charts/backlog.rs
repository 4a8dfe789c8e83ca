//! The backlog per tenant as SVG: one bar per namespace, the busiest first, split into runs
//! waiting for a driver or blocked (the backlog), running, and waiting on a timer, signal or
//! step; each bar links to its namespace's runs.

use std::fmt::Write;

use durable::model::NamespaceLoad;

use super::escape;

/// How many tenants get a bar; the rest are counted in a last line.
const MOST_BARS: usize = 12;
/// About a phone's width: the page caps the chart's width, so its text shows at about its set
/// size on a phone and a desktop alike.
const WIDTH: f64 = 360.0;
const LABEL: f64 = 96.0;
const NUMBER: f64 = 44.0;
const ROW: f64 = 20.0;
const BAR: f64 = 12.0;

/// One part of a bar: a name, a colour, and the runs of a load it counts.
type Part = (&'static str, &'static str, fn(&NamespaceLoad) -> u64);

/// The parts of a bar, left to right.
const PARTS: [Part; 3] = [
    ("backlog", "#f59e0b", NamespaceLoad::backlog),
    ("running", "#6366f1", |l| l.running),
    ("waiting", "#94a3b8", |l| l.suspended),
];

/// The chart of `loads` (any order).
pub fn backlog_chart(loads: &[NamespaceLoad]) -> String {
    let total = |l: &NamespaceLoad| PARTS.iter().map(|(_, _, n)| n(l)).sum::<u64>();
    let mut busy: Vec<&NamespaceLoad> = loads.iter().filter(|l| total(l) > 0).collect();
    busy.sort_by(|a, b| {
        (b.backlog(), total(b))
            .cmp(&(a.backlog(), total(a)))
            .then_with(|| a.namespace.as_str().cmp(b.namespace.as_str()))
    });
    let more = busy.len().saturating_sub(MOST_BARS);
    busy.truncate(MOST_BARS);
    let widest = busy.iter().map(|l| total(l)).max().unwrap_or(0).max(1) as f64;
    let rows = busy.len().max(1) + usize::from(more > 0);
    let height = rows as f64 * ROW + 8.0;
    let plot = WIDTH - LABEL - NUMBER;

    let mut svg = String::with_capacity(4 * 1024);
    let _ = write!(
        svg,
        r#"<svg viewBox="0 0 {WIDTH} {height}" role="img" aria-label="Runs waiting, running and blocked per namespace" data-testid="chart-backlog" data-bars="{}" class="h-auto w-full" font-family="ui-sans-serif, system-ui, sans-serif" font-size="10">"#,
        busy.len()
    );
    if busy.is_empty() {
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#64748b" data-testid="chart-empty">No namespace has runs waiting or running.</text>"##,
            WIDTH / 2.0,
            ROW * 0.7,
        );
    }
    for (row, load) in busy.iter().enumerate() {
        let ns = escape(load.namespace.as_str());
        let top = 4.0 + row as f64 * ROW;
        let _ = write!(
            svg,
            r##"<a href="/?ns={ns}" data-testid="backlog-bar" data-namespace="{ns}" data-backlog="{}"><text x="{}" y="{:.1}" text-anchor="end" fill="#334155">{ns}</text>"##,
            load.backlog(),
            LABEL - 8.0,
            top + BAR - 3.0,
        );
        let mut x = LABEL;
        let mut tip = load.namespace.to_string();
        for (name, color, count) in PARTS {
            let n = count(load);
            let _ = write!(tip, " · {name} {n}");
            if n == 0 {
                continue;
            }
            let w = plot * n as f64 / widest;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{BAR}" fill="{color}" data-part="{name}"/>"#,
            );
            x += w;
        }
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" fill="#334155">{}</text><title>{}</title></a>"##,
            x + 6.0,
            top + BAR - 3.0,
            total(load),
            escape(&tip),
        );
    }
    if more > 0 {
        let _ = write!(
            svg,
            r##"<text x="{LABEL}" y="{:.1}" fill="#64748b">and {more} more namespaces with less</text>"##,
            4.0 + busy.len() as f64 * ROW + BAR - 3.0,
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use durable::model::Namespace;

    use super::*;

    fn load(ns: &str, pending: u64, running: u64) -> NamespaceLoad {
        NamespaceLoad {
            namespace: Namespace::parse(ns).expect("namespace"),
            pending,
            running,
            suspended: 0,
            blocked: 0,
            failed_recently: 0,
        }
    }

    #[test]
    fn the_busiest_tenants_get_bars_in_order() {
        let mut loads: Vec<_> = (0..14).map(|i| load(&format!("t{i}"), i, 1)).collect();
        loads.push(load("idle", 0, 0));
        let svg = backlog_chart(&loads);
        assert!(svg.contains(r#"data-bars="12""#));
        let first = svg.find(r#"data-namespace="t13""#).expect("t13");
        let second = svg.find(r#"data-namespace="t12""#).expect("t12");
        assert!(first < second, "the largest backlog first");
        assert!(!svg.contains("idle"));
        assert!(svg.contains("and 2 more namespaces"));
        assert!(svg.contains("t13 · backlog 13 · running 1 · waiting 0"));
        assert!(backlog_chart(&[]).contains("chart-empty"));
    }
}
