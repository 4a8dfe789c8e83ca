//! A line chart over time as SVG markup: a few series over the same points, a y axis scaled to a
//! round maximum, five time labels, and one hover target per point whose tooltip reads every
//! series there. Scales with its container (a `viewBox`, no fixed size), so it fits a phone.

use std::fmt::Write;

use durable::model::Millis;

use super::{escape, hh_mm};

/// The drawing's size in its own units; the page scales it.
/// About the width a chart is shown at (half a desktop page, a phone's width), so its text
/// shows at about its set size.
const WIDTH: f64 = 400.0;
const HEIGHT: f64 = 170.0;
const LEFT: f64 = 46.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 22.0;

/// One series: a name for the legend and tooltips, a colour, a value per point (`None` where
/// it has none, which breaks the line).
pub struct Series {
    /// The legend's name.
    pub name: &'static str,
    /// A CSS colour.
    pub color: &'static str,
    /// One value per point.
    pub values: Vec<Option<f64>>,
}

/// How the y axis and tooltips read a value.
#[derive(Clone, Copy)]
pub enum Unit {
    /// A count per point.
    Count,
    /// Seconds.
    Seconds,
}

impl Unit {
    fn format(self, value: f64) -> String {
        match self {
            Unit::Count if value.fract() == 0.0 => format!("{value:.0}"),
            Unit::Count => format!("{value:.1}"),
            Unit::Seconds if value < 1.0 => format!("{:.0} ms", value * 1000.0),
            Unit::Seconds => format!("{value:.1} s"),
        }
    }
}

/// A chart to draw.
pub struct LineChart {
    /// What it shows, for screen readers and the test id.
    pub label: String,
    /// `data-testid` of the `<svg>`.
    pub testid: &'static str,
    /// Each point's start time.
    pub times: Vec<Millis>,
    /// The series, drawn in order.
    pub series: Vec<Series>,
    /// How values read.
    pub unit: Unit,
    /// What it says when no series has a value above zero.
    pub empty: String,
}

impl LineChart {
    /// The chart as an `<svg>` element.
    pub fn render(&self) -> String {
        let n = self.times.len().max(1);
        let top_value = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .fold(0.0_f64, |a, b| a.max(*b));
        let y_max = round_up(top_value, self.unit);
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let x = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / n as f64;
        let y = |v: f64| TOP + plot_h * (1.0 - v / y_max);

        let mut svg = String::with_capacity(8 * 1024);
        let _ = write!(
            svg,
            r#"<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{}" data-testid="{}" data-points="{n}" data-max="{top_value}" class="h-auto w-full" preserveAspectRatio="xMidYMid meet" font-family="ui-sans-serif, system-ui, sans-serif" font-size="10">"#,
            escape(&self.label),
            self.testid,
        );
        // The grid and the y axis's labels: zero, half and the top.
        for fraction in [0.0, 0.5, 1.0] {
            let value = y_max * fraction;
            let at = y(value);
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{}" y1="{at:.1}" y2="{at:.1}" stroke="#e2e8f0"/><text x="{}" y="{:.1}" text-anchor="end" fill="#64748b">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                at + 4.0,
                escape(&self.unit.format(value)),
            );
        }
        // Five time labels along the bottom.
        for i in time_label_points(self.times.len()) {
            let anchor = match i {
                0 => "start",
                i if i + 1 == self.times.len() => "end",
                _ => "middle",
            };
            let _ = write!(
                svg,
                r##"<text x="{:.1}" y="{}" text-anchor="{anchor}" fill="#64748b">{}</text>"##,
                x(i),
                HEIGHT - 6.0,
                hh_mm(self.times[i]),
            );
        }
        if top_value <= 0.0 {
            let _ = write!(
                svg,
                r##"<text x="{}" y="{}" text-anchor="middle" fill="#64748b" data-testid="chart-empty">{}</text>"##,
                LEFT + plot_w / 2.0,
                TOP + plot_h / 2.0,
                escape(&self.empty),
            );
        }
        for series in &self.series {
            let mut d = String::new();
            let mut lone = Vec::new();
            let values = &series.values;
            for (i, value) in values.iter().enumerate() {
                let Some(v) = value else { continue };
                let joined = i > 0 && values[i - 1].is_some();
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if joined { "L" } else { "M" },
                    x(i),
                    y(*v)
                );
                if !joined && values.get(i + 1).is_none_or(|next| next.is_none()) {
                    lone.push((x(i), y(*v)));
                }
            }
            let _ = write!(
                svg,
                r#"<path d="{d}" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round" data-series="{}"/>"#,
                series.color,
                escape(series.name),
            );
            for (cx, cy) in lone {
                let _ = write!(
                    svg,
                    r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="2.5" fill="{}"/>"#,
                    series.color
                );
            }
        }
        // A hover target per point, its tooltip every series's value there.
        let slot = plot_w / n as f64;
        for (i, at) in self.times.iter().enumerate() {
            let mut tip = hh_mm(*at);
            for series in &self.series {
                let value = series.values.get(i).copied().flatten();
                let shown = value.map_or("–".to_owned(), |v| self.unit.format(v));
                let _ = write!(tip, " · {} {shown}", series.name);
            }
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{TOP}" width="{slot:.1}" height="{plot_h}" fill="transparent"><title>{}</title></rect>"#,
                x(i) - slot / 2.0,
                escape(&tip),
            );
        }
        svg.push_str("</svg>");
        svg
    }
}

/// Five evenly spaced points of `n` (fewer when there are fewer).
fn time_label_points(n: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let mut points: Vec<usize> = (0..5).map(|k| k * (n - 1) / 4).collect();
    points.dedup();
    points
}

/// A round top for the y axis at or above `value`: 1, 2 or 5 times a power of ten (a count's
/// top is at least 1; seconds at least 10 ms).
fn round_up(value: f64, unit: Unit) -> f64 {
    let floor = match unit {
        Unit::Count => 1.0,
        Unit::Seconds => 0.01,
    };
    if value <= floor {
        return floor;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|top| *top >= value)
        .unwrap_or(10.0 * power)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_top_is_round_and_covers_the_values() {
        assert_eq!(round_up(0.0, Unit::Count), 1.0);
        assert_eq!(round_up(7.0, Unit::Count), 10.0);
        assert_eq!(round_up(12.0, Unit::Count), 20.0);
        assert_eq!(round_up(0.3, Unit::Seconds), 0.5);
        assert_eq!(round_up(0.001, Unit::Seconds), 0.01);
        assert_eq!(time_label_points(60), vec![0, 14, 29, 44, 59]);
        assert_eq!(time_label_points(1), vec![0]);
    }

    #[test]
    fn a_chart_draws_each_series_and_a_tooltip_per_point() {
        let chart = LineChart {
            label: "Runs <per> minute".into(),
            testid: "chart-throughput",
            times: vec![0, 60_000, 120_000],
            series: vec![
                Series {
                    name: "started",
                    color: "#6366f1",
                    values: vec![Some(1.0), Some(3.0), Some(0.0)],
                },
                Series {
                    name: "p95",
                    color: "#f59e0b",
                    values: vec![None, Some(0.2), None],
                },
            ],
            unit: Unit::Count,
            empty: "quiet".into(),
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains(r#"aria-label="Runs &lt;per&gt; minute""#));
        assert!(svg.contains(r#"data-series="started""#));
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("00:01 · started 3 · p95 0.2"));
        // The lone p95 value is a dot; the started line is one path with three points.
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(!svg.contains("chart-empty"));
    }
}
