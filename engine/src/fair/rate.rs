//! Rate allowances: at most `per_minute` takes in any rolling minute, as a generic cell rate
//! algorithm (GCRA). One number per allowance (its theoretical arrival time), so a shared
//! counter is one key a script updates atomically; a burst of up to `per_minute` is allowed
//! after a quiet minute, then takes are spaced evenly.
//!
//! The in-process transport applies [`take`] to a map; the Redis transport runs the same
//! arithmetic in Lua (`transport/redis/rates.rs`), and the conformance suite holds both to it.

use crate::model::Millis;

/// The window a `per_minute` allowance spans, in microseconds.
pub const WINDOW_US: i64 = 60_000_000;

/// One take's cost for `per_minute`, in microseconds.
pub fn interval_us(per_minute: u32) -> i64 {
    WINDOW_US / i64::from(per_minute.max(1))
}

/// Takes one at `now` from an allowance whose theoretical arrival time is `tat` (µs; `None` if
/// never taken): `Ok(new_tat)` to store, or `Err(wait)`, how many milliseconds until one is
/// free (at least 1).
pub fn take(tat: Option<i64>, now: Millis, per_minute: u32) -> Result<i64, Millis> {
    let now_us = now.saturating_mul(1000);
    let next = tat.unwrap_or(now_us).max(now_us) + interval_us(per_minute);
    let allowed_at = next - WINDOW_US;
    if allowed_at > now_us {
        Err(((allowed_at - now_us) + 999) / 1000)
    } else {
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_allowance_takes_a_burst_of_its_rate_then_spaces_takes_evenly() {
        let mut tat = None;
        for _ in 0..10 {
            tat = Some(take(tat, 1_000, 10).expect("within the burst"));
        }
        let wait = take(tat, 1_000, 10).expect_err("the eleventh in the same instant");
        assert_eq!(wait, 6_000, "one frees every 6 s at 10 a minute");
        assert!(take(tat, 1_000 + 5_999, 10).is_err());
        assert!(take(tat, 1_000 + 6_000, 10).is_ok());
    }

    #[test]
    fn an_idle_minute_buys_no_more_than_one_burst() {
        let mut tat = None;
        for _ in 0..3 {
            tat = Some(take(tat, 0, 3).unwrap());
        }
        // An hour later: three again, not sixty.
        let later = 3_600_000;
        for _ in 0..3 {
            tat = Some(take(tat, later, 3).unwrap());
        }
        assert!(take(tat, later, 3).is_err());
    }
}
