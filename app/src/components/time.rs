//! Time formatting that gives the same text on the server and in the browser (so hydration
//! matches): absolute UTC from epoch milliseconds, no clock reads.

use durable::model::Millis;

/// `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn utc(ms: Millis) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A duration in milliseconds, readable.
pub fn duration(ms: Millis) -> String {
    match ms {
        ms if ms < 1000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms => format!("{}m {}s", ms / 60_000, ms % 60_000 / 1000),
    }
}

/// How long ago something happened, `elapsed` milliseconds before the reference time.
pub fn ago(elapsed: Millis) -> String {
    let s = elapsed.max(0) / 1000;
    match s {
        0..=9 => "just now".into(),
        10..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// Midnight UTC of a `YYYY-MM-DD` date, in epoch milliseconds; `None` if it is not one. (The
/// server checks filters; the browser never needs this.)
#[cfg(any(feature = "ssr", test))]
pub fn parse_date(raw: &str) -> Option<Millis> {
    let mut parts = raw.trim().splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // H. Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = days * 86_400_000;
    // Reject dates that do not exist (2026-02-30 rolls over).
    (utc(ms).get(..10)
        == Some(&format!(
            "{:04}-{m:02}-{d:02}",
            if m <= 2 { y + 1 } else { y }
        )))
    .then_some(ms)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_to_utc_midnight_and_bad_ones_are_refused() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(
            parse_date("2026-11-29").map(utc).as_deref(),
            Some("2026-11-29 00:00:00")
        );
        assert_eq!(
            parse_date("2024-02-29").map(utc).as_deref(),
            Some("2024-02-29 00:00:00")
        );
        for bad in ["", "2026-13-01", "2026-02-30", "yesterday", "2026-1"] {
            assert_eq!(parse_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_795_939_520_882), "2026-11-29 08:05:20");
        assert_eq!(duration(250), "250 ms");
        assert_eq!(duration(1500), "1.5 s");
        assert_eq!(duration(61_000), "1m 1s");
        assert_eq!(ago(-5), "just now");
        assert_eq!(ago(42_000), "42 s ago");
        assert_eq!(ago(7_200_000), "2 h ago");
        assert_eq!(ago(3 * 86_400_000), "3 d ago");
    }
}
