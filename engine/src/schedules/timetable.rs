//! A schedule's fire times: a cron expression read on the wall clock of an IANA time zone, or a
//! fixed interval counted from the Unix epoch.
//!
//! Cron matches wall-clock times, and daylight saving time makes the wall clock skip an hour in
//! spring and repeat one in autumn. A [`Timetable`] walks the expression's matches in wall time
//! and maps each to an instant:
//! - a time the clock skips (02:30 on the spring change) fires once, at the change (03:00), and
//!   however many skipped times matched, the change fires once;
//! - a time the clock shows twice (01:30 on the autumn change) fires once, at its first showing.
//!
//! So a daily `30 2 * * *` fires every day, once, and `*/30 * * * *` fires 46 times on the
//! 23-hour day and 48 on the 25-hour one (the repeated hour's wall times fire once each).

use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::model::{Cadence, Interval, Millis, ScheduleError};

/// The shortest interval a schedule may fire at.
pub const MIN_EVERY: Interval = Interval::from_millis(1_000);

/// How many wall-clock matches one lookup walks before giving up: a repeated hour holds at most
/// 3,600 matches of a per-second expression.
const MAX_WALK: usize = 4_000;

/// When a schedule fires, parsed once.
#[derive(Clone, Debug)]
pub struct Timetable {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Cron { cron: Box<Cron>, tz: Tz },
    Every(Millis),
}

impl Timetable {
    /// Parses `cadence`, reading a cron expression in `timezone`; the error names what is wrong.
    pub fn new(cadence: &Cadence, timezone: &str) -> Result<Self, ScheduleError> {
        let tz = Tz::from_str(timezone)
            .map_err(|_| ScheduleError::Timezone(timezone.chars().take(60).collect()))?;
        let kind = match cadence {
            Cadence::Every(every) => {
                if *every < MIN_EVERY || every.as_millis() % 1_000 != 0 {
                    return Err(ScheduleError::Interval(format!(
                        "`every` is {every}; use whole seconds, {MIN_EVERY} at least"
                    )));
                }
                Kind::Every(every.as_millis())
            }
            Cadence::Cron(expr) => Kind::Cron {
                cron: Box::new(parse_cron(expr)?),
                tz,
            },
        };
        let table = Timetable { kind };
        if let Cadence::Cron(expr) = cadence
            && table.next_after(0).is_none()
        {
            return Err(ScheduleError::Never(expr.clone()));
        }
        Ok(table)
    }

    /// The first fire time strictly after `after`, or `None` if there is none (a cron
    /// expression naming a date that never comes again).
    pub fn next_after(&self, after: Millis) -> Option<Millis> {
        match &self.kind {
            Kind::Every(every) => after.div_euclid(*every).checked_add(1)?.checked_mul(*every),
            Kind::Cron { cron, tz } => next_cron(cron, tz, after),
        }
    }

    /// The interval, for a schedule that fires at one.
    pub fn interval(&self) -> Option<Millis> {
        match self.kind {
            Kind::Every(every) => Some(every),
            Kind::Cron { .. } => None,
        }
    }

    /// The next `n` fire times after `after`.
    pub fn upcoming(&self, after: Millis, n: usize) -> Vec<Millis> {
        let mut times = Vec::with_capacity(n);
        let mut at = after;
        while times.len() < n {
            match self.next_after(at) {
                Some(next) => {
                    times.push(next);
                    at = next;
                }
                None => break,
            }
        }
        times
    }
}

/// `at` on the wall clock of `timezone` (`2026-12-07 02:30:00 CET`), as a schedule's fire
/// times are shown; UTC if the zone is unknown.
pub fn wall_clock(at: Millis, timezone: &str) -> String {
    let tz = Tz::from_str(timezone).unwrap_or(Tz::UTC);
    DateTime::<Utc>::from_timestamp_millis(at)
        .map(|t| {
            t.with_timezone(&tz)
                .format("%Y-%m-%d %H:%M:%S %Z")
                .to_string()
        })
        .unwrap_or_default()
}

/// Five fields, or six with seconds first; `@daily` and friends too.
fn parse_cron(expr: &str) -> Result<Cron, ScheduleError> {
    let fields = expr.split_whitespace().count();
    let refuse = |reason: String| ScheduleError::Cron {
        expr: expr.chars().take(120).collect(),
        reason,
    };
    if expr.len() > 200 {
        return Err(refuse("it is longer than 200 characters".to_owned()));
    }
    if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(refuse(format!(
            "it has {fields} fields; write 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
        )));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| refuse(e.to_string()))
}

fn next_cron(cron: &Cron, tz: &Tz, after: Millis) -> Option<Millis> {
    let after_utc = DateTime::<Utc>::from_timestamp_millis(after)?;
    // The wall clock, written as if it were UTC, so the expression walks wall time.
    let mut cursor = after_utc.with_timezone(tz).naive_local().and_utc();
    for _ in 0..MAX_WALK {
        let wall = cron.find_next_occurrence(&cursor, false).ok()?;
        let at = instant(tz, wall.naive_utc())?;
        if at > after {
            return Some(at);
        }
        cursor = wall;
    }
    None
}

/// The instant a wall-clock time means in `tz`: its first showing if the clock shows it twice,
/// the end of the gap if the clock skips it.
fn instant(tz: &Tz, wall: NaiveDateTime) -> Option<Millis> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => Some(at.timestamp_millis()),
        LocalResult::None => gap_end(tz, wall),
    }
}

/// The first instant after a gap that holds `wall`: the wall time the clock jumps to, found by
/// halving (gaps are contiguous and at most a day long; Samoa skipped all of 2011-12-30).
fn gap_end(tz: &Tz, wall: NaiveDateTime) -> Option<Millis> {
    let valid = |w: NaiveDateTime| !matches!(tz.from_local_datetime(&w), LocalResult::None);
    let (mut skipped, mut shown) = (wall, wall + TimeDelta::hours(26));
    if !valid(shown) {
        return None;
    }
    while shown - skipped > TimeDelta::seconds(1) {
        let mid = skipped + (shown - skipped) / 2;
        if valid(mid) {
            shown = mid
        } else {
            skipped = mid
        }
    }
    let shown = shown.with_nanosecond(0)?;
    match tz.from_local_datetime(&shown) {
        LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => Some(at.timestamp_millis()),
        LocalResult::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> Millis {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("a time")
            .timestamp_millis()
    }

    fn local(tz: &str, ms: Millis) -> String {
        let tz = Tz::from_str(tz).expect("a zone");
        DateTime::<Utc>::from_timestamp_millis(ms)
            .expect("a time")
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string()
    }

    fn cron(expr: &str, tz: &str) -> Timetable {
        Timetable::new(&Cadence::Cron(expr.to_owned()), tz).expect("parses")
    }

    /// Fire times in `[from, to)`.
    fn fires(table: &Timetable, from: Millis, to: Millis) -> Vec<Millis> {
        let mut out = Vec::new();
        let mut at = from - 1;
        while let Some(next) = table.next_after(at).filter(|n| *n < to) {
            out.push(next);
            at = next;
        }
        out
    }

    #[test]
    fn five_and_six_fields_both_parse_and_seconds_count() {
        let minutes = cron("*/15 * * * *", "UTC");
        let start = at("2026-12-06T10:07:00Z");
        assert_eq!(
            minutes.upcoming(start, 2),
            vec![at("2026-12-06T10:15:00Z"), at("2026-12-06T10:30:00Z")]
        );
        let seconds = cron("*/10 * * * * *", "UTC");
        assert_eq!(
            seconds.upcoming(start, 2),
            vec![at("2026-12-06T10:07:10Z"), at("2026-12-06T10:07:20Z")]
        );
    }

    #[test]
    fn bad_expressions_and_zones_name_what_is_wrong() {
        let err = |expr: &str, tz: &str| {
            Timetable::new(&Cadence::Cron(expr.to_owned()), tz)
                .expect_err(expr)
                .to_string()
        };
        assert!(
            err("* * *", "UTC").contains("3 fields"),
            "{}",
            err("* * *", "UTC")
        );
        assert!(err("61 * * * *", "UTC").contains("61 * * * *"));
        assert!(err("0 0 30 2 *", "UTC").contains("never fires"));
        assert!(err("0 * * * *", "Mars/Olympus").contains("IANA"));
        let every = Timetable::new(&Cadence::Every(Interval::from_millis(10)), "UTC");
        assert!(
            every
                .expect_err("too short")
                .to_string()
                .contains("whole seconds")
        );
        let odd = Timetable::new(&Cadence::Every(Interval::from_millis(1_500)), "UTC");
        assert!(odd.is_err(), "a trigger's milliseconds never meet a tick's");
    }

    #[test]
    fn intervals_count_from_the_epoch_whatever_the_zone() {
        let every = Timetable::new(&Cadence::Every("15m".parse().expect("15m")), "Asia/Tokyo")
            .expect("parses");
        assert_eq!(
            every.upcoming(at("2026-12-06T10:07:00Z"), 2),
            vec![at("2026-12-06T10:15:00Z"), at("2026-12-06T10:30:00Z")]
        );
        assert_eq!(
            every.next_after(at("2026-12-06T10:15:00Z")),
            Some(at("2026-12-06T10:30:00Z"))
        );
    }

    /// America/New_York: 2026-03-08 02:00 EST → 03:00 EDT, 2026-11-01 02:00 EDT → 01:00 EST.
    /// Europe/Berlin: 2026-03-29 02:00 CET → 03:00 CEST, 2026-10-25 03:00 CEST → 02:00 CET.
    #[test]
    fn a_daily_time_in_a_skipped_or_repeated_hour_fires_once_in_two_zones() {
        let cases = [
            (
                "America/New_York",
                "30 2 * * *",
                "2026-03-06T12:00:00Z",
                "2026-03-08 03:00:00 EDT",
            ),
            (
                "America/New_York",
                "30 1 * * *",
                "2026-10-30T12:00:00Z",
                "2026-11-01 01:30:00 EDT",
            ),
            (
                "Europe/Berlin",
                "30 2 * * *",
                "2026-03-27T12:00:00Z",
                "2026-03-29 03:00:00 CEST",
            ),
            (
                "Europe/Berlin",
                "30 2 * * *",
                "2026-10-23T12:00:00Z",
                "2026-10-25 02:30:00 CEST",
            ),
        ];
        for (tz, expr, from, change_day) in cases {
            let table = cron(expr, tz);
            let from = at(from);
            let three_days = fires(&table, from, from + 3 * 86_400_000);
            let shown: Vec<String> = three_days.iter().map(|t| local(tz, *t)).collect();
            assert_eq!(shown.len(), 3, "{tz} {expr}: {shown:?}");
            assert_eq!(shown[1], change_day, "{tz} {expr}: {shown:?}");
        }
    }

    #[test]
    fn every_half_hour_fires_once_per_wall_time_across_both_changes_in_two_zones() {
        for (tz, spring, autumn) in [
            (
                "America/New_York",
                "2026-03-08T05:00:00Z",
                "2026-11-01T04:00:00Z",
            ),
            (
                "Europe/Berlin",
                "2026-03-28T23:00:00Z",
                "2026-10-24T22:00:00Z",
            ),
        ] {
            let table = cron("*/30 * * * *", tz);
            // The local day of each change, midnight to midnight.
            let spring_day = fires(&table, at(spring), at(spring) + 23 * 3_600_000);
            assert_eq!(spring_day.len(), 46, "{tz}: the 23-hour day");
            let autumn_day = fires(&table, at(autumn), at(autumn) + 25 * 3_600_000);
            assert_eq!(autumn_day.len(), 48, "{tz}: the 25-hour day");
            let mut walls: Vec<String> = autumn_day
                .iter()
                .map(|t| local(tz, *t)[11..16].to_owned())
                .collect();
            walls.dedup();
            assert_eq!(walls.len(), 48, "{tz}: each wall time once");
            assert!(spring_day.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn a_lookup_from_inside_the_repeated_hour_does_not_fire_it_again() {
        let table = cron("30 1 * * *", "America/New_York");
        // 01:10 EST, the second showing of the hour: 01:30 already fired at its first showing.
        let inside = at("2026-11-01T06:10:00Z");
        assert_eq!(
            local(
                "America/New_York",
                table.next_after(inside).expect("a tick")
            ),
            "2026-11-02 01:30:00 EST"
        );
    }
}
