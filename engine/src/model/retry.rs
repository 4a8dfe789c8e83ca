use serde::{Deserialize, Serialize};

/// How a failed step is retried: up to `max_attempts` tries in all, waiting
/// `initial_ms * factor^(n-1)` (capped at `max_ms`) before try `n + 1`, give or take `jitter`
/// (a fraction). Stored with the step's checkpoint, so retries survive restarts. A failure the
/// handler marks fatal is never retried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Tries in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Wait before the second try.
    pub initial_ms: u64,
    /// Growth per try (1.0 = fixed backoff).
    pub factor: f64,
    /// The longest wait.
    pub max_ms: u64,
    /// Random spread, as a fraction of the wait (0.2 = ±20%).
    pub jitter: f64,
}

impl Default for RetryPolicy {
    /// Three tries, 1 s then 2 s, ±20%.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_ms: 1000,
            factor: 2.0,
            max_ms: 60_000,
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The wait after failed try `attempt` (1-based), with `spread` in `[-1, 1]` picking where
    /// in the jitter band it lands.
    pub fn delay_ms(&self, attempt: u32, spread: f64) -> u64 {
        let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base =
            (self.initial_ms as f64 * self.factor.max(1.0).powi(exp)).min(self.max_ms as f64);
        let jittered = base * (1.0 + self.jitter.clamp(0.0, 1.0) * spread.clamp(-1.0, 1.0));
        jittered.max(0.0).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters_within_its_band() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_ms: 100,
            factor: 2.0,
            max_ms: 1000,
            jitter: 0.5,
        };
        assert_eq!(
            [1, 2, 3, 4, 5, 9].map(|a| p.delay_ms(a, 0.0)),
            [100, 200, 400, 800, 1000, 1000]
        );
        assert_eq!(p.delay_ms(1, 1.0), 150);
        assert_eq!(p.delay_ms(1, -1.0), 50);
        let fixed = RetryPolicy {
            factor: 1.0,
            jitter: 0.0,
            ..p
        };
        assert_eq!([1, 2, 7].map(|a| fixed.delay_ms(a, 0.9)), [100, 100, 100]);
    }
}
