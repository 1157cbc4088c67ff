//! Units: human-friendly durations (`"30s"`, `"250ms"`, `"1m"`) and byte sizes
//! (`"64MiB"`, `"512KiB"`, `"1000"`) in configuration, and the two time units sluice keeps:
//! event time in [`Micros`], processing time (the wall clock) in [`Millis`].

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// Microseconds: event time (since 1970), or a span of it. Serialised as a plain number.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Micros(pub i64);

/// Milliseconds: processing time, the wall clock (since 1970), or a span of it. Serialised
/// as a plain number.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Millis(pub i64);

impl Micros {
    /// A span, saturating.
    pub fn from_duration(d: Duration) -> Micros {
        Micros(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    }

    /// `self - span`, saturating.
    pub fn saturating_sub(self, span: Micros) -> Micros {
        Micros(self.0.saturating_sub(span.0))
    }

    /// `self + span`, saturating.
    pub fn saturating_add(self, span: Micros) -> Micros {
        Micros(self.0.saturating_add(span.0))
    }
}

impl Millis {
    /// Processing time now: the wall clock when the process first asked, plus the
    /// monotonic time since. A step of the host's clock while sluice runs (an NTP
    /// correction, a VM resumed) therefore neither makes idle partitions jump the watermark
    /// forward, making on-time data late, nor moves processing time backwards.
    pub fn now() -> Millis {
        static ANCHOR: std::sync::OnceLock<(std::time::Instant, i64)> = std::sync::OnceLock::new();
        let (start, wall) = ANCHOR.get_or_init(|| (std::time::Instant::now(), Self::wall().0));
        Millis(wall.saturating_add(i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX)))
    }

    /// The host's wall clock now.
    pub fn wall() -> Millis {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        Millis(since.map_or(0, |d| d.as_millis() as i64))
    }

    /// A span, saturating.
    pub fn from_duration(d: Duration) -> Millis {
        Millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// The same time in microseconds, saturating.
    pub fn as_micros(self) -> Micros {
        Micros(self.0.saturating_mul(1000))
    }

    /// The span from `earlier` to `self`.
    pub fn since(self, earlier: Millis) -> Millis {
        Millis(self.0 - earlier.0)
    }
}

/// Parses `"250ms"`, `"30s"`, `"5m"`, `"1h"`, `"3d"` (a whole number and a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("duration {text:?} has no unit (use ms, s, m, h or d)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("duration {text:?} does not start with a whole number"))?;
    let millis = match unit.trim() {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        other => {
            return Err(format!(
                "duration {text:?} has unknown unit {other:?} (use ms, s, m, h or d)"
            ));
        }
    };
    millis
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration {text:?} is too large"))
}

/// A number of bytes, written as `"64MiB"`, `"512KiB"`, `"1GiB"`, `"10MB"` or plain bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n << 20)
    }

    /// `n` kibibytes.
    pub const fn kib(n: u64) -> Self {
        ByteSize(n << 10)
    }

    /// The size as a `usize`, saturating.
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if n >= 1 << shift && n.is_multiple_of(1 << shift) {
                return write!(f, "{}{unit}", n >> shift);
            }
        }
        write!(f, "{n}B")
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let n: u64 = number
            .parse()
            .map_err(|_| format!("size {text:?} does not start with a whole number"))?;
        let factor: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            other => {
                return Err(format!(
                    "size {text:?} has unknown unit {other:?} (use B, KiB, MiB, GiB, KB, MB or GB)"
                ));
            }
        };
        n.checked_mul(factor)
            .map(ByteSize)
            .ok_or_else(|| format!("size {text:?} is too large"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Writes `d` as the configuration does: a whole number of the largest unit that holds it
/// exactly (`"5m"`, `"90s"`, `"250ms"`, `"0s"`); what [`parse_duration`] reads back.
pub fn format_duration(d: Duration) -> String {
    let millis = d.as_millis();
    if millis == 0 {
        return "0s".into();
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if millis >= size && millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// The JSON schema of a duration written as text (`"30s"`), for the fields that read one
/// through [`duration`] or [`optional_duration`]: `#[schemars(with = "DurationText")]`.
pub struct DurationText;

impl schemars::JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+ *(ms|s|m|h|d)$",
            "x-sluice-unit": "duration",
        })
    }
}

impl schemars::JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["string", "integer"],
            "pattern": "^[0-9]+ *(B|KiB|MiB|GiB|KB|kB|MB|GB)?$",
            "minimum": 0,
            "x-sluice-unit": "size",
        })
    }
}

/// Written as [`ByteSize`]'s display (`"64MiB"`), which its `Deserialize` reads back (the
/// configuration reference shows defaults this way).
impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Serde adapter: a [`Duration`] written as `"30s"`. Use with `#[serde(with = "crate::units::duration")]`.
pub mod duration {
    use super::*;

    /// Writes a duration as text like `"30s"` ([`format_duration`]).
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }

    /// Deserialises a duration from text like `"30s"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde adapter: an optional [`Duration`] written as `"30s"`. Use with
/// `#[serde(default, with = "crate::units::optional_duration")]`.
pub mod optional_duration {
    use super::*;

    /// Writes a present duration as text like `"30s"`, an absent one as nothing.
    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    /// Deserialises a present duration from text like `"30s"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::duration::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_they_are_read() {
        for (millis, text) in [
            (0, "0s"),
            (250, "250ms"),
            (1_500, "1500ms"),
            (90_000, "90s"),
            (300_000, "5m"),
            (7_200_000, "2h"),
            (172_800_000, "2d"),
        ] {
            let d = Duration::from_millis(millis);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
        assert_eq!(
            serde_json::to_value(ByteSize::mib(64)).unwrap(),
            serde_json::json!("64MiB")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("3 days")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn time_units() {
        assert_eq!(Millis(1_500).as_micros(), Micros(1_500_000));
        assert_eq!(
            Micros::from_duration(Duration::from_secs(2)),
            Micros(2_000_000)
        );
        assert_eq!(Millis::from_duration(Duration::from_secs(2)), Millis(2_000));
        assert_eq!(
            Micros(5).saturating_sub(Micros(i64::MAX)),
            Micros(5 - i64::MAX)
        );
        assert_eq!(Millis(9).since(Millis(4)), Millis(5));
        assert_eq!(serde_json::to_string(&Micros(7)).unwrap(), "7");
        assert_eq!(serde_json::from_str::<Millis>("8").unwrap(), Millis(8));
    }

    #[test]
    fn sizes() {
        assert_eq!("64MiB".parse(), Ok(ByteSize::mib(64)));
        assert_eq!("512KiB".parse(), Ok(ByteSize::kib(512)));
        assert_eq!("10MB".parse(), Ok(ByteSize(10_000_000)));
        assert_eq!("100".parse(), Ok(ByteSize(100)));
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize::mib(64).to_string(), "64MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
    }
}
