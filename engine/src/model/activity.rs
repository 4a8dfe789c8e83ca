//! Load over time: what the dashboard's charts draw. The store keeps, per tenant and per minute
//! (and per minute over every tenant), the runs started and finished, and the step results
//! recorded by run-time bucket; [`series`] folds those minutes into a window's points, with
//! latency percentiles read off the buckets as Prometheus's `histogram_quantile` reads them.

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};

/// The upper bounds of the step run-time buckets, in seconds: 1 ms to a minute. The
/// `durable_step_duration_seconds` histogram and the stored minutes share them.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0,
];

/// How many run-time slots a minute keeps: one per bucket, and one past the last bound.
pub const LATENCY_SLOTS: usize = LATENCY_BUCKETS.len() + 1;

/// How long the store keeps activity minutes: the longest window, and a day more.
pub const ACTIVITY_KEPT_MINUTES: i64 = 2 * 24 * 60;

/// One minute of one scope's activity, as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityMinute {
    /// Minutes since the Unix epoch.
    pub minute: i64,
    /// Runs created in this minute (continuations and retries included).
    pub started: u64,
    /// Runs that completed.
    pub completed: u64,
    /// Runs that ended without completing: failed, dead, or rolled back by their saga.
    pub failed: u64,
    /// Runs cancelled.
    pub cancelled: u64,
    /// Step results recorded, by run time: slot `i` counts those at most
    /// `LATENCY_BUCKETS[i]` seconds (and over the one before), the last slot the longer ones.
    pub steps: [u64; LATENCY_SLOTS],
}

impl ActivityMinute {
    /// An empty minute.
    pub fn at(minute: i64) -> Self {
        ActivityMinute {
            minute,
            ..ActivityMinute::default()
        }
    }

    /// Counts `n` runs of `event`: `started`, or the final status they reached. A continued
    /// run lives on in its successor, so it is neither a completion nor a failure.
    pub fn count_run(&mut self, event: &str, n: u64) {
        match event {
            "started" => self.started += n,
            "completed" => self.completed += n,
            "failed" | "dead" | "compensated" | "compensation_failed" => self.failed += n,
            "cancelled" => self.cancelled += n,
            _ => {}
        }
    }
}

/// The step results of one tenant in one minute, by run-time slot: what an engine adds to the
/// store's minutes every few seconds (each engine its own, so they add up across a cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepTally {
    /// The tenant whose steps these are.
    pub tenant: Namespace,
    /// Minutes since the Unix epoch of the results' recording.
    pub minute: i64,
    /// Results by run-time slot, as [`ActivityMinute::steps`].
    pub slots: [u64; LATENCY_SLOTS],
}

/// The slot a run time of `seconds` falls in.
pub fn latency_slot(seconds: f64) -> usize {
    LATENCY_BUCKETS
        .iter()
        .position(|bound| seconds <= *bound)
        .unwrap_or(LATENCY_BUCKETS.len())
}

/// The span a chart covers, and how many minutes each of its points sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActivityWindow {
    /// The last hour, a point a minute.
    #[default]
    Hour,
    /// The last day, a point every fifteen minutes.
    Day,
}

impl ActivityWindow {
    /// The window a `?window=` value names; anything else is the hour.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("day") => ActivityWindow::Day,
            _ => ActivityWindow::Hour,
        }
    }

    /// The name in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityWindow::Hour => "hour",
            ActivityWindow::Day => "day",
        }
    }

    /// How many minutes it spans.
    pub fn minutes(self) -> i64 {
        match self {
            ActivityWindow::Hour => 60,
            ActivityWindow::Day => 24 * 60,
        }
    }

    /// How many minutes one point sums.
    pub fn step_minutes(self) -> i64 {
        match self {
            ActivityWindow::Hour => 1,
            ActivityWindow::Day => 15,
        }
    }

    /// The first minute a window ending at `now` reads: its first point's start.
    pub fn since_minute(self, now: Millis) -> i64 {
        let step = self.step_minutes();
        let last = now.div_euclid(60_000).div_euclid(step) * step;
        last - self.minutes() + step
    }
}

/// One point of a chart: a window's step of minutes summed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivityPoint {
    /// When its first minute began.
    pub at: Millis,
    /// Runs started in it.
    pub started: u64,
    /// Runs completed in it.
    pub completed: u64,
    /// Runs failed, dead or rolled back in it.
    pub failed: u64,
    /// Runs cancelled in it.
    pub cancelled: u64,
    /// Step results recorded in it.
    pub steps: u64,
    /// The median step run time, seconds (none without steps).
    pub p50: Option<f64>,
    /// The 95th percentile step run time, seconds.
    pub p95: Option<f64>,
    /// The 99th percentile step run time, seconds.
    pub p99: Option<f64>,
}

/// The points of `window` ending at `now`, from the stored `minutes` (in any order; minutes
/// outside the window are ignored, missing ones count as quiet).
pub fn series(
    minutes: &[ActivityMinute],
    window: ActivityWindow,
    now: Millis,
) -> Vec<ActivityPoint> {
    let step = window.step_minutes();
    let first = window.since_minute(now);
    let count = (window.minutes() / step) as usize;
    let mut sums: Vec<ActivityMinute> = (0..count)
        .map(|i| ActivityMinute::at(first + i as i64 * step))
        .collect();
    for minute in minutes {
        let offset = minute.minute - first;
        if offset < 0 {
            continue;
        }
        let Some(sum) = sums.get_mut((offset / step) as usize) else {
            continue;
        };
        sum.started += minute.started;
        sum.completed += minute.completed;
        sum.failed += minute.failed;
        sum.cancelled += minute.cancelled;
        for (total, n) in sum.steps.iter_mut().zip(minute.steps) {
            *total += n;
        }
    }
    sums.into_iter()
        .map(|sum| ActivityPoint {
            at: sum.minute * 60_000,
            started: sum.started,
            completed: sum.completed,
            failed: sum.failed,
            cancelled: sum.cancelled,
            steps: sum.steps.iter().sum(),
            p50: quantile(&sum.steps, 0.5),
            p95: quantile(&sum.steps, 0.95),
            p99: quantile(&sum.steps, 0.99),
        })
        .collect()
}

/// The `q` quantile of run times counted in `slots`, interpolated linearly inside its bucket
/// (as `histogram_quantile` does); one past the last bound reads as the last bound. None when
/// nothing was counted.
pub fn quantile(slots: &[u64; LATENCY_SLOTS], q: f64) -> Option<f64> {
    let total: u64 = slots.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (i, n) in slots.iter().enumerate() {
        let upto = below + n;
        if *n > 0 && upto as f64 >= rank {
            let Some(upper) = LATENCY_BUCKETS.get(i) else {
                return LATENCY_BUCKETS.last().copied();
            };
            let lower = if i == 0 { 0.0 } else { LATENCY_BUCKETS[i - 1] };
            let within = (rank - below as f64) / *n as f64;
            return Some(lower + (upper - lower) * within);
        }
        below = upto;
    }
    LATENCY_BUCKETS.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute_with(minute: i64, slot: usize, n: u64) -> ActivityMinute {
        let mut m = ActivityMinute::at(minute);
        m.steps[slot] = n;
        m
    }

    #[test]
    fn slots_follow_the_bounds() {
        assert_eq!(latency_slot(0.0), 0);
        assert_eq!(latency_slot(0.001), 0);
        assert_eq!(latency_slot(0.0011), 1);
        assert_eq!(latency_slot(1.0), 9);
        assert_eq!(latency_slot(60.0), 13);
        assert_eq!(latency_slot(61.0), 14);
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket() {
        let mut slots = [0; LATENCY_SLOTS];
        assert_eq!(quantile(&slots, 0.5), None);
        // 100 results between 0.1 s and 0.25 s: the median halfway through the bucket.
        slots[7] = 100;
        let p50 = quantile(&slots, 0.5).unwrap();
        assert!((p50 - 0.175).abs() < 1e-9, "{p50}");
        // 90 fast (≤ 1 ms) and 10 slow (0.5 s to 1 s): p50 fast, p95 halfway up the slow one.
        let mut slots = [0; LATENCY_SLOTS];
        slots[0] = 90;
        slots[9] = 10;
        assert!(quantile(&slots, 0.5).unwrap() <= 0.001);
        let p95 = quantile(&slots, 0.95).unwrap();
        assert!((p95 - 0.75).abs() < 1e-9, "{p95}");
        // Past the last bound reads as the last bound.
        let mut slots = [0; LATENCY_SLOTS];
        slots[LATENCY_SLOTS - 1] = 3;
        assert_eq!(quantile(&slots, 0.99), Some(60.0));
    }

    #[test]
    fn a_window_sums_its_minutes_into_points() {
        let now = 1_000 * 60_000 + 30_000; // half past minute 1000
        let hour = series(
            &[
                minute_with(1000, 0, 2),
                minute_with(941, 0, 1),
                minute_with(940, 0, 9),  // just before the hour
                minute_with(1001, 0, 9), // not yet
            ],
            ActivityWindow::Hour,
            now,
        );
        assert_eq!(hour.len(), 60);
        assert_eq!(hour[0].at, 941 * 60_000);
        assert_eq!(hour[0].steps, 1);
        assert_eq!(hour[59].at, 1000 * 60_000);
        assert_eq!(hour[59].steps, 2);
        assert_eq!(hour.iter().map(|p| p.steps).sum::<u64>(), 3);

        let mut started = ActivityMinute::at(1000);
        started.count_run("started", 4);
        started.count_run("dead", 1);
        started.count_run("continued", 7);
        let day = series(&[started, minute_with(999, 1, 5)], ActivityWindow::Day, now);
        assert_eq!(day.len(), 96);
        let last = day.last().unwrap();
        // Minute 1000 opens the step of 990..1005, which holds 999 too.
        assert_eq!(last.at, 990 * 60_000);
        assert_eq!((last.started, last.failed, last.completed), (4, 1, 0));
        assert_eq!(last.steps, 5);
        assert!(last.p50.is_some());
    }
}
