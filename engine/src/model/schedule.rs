//! Schedules: a tenant's standing order to start a workflow on a cron expression or a fixed
//! interval. The types here are what the API, the CLI and the dashboard show and send; the
//! engine's `schedules` module computes fire times and fires ticks.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, Namespace, RunId};

/// The name a tenant gives a schedule; unique within the tenant. It becomes part of the ids of
/// the runs the schedule starts, so it is held to the run id's alphabet.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ScheduleId(String);

/// The longest schedule id: a tick's run id is `<schedule>-<UTC stamp>-<key>`, which must stay
/// within a run id's 200 characters.
pub const MAX_SCHEDULE_ID_CHARS: usize = 100;

impl ScheduleId {
    /// Checks the shape of a schedule id from a URL, a form or a body.
    pub fn parse(raw: &str) -> Result<Self, ScheduleError> {
        let ok = (1..=MAX_SCHEDULE_ID_CHARS).contains(&raw.len())
            && raw.starts_with(|c: char| c.is_ascii_alphanumeric())
            && raw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(ScheduleId(raw.to_owned()))
        } else {
            Err(ScheduleError::Id(raw.chars().take(120).collect()))
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ScheduleId {
    type Error = ScheduleError;
    fn try_from(raw: String) -> Result<Self, Self::Error> {
        ScheduleId::parse(&raw)
    }
}

impl From<ScheduleId> for String {
    fn from(id: ScheduleId) -> Self {
        id.0
    }
}

impl fmt::Display for ScheduleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A span of time written the way people write it (`2s`, `15m`, `1h30m`, `1d`), kept in
/// milliseconds; shown back in the same form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval(Millis);

const UNITS: [(&str, Millis); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// The longest interval a schedule accepts: a year is already more than any cadence needs.
const MAX_INTERVAL: Millis = 366 * 86_400_000;

impl Interval {
    /// An interval of `ms` milliseconds.
    pub const fn from_millis(ms: Millis) -> Self {
        Interval(ms)
    }

    /// Its length in milliseconds.
    pub const fn as_millis(self) -> Millis {
        self.0
    }
}

impl FromStr for Interval {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let fail = || {
            format!(
                "`{}` is not a duration: write a number and a unit, such as `30s`, `15m`, `1h30m` or `1d` (units d, h, m, s, ms)",
                raw.chars().take(40).collect::<String>()
            )
        };
        let text = raw.trim();
        if text.is_empty() || text.len() > 40 {
            return Err(fail());
        }
        let mut total: Millis = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 12 {
                return Err(fail());
            }
            let n: Millis = rest[..digits].parse().map_err(|_| fail())?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            let unit = &rest[..unit_len];
            let (_, scale) = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(fail)?;
            total = n
                .checked_mul(*scale)
                .and_then(|ms| total.checked_add(ms))
                .filter(|ms| *ms <= MAX_INTERVAL)
                .ok_or_else(|| format!("`{text}` is longer than the longest allowed, 366d"))?;
            rest = &rest[unit_len..];
        }
        Ok(Interval(total))
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        let mut left = self.0;
        for (unit, scale) in UNITS {
            if left >= scale {
                write!(f, "{}{unit}", left / scale)?;
                left %= scale;
            }
        }
        Ok(())
    }
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        raw.parse().map_err(serde::de::Error::custom)
    }
}

/// When a schedule fires: a cron expression read in the schedule's time zone (five fields, or
/// six with seconds first), or a fixed interval counted from the Unix epoch, so that `15m`
/// fires at :00, :15, :30 and :45 whoever created it and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cadence {
    /// A cron expression.
    Cron(String),
    /// A fixed interval.
    Every(Interval),
}

impl fmt::Display for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cadence::Cron(expr) => write!(f, "cron {expr}"),
            Cadence::Every(every) => write!(f, "every {every}"),
        }
    }
}

/// What a tick does while the schedule's previous run is still going.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The tick is dropped.
    #[default]
    Skip,
    /// The tick waits for the previous run to end, then starts; one waits at most, and a
    /// later tick finding one waiting is dropped.
    BufferOne,
    /// The tick starts a run anyway.
    AllowAll,
    /// The previous run is cancelled and the tick starts a run.
    CancelPrevious,
}

impl Overlap {
    /// Every policy, in the order a form lists them.
    pub const ALL: [Overlap; 4] = [
        Overlap::Skip,
        Overlap::BufferOne,
        Overlap::AllowAll,
        Overlap::CancelPrevious,
    ];

    /// The policy's name on the API and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::AllowAll => "allow_all",
            Overlap::CancelPrevious => "cancel_previous",
        }
    }
}

impl FromStr for Overlap {
    type Err = ScheduleError;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Overlap::ALL
            .into_iter()
            .find(|o| o.as_str() == raw)
            .ok_or_else(|| ScheduleError::Overlap(raw.chars().take(40).collect()))
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a schedule is told to do: everything a caller sets when creating one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    /// The workflow each tick starts.
    pub workflow: String,
    /// The input each run gets.
    pub input: Value,
    /// When it fires (`"cron": ...` or `"every": ...` beside the other fields).
    #[serde(flatten)]
    pub cadence: Cadence,
    /// The IANA time zone a cron expression is read in (`UTC`, `Europe/Berlin`).
    pub timezone: String,
    /// What a tick does while the previous run is still going.
    pub overlap: Overlap,
    /// How far back ticks missed while no control plane ran are still fired; older ones are
    /// counted as missed.
    pub catchup_window: Interval,
    /// Each tick fires up to this long after its time, by an amount fixed per tick, to spread
    /// load when many schedules share a time.
    pub jitter: Interval,
    /// A paused schedule fires nothing until resumed.
    pub paused: bool,
}

impl ScheduleSpec {
    /// The catch-up window a schedule gets when none is given.
    pub const DEFAULT_CATCHUP: Interval = Interval::from_millis(60_000);
}

/// What one tick did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TickOutcome {
    /// A run was started.
    Started,
    /// The previous run was cancelled and a run started.
    Replaced,
    /// Dropped: the previous run was still going (or one tick already waited).
    Skipped,
    /// Waiting for the previous run to end.
    Buffered,
    /// Older than the catch-up window when a control plane came to it.
    Missed,
    /// The engine refused the start (an unknown workflow, a plan's ceiling); see the message.
    Refused,
}

/// The last tick a schedule handled, for the list and the detail page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickRecord {
    /// The tick's time (a trigger's: when it was asked for).
    pub tick: Millis,
    /// When it was handled.
    pub at: Millis,
    /// What it did.
    pub outcome: TickOutcome,
    /// The run it started, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// Why it was refused, or how many ticks were missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A schedule as stored and shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its id within its tenant.
    pub id: ScheduleId,
    /// Its tenant.
    pub namespace: Namespace,
    /// What it does.
    #[serde(flatten)]
    pub spec: ScheduleSpec,
    /// The time of the next tick (before jitter); `None` once a cron expression has no more.
    pub next_tick: Option<Millis>,
    /// A tick waiting for the previous run to end (overlap `buffer_one`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffered: Option<Millis>,
    /// The run the schedule started last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunId>,
    /// The last tick handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<TickRecord>,
    /// Ticks older than the catch-up window when a control plane came to them, in all.
    #[serde(default)]
    pub missed: u64,
    /// Random per schedule, part of its runs' ids: a run another tenant names can never be
    /// taken for one of this schedule's ticks.
    pub key: String,
    /// When it was created.
    pub created_at: Millis,
    /// When it was last changed by a caller.
    pub updated_at: Millis,
}

/// A change to a schedule; `None` leaves a field as it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulePatch {
    /// A new workflow.
    pub workflow: Option<String>,
    /// A new input.
    pub input: Option<Value>,
    /// A new cadence.
    pub cadence: Option<Cadence>,
    /// A new time zone.
    pub timezone: Option<String>,
    /// A new overlap policy.
    pub overlap: Option<Overlap>,
    /// A new catch-up window.
    pub catchup_window: Option<Interval>,
    /// A new jitter.
    pub jitter: Option<Interval>,
    /// Pause or resume.
    pub paused: Option<bool>,
}

impl SchedulePatch {
    /// The change that pauses (`true`) or resumes (`false`) a schedule.
    pub fn pausing(paused: bool) -> Self {
        SchedulePatch {
            paused: Some(paused),
            ..SchedulePatch::default()
        }
    }

    /// Whether the change moves the fire times (so the next tick is counted afresh from now).
    pub fn retimes(&self) -> bool {
        self.cadence.is_some()
            || self.timezone.is_some()
            || self.jitter.is_some()
            || self.paused.is_some()
    }

    /// `spec` with this change applied.
    pub fn apply(&self, spec: &ScheduleSpec) -> ScheduleSpec {
        let mut next = spec.clone();
        if let Some(w) = &self.workflow {
            next.workflow.clone_from(w);
        }
        if let Some(i) = &self.input {
            next.input = i.clone();
        }
        if let Some(c) = &self.cadence {
            next.cadence = c.clone();
        }
        if let Some(t) = &self.timezone {
            next.timezone.clone_from(t);
        }
        if let Some(o) = self.overlap {
            next.overlap = o;
        }
        if let Some(c) = self.catchup_window {
            next.catchup_window = c;
        }
        if let Some(j) = self.jitter {
            next.jitter = j;
        }
        if let Some(p) = self.paused {
            next.paused = p;
        }
        next
    }
}

/// A schedule as a caller writes it (the API's body, the dashboard's form, the CLI's flags):
/// every field optional and in words, read into a [`ScheduleSpec`] to create one or a
/// [`SchedulePatch`] to change one, with an error that names the field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFields {
    /// The schedule's id (when creating; a change may repeat it, not alter it).
    #[serde(default)]
    pub id: Option<String>,
    /// The workflow to start.
    #[serde(default)]
    pub workflow: Option<String>,
    /// The runs' input (`null` when creating without one).
    #[serde(default)]
    pub input: Option<Value>,
    /// A cron expression.
    #[serde(default)]
    pub cron: Option<String>,
    /// An interval (`15m`).
    #[serde(default)]
    pub every: Option<String>,
    /// An IANA time zone (`UTC` when creating without one).
    #[serde(default)]
    pub timezone: Option<String>,
    /// An overlap policy (`skip` when creating without one).
    #[serde(default)]
    pub overlap: Option<String>,
    /// A catch-up window (`1m` when creating without one).
    #[serde(default)]
    pub catchup_window: Option<String>,
    /// A jitter (`0s` when creating without one).
    #[serde(default)]
    pub jitter: Option<String>,
    /// Whether it starts paused / pause or resume it.
    #[serde(default)]
    pub paused: Option<bool>,
}

impl ScheduleFields {
    /// The id and what to create, with defaults for what is not given.
    pub fn create(&self) -> Result<(ScheduleId, ScheduleSpec), ScheduleError> {
        let id = ScheduleId::parse(self.id.as_deref().ok_or(ScheduleError::Missing("id"))?)?;
        let patch = self.patch()?;
        let spec = ScheduleSpec {
            workflow: patch.workflow.ok_or(ScheduleError::Missing("workflow"))?,
            input: patch.input.unwrap_or(Value::Null),
            cadence: patch.cadence.ok_or(ScheduleError::Cadence)?,
            timezone: patch.timezone.unwrap_or_else(|| "UTC".to_owned()),
            overlap: patch.overlap.unwrap_or_default(),
            catchup_window: patch
                .catchup_window
                .unwrap_or(ScheduleSpec::DEFAULT_CATCHUP),
            jitter: patch.jitter.unwrap_or_default(),
            paused: patch.paused.unwrap_or(false),
        };
        Ok((id, spec))
    }

    /// The change these fields make; `cron` and `every` together are refused.
    pub fn patch(&self) -> Result<SchedulePatch, ScheduleError> {
        let cadence = match (&self.cron, &self.every) {
            (Some(_), Some(_)) => return Err(ScheduleError::Cadence),
            (Some(cron), None) => Some(Cadence::Cron(cron.trim().to_owned())),
            (None, Some(every)) => Some(Cadence::Every(
                every.parse().map_err(ScheduleError::Interval)?,
            )),
            (None, None) => None,
        };
        let interval = |field: &'static str, raw: &Option<String>| {
            raw.as_deref()
                .map(|r| {
                    r.parse::<Interval>()
                        .map_err(|e| ScheduleError::Interval(format!("`{field}`: {e}")))
                })
                .transpose()
        };
        Ok(SchedulePatch {
            workflow: self.workflow.as_ref().map(|w| w.trim().to_owned()),
            input: self.input.clone(),
            cadence,
            timezone: self.timezone.as_ref().map(|t| t.trim().to_owned()),
            overlap: self.overlap.as_deref().map(str::parse).transpose()?,
            catchup_window: interval("catchup_window", &self.catchup_window)?,
            jitter: interval("jitter", &self.jitter)?,
            paused: self.paused,
        })
    }
}

/// Why a schedule was refused, in words that name the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The id has the wrong shape.
    #[error(
        "`{0}` is not a schedule id: use 1 to 100 letters, digits, `_`, `-` or `.`, starting with a letter or digit"
    )]
    Id(String),
    /// The cron expression does not parse.
    #[error("cron expression `{expr}` is invalid: {reason}")]
    Cron {
        /// The expression.
        expr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The cron expression never matches (`0 0 30 2 *`).
    #[error("cron expression `{0}` never fires (no such date); check the day and month fields")]
    Never(String),
    /// The time zone is not an IANA name.
    #[error(
        "`{0}` is not a time zone: use an IANA name such as `UTC`, `Europe/Berlin` or `America/New_York`"
    )]
    Timezone(String),
    /// An interval, catch-up window or jitter is malformed or out of range.
    #[error("{0}")]
    Interval(String),
    /// A field a new schedule needs was not given.
    #[error("a schedule needs `{0}`")]
    Missing(&'static str),
    /// Neither or both of `cron` and `every` were given.
    #[error("give exactly one of `cron` (such as `*/5 * * * *`) and `every` (such as `15m`)")]
    Cadence,
    /// The overlap policy is unknown.
    #[error("`{0}` is not an overlap policy: use skip, buffer_one, allow_all or cancel_previous")]
    Overlap(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_and_print_the_way_people_write_them() {
        for (text, ms, shown) in [
            ("2s", 2_000, "2s"),
            ("15m", 900_000, "15m"),
            ("1h30m", 5_400_000, "1h30m"),
            ("90m", 5_400_000, "1h30m"),
            ("1d", 86_400_000, "1d"),
            ("250ms", 250, "250ms"),
        ] {
            let every: Interval = text.parse().expect(text);
            assert_eq!(every.as_millis(), ms, "{text}");
            assert_eq!(every.to_string(), shown, "{text}");
        }
        for bad in [
            "",
            "5",
            "m",
            "5 m",
            "-5s",
            "5w",
            "1h-",
            "999999999999d",
            "400d",
        ] {
            assert!(bad.parse::<Interval>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn schedule_ids_keep_to_the_run_id_alphabet() {
        assert!(ScheduleId::parse("nightly-report.v2").is_ok());
        for bad in ["", "-x", "a b", "a:b", "a@b", &"x".repeat(101)] {
            assert!(ScheduleId::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn overlap_policies_read_back_by_name() {
        for o in Overlap::ALL {
            assert_eq!(o.as_str().parse::<Overlap>(), Ok(o));
        }
        assert!("skip_all".parse::<Overlap>().is_err());
    }
}
