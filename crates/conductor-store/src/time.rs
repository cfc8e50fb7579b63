//! Timestamps as the protocol writes them: RFC 3339, UTC, whole seconds, ending in `Z`.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, serialized as `2026-01-17T10:30:00Z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// Parse an RFC 3339 timestamp (any offset), truncated to whole seconds.
    pub fn parse(s: &str) -> Option<Timestamp> {
        let t = DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&Utc);
        Some(Timestamp::from_datetime(t))
    }

    /// Parse an RFC 3339 `date-time` exactly as JSON Schema's `format: "date-time"` defines it
    /// (the language `schemas/defs.schema.json#/$defs/date_time` publishes): `YYYY-MM-DD`, `T`
    /// or `t`, `HH:MM:SS`, optional `.` and fraction digits, then `Z`, `z` or `+HH:MM`/`-HH:MM`.
    /// Days are checked against the month and leap years; a leap second (`:60`) is accepted only
    /// where it falls on 23:59 UTC and is read as `:59`. The fraction is dropped.
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            let d = b.get(r)?;
            d.iter().try_fold(0u32, |n, c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
            return None;
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        let mut i = 19;
        if b[i] == b'.' {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            i += 1 + digits;
        }
        let offset_minutes: i64 = match b.get(i)? {
            b'Z' | b'z' if i + 1 == b.len() => 0,
            sign @ (b'+' | b'-') if b.len() - i == 6 && b[i + 3] == b':' => {
                let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                let m = i64::from(oh * 60 + om);
                if *sign == b'+' { m } else { -m }
            }
            _ => return None,
        };
        let date = chrono::NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
        let local = date.and_hms_opt(hour, minute, second.min(59))?;
        let utc = local - chrono::TimeDelta::minutes(offset_minutes);
        if second == 60
            && !(chrono::Timelike::hour(&utc) == 23 && chrono::Timelike::minute(&utc) == 59)
        {
            return None;
        }
        Some(Timestamp(utc.and_utc()))
    }

    fn from_datetime(t: DateTime<Utc>) -> Timestamp {
        Timestamp(DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t))
    }

    /// The current time, or `CONDUCTOR_NOW` when set (tests pin the clock with it).
    pub fn now() -> Timestamp {
        if let Some(t) = std::env::var("CONDUCTOR_NOW")
            .ok()
            .and_then(|s| Timestamp::parse(&s))
        {
            return t;
        }
        Timestamp::from_datetime(Utc::now())
    }

    /// Whole minutes from `self` to `later` (0 if `later` is earlier).
    pub fn minutes_until(self, later: Timestamp) -> u64 {
        ((later.0 - self.0).num_seconds().max(0) / 60) as u64
    }

    /// Whole seconds from `self` to `later` (0 if `later` is earlier).
    pub fn seconds_until(self, later: Timestamp) -> u64 {
        (later.0 - self.0).num_seconds().max(0) as u64
    }

    /// `self` minus a number of minutes, saturating at the earliest representable time.
    pub fn minus_minutes(self, minutes: u64) -> Timestamp {
        i64::try_from(minutes)
            .ok()
            .and_then(chrono::TimeDelta::try_minutes)
            .and_then(|d| self.0.checked_sub_signed(d))
            .map_or(Timestamp(DateTime::<Utc>::MIN_UTC), Timestamp)
    }

    /// A compact form for file names: `20260117T103000Z`.
    pub fn compact(self) -> String {
        self.0.format("%Y%m%dT%H%M%SZ").to_string()
    }
}

/// Parse a duration like `500ms`, `30s`, `5m`, `2h`, `1d` or a plain number of seconds.
/// `forever` (or `inf`) is `None`: no limit.
pub fn parse_duration(s: &str) -> Result<Option<std::time::Duration>, String> {
    let t = s.trim();
    if t == "forever" || t == "inf" {
        return Ok(None);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (like 500ms, 30s, 5m, 2h)"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" | "sec" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86_400.0,
        _ => return Err(format!("`{s}` has an unknown unit (use ms, s, m, h or d)")),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Some(std::time::Duration::from_secs_f64(secs)))
}

/// A duration as a person writes it ([`parse_duration`] reads it back): `500ms`, `2s`, `1.5s`, `5m`, `2h`.
pub fn format_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A time limit from the command line: `None` is no limit (`forever`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<std::time::Duration>);

/// [`parse_duration`] as a clap value parser.
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    parse_duration(s).map(Limit)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Secs, true))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse_rfc3339(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 date-time: {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_the_spec() {
        let t = Timestamp::parse("2026-01-17T11:30:00.789+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-01-17T10:30:00Z");
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-01-17T10:30:00Z\""
        );
    }

    #[test]
    fn minutes_between() {
        let a = Timestamp::parse("2026-01-17T09:45:00Z").unwrap();
        let b = Timestamp::parse("2026-01-17T10:30:59Z").unwrap();
        assert_eq!(a.minutes_until(b), 45);
        assert_eq!(b.minutes_until(a), 0);
        assert_eq!(b.minus_minutes(60).to_string(), "2026-01-17T09:30:59Z");
        // Huge ages saturate instead of panicking (`history --since 6000000000000d`).
        assert!(b.minus_minutes(u64::MAX) < b.minus_minutes(60));
        assert!(b.minus_minutes(8_640_000_000_000_000) < b);
    }
}
