//! Human units in the config: durations (`15ms`), byte sizes (`16KiB`), bandwidths (`34mbit`)
//! and percentages (`25%`).
//!
//! Each newtype parses with `FromStr`, prints a canonical form with `Display` that parses back
//! to the same value, serializes as that string, and deserializes from a string or a number.
//! Numbers are turned into their decimal text and parsed like strings, so `rtt: 0` and
//! `rtt: "0"` behave the same, and `rtt: 15` gets the same "add a unit" message as `"15"`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// Why a value (duration, size, bandwidth, percentage, address) did not parse. The message
/// quotes the input and says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(String);

impl ValueError {
    pub(crate) fn new(kind: &str, input: &str, reason: impl fmt::Display) -> Self {
        ValueError(format!("invalid {kind} '{input}': {reason}"))
    }
}

/// Why the number in front of a unit is not usable.
enum NumberError {
    Negative,
    Malformed,
    TooLarge,
}

/// A non-negative decimal split from its unit: `1.5ms` is mantissa 15, scale 1, unit `ms`.
/// Kept as an integer so `1.1s` is exactly 1,100,000,000 ns (no float rounding).
struct Number<'a> {
    mantissa: u128,
    scale: u32,
    unit: &'a str,
}

impl<'a> Number<'a> {
    fn split(input: &'a str) -> Result<Self, NumberError> {
        let s = input.trim();
        if s.starts_with('-') {
            return Err(NumberError::Negative);
        }
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (digits, unit) = s.split_at(end);
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(NumberError::Malformed);
        }
        // Trailing zeros carry no value; dropping them keeps `1.000000s` from overflowing.
        let frac = frac.trim_end_matches('0');
        // 10^38 is the largest power of ten a u128 holds.
        let scale = u32::try_from(frac.len()).ok().filter(|s| *s <= 38).ok_or(NumberError::TooLarge)?;
        let mut mantissa: u128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(u128::from(b - b'0')))
                .ok_or(NumberError::TooLarge)?;
        }
        Ok(Number { mantissa, scale, unit: unit.trim_start() })
    }

    fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// `mantissa × multiplier / 10^scale`, or `None` when that is not a whole number; the
    /// outer error is overflow.
    fn times(&self, multiplier: u128) -> Result<Option<u128>, NumberError> {
        let product = self.mantissa.checked_mul(multiplier).ok_or(NumberError::TooLarge)?;
        let divisor = 10u128.pow(self.scale);
        Ok((product % divisor == 0).then_some(product / divisor))
    }
}

/// Writes `value` in the largest of `units` (largest first) that divides it exactly.
fn write_in_units(f: &mut fmt::Formatter<'_>, value: u128, units: &[(&str, u128)], fallback: &str) -> fmt::Result {
    for (name, size) in units {
        if value.is_multiple_of(*size) {
            return write!(f, "{}{name}", value / size);
        }
    }
    write!(f, "{value}{fallback}")
}

/// Serialize as the `Display` string; deserialize from a string or a number (see module docs).
macro_rules! text_serde {
    ($ty:ty, $expecting:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl de::Visitor<'_> for Visitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                }
                deserializer.deserialize_any(Visitor)
            }
        }
    };
}

const NS_PER_US: u128 = 1_000;
const NS_PER_MS: u128 = 1_000_000;
const NS_PER_S: u128 = 1_000_000_000;

/// Units a duration prints in, largest first.
const DURATION_UNITS: &[(&str, u128)] =
    &[("h", 3600 * NS_PER_S), ("m", 60 * NS_PER_S), ("s", NS_PER_S), ("ms", NS_PER_MS), ("us", NS_PER_US)];

/// A duration written with a unit: `250us` (or `250µs`), `15ms`, `1.5s`, `2m`, `8h`; `0` alone
/// needs no unit. `ns` is accepted too so that every `Duration` has a form that parses back.
/// Prints in the largest unit that divides it exactly (`1.5s` prints as `1500ms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    /// Zero: "none" or "never", depending on the key.
    pub const ZERO: HumanDuration = HumanDuration(Duration::ZERO);

    /// `n` microseconds.
    pub const fn from_micros(n: u64) -> Self {
        HumanDuration(Duration::from_micros(n))
    }

    /// `n` milliseconds.
    pub const fn from_millis(n: u64) -> Self {
        HumanDuration(Duration::from_millis(n))
    }

    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Self {
        HumanDuration(Duration::from_secs(n))
    }

    /// The `std` duration.
    pub const fn get(self) -> Duration {
        self.0
    }

    /// True for a zero duration.
    pub const fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<Duration> for HumanDuration {
    fn from(d: Duration) -> Self {
        HumanDuration(d)
    }
}

impl From<HumanDuration> for Duration {
    fn from(d: HumanDuration) -> Self {
        d.0
    }
}

impl FromStr for HumanDuration {
    type Err = ValueError;

    fn from_str(input: &str) -> Result<Self, ValueError> {
        let bad = |reason: &str| ValueError::new("duration", input, reason);
        let garbage = "expected a number with a unit (us, ms, s, m, h)";
        let n = Number::split(input).map_err(|e| match e {
            NumberError::Negative => bad("must not be negative"),
            NumberError::Malformed => bad(garbage),
            NumberError::TooLarge => bad("too large"),
        })?;
        let per_unit = match n.unit {
            "" if n.is_zero() => return Ok(HumanDuration::ZERO),
            "" => {
                let hint = format!("add a unit, e.g. {}ms", input.trim());
                return Err(ValueError::new("duration", input, hint));
            }
            "h" => 3600 * NS_PER_S,
            "m" => 60 * NS_PER_S,
            "s" => NS_PER_S,
            "ms" => NS_PER_MS,
            "us" | "µs" | "μs" => NS_PER_US,
            "ns" => 1,
            _ => return Err(bad(garbage)),
        };
        let nanos = n.times(per_unit).map_err(|_| bad("too large"))?.ok_or_else(|| bad("finer than a nanosecond"))?;
        let secs = u64::try_from(nanos / NS_PER_S).map_err(|_| bad("too large"))?;
        // The remainder is below 10^9, so it fits a u32.
        let sub = (nanos % NS_PER_S) as u32;
        Ok(HumanDuration(Duration::new(secs, sub)))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0");
        }
        write_in_units(f, nanos, DURATION_UNITS, "ns")
    }
}

text_serde!(HumanDuration, "a duration such as 15ms, 1.5s or 0");

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Multiplier of a size unit: `B` (or none), SI `KB`/`MB`/`GB` (×1000) and binary
/// `KiB`/`MiB`/`GiB` (×1024), letters in any case. There is deliberately no bare `k`/`K`:
/// nobody agrees whether it means 1000 or 1024.
fn size_multiplier(unit: &str) -> Option<u128> {
    let m: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000 * 1000,
        "gb" => 1000 * 1000 * 1000,
        "kib" => KIB,
        "mib" => MIB,
        "gib" => GIB,
        _ => return None,
    };
    Some(u128::from(m))
}

/// A number of bytes: `512` or `512B`, `16KB` (16,000), `16KiB` (16,384), `1MiB`, `2GiB`.
/// Prints in the largest binary unit that divides it exactly, else in bytes (`16000B`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` KiB.
    pub const fn kib(n: u64) -> Self {
        ByteSize(n * KIB)
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n * MIB)
    }

    /// The number of bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = ValueError;

    fn from_str(input: &str) -> Result<Self, ValueError> {
        let bad = |reason: &str| ValueError::new("size", input, reason);
        let garbage = "expected a number with a unit (B, KB, MB, GB, KiB, MiB, GiB)";
        let n = Number::split(input).map_err(|e| match e {
            NumberError::Negative => bad("must not be negative"),
            NumberError::Malformed => bad(garbage),
            NumberError::TooLarge => bad("too large"),
        })?;
        let per_unit = size_multiplier(n.unit).ok_or_else(|| bad(garbage))?;
        let bytes =
            n.times(per_unit).map_err(|_| bad("too large"))?.ok_or_else(|| bad("not a whole number of bytes"))?;
        u64::try_from(bytes).map(ByteSize).map_err(|_| bad("too large"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0B");
        }
        let units = [("GiB", u128::from(GIB)), ("MiB", u128::from(MIB)), ("KiB", u128::from(KIB))];
        write_in_units(f, u128::from(self.0), &units, "B")
    }
}

text_serde!(ByteSize, "a size such as 16KiB, 1MiB or a number of bytes");

/// Multiplier (to bits per second) of a bandwidth unit.
///
/// Bits: `bit`/`bps`, `kbit`/`kbps`, `mbit`/`mbps`, `gbit`/`gbps` in any case, and `b/s`,
/// `kb/s`, `Mb/s`... with a lowercase `b`. Bytes: a size unit ending in an uppercase `B`
/// followed by `/s` (`B/s`, `KB/s`, `MB/s`, `MiB/s`, ...), counted ×8. The case of that
/// one `b` is the only case that matters, as on every network datasheet.
fn bandwidth_multiplier(unit: &str) -> Option<u128> {
    if let Some(per_second) = unit.strip_suffix("/s") {
        if per_second.ends_with('B') {
            return size_multiplier(per_second).map(|m| m * 8);
        }
        return match per_second.to_ascii_lowercase().as_str() {
            "b" => Some(1),
            "kb" => Some(1_000),
            "mb" => Some(1_000_000),
            "gb" => Some(1_000_000_000),
            _ => None,
        };
    }
    match unit.to_ascii_lowercase().as_str() {
        "bit" | "bps" => Some(1),
        "kbit" | "kbps" => Some(1_000),
        "mbit" | "mbps" => Some(1_000_000),
        "gbit" | "gbps" => Some(1_000_000_000),
        _ => None,
    }
}

/// A link speed in bits per second, always greater than zero: `500kbit`, `34mbit`,
/// `100Mbit`, `1gbps`, or bytes per second such as `10MB/s` (= 80mbit).
/// Prints as `34mbit` (the largest of gbit/mbit/kbit dividing it exactly, else `bit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bandwidth(u64);

impl Bandwidth {
    /// A bandwidth of `bps` bits per second; `None` for zero.
    pub const fn new(bps: u64) -> Option<Self> {
        if bps == 0 { None } else { Some(Bandwidth(bps)) }
    }

    /// Bits per second (never zero).
    pub const fn bits_per_second(self) -> u64 {
        self.0
    }

    /// Bytes per second, rounded down but at least 1.
    pub const fn bytes_per_second(self) -> u64 {
        if self.0 < 8 { 1 } else { self.0 / 8 }
    }
}

impl FromStr for Bandwidth {
    type Err = ValueError;

    fn from_str(input: &str) -> Result<Self, ValueError> {
        let bad = |reason: &str| ValueError::new("bandwidth", input, reason);
        let garbage = "expected a number with a unit (kbit, mbit, gbit, or bytes per second such as 10MB/s)";
        let n = Number::split(input).map_err(|e| match e {
            NumberError::Negative => bad("must not be negative"),
            NumberError::Malformed => bad(garbage),
            NumberError::TooLarge => bad("too large"),
        })?;
        if n.is_zero() && (n.unit.is_empty() || bandwidth_multiplier(n.unit).is_some()) {
            return Err(bad("must be greater than 0"));
        }
        if n.unit.is_empty() {
            let hint = format!("add a unit, e.g. {}mbit", input.trim());
            return Err(ValueError::new("bandwidth", input, hint));
        }
        let per_unit = bandwidth_multiplier(n.unit).ok_or_else(|| bad(garbage))?;
        let bps = n
            .times(per_unit)
            .map_err(|_| bad("too large"))?
            .ok_or_else(|| bad("not a whole number of bits per second"))?;
        let bps = u64::try_from(bps).map_err(|_| bad("too large"))?;
        Bandwidth::new(bps).ok_or_else(|| bad("must be greater than 0"))
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [("gbit", 1_000_000_000), ("mbit", 1_000_000), ("kbit", 1_000)];
        write_in_units(f, u128::from(self.0), &units, "bit")
    }
}

text_serde!(Bandwidth, "a bandwidth such as 34mbit or 10MB/s");

/// A percentage from 0 to 100 inclusive: `25`, `25%`, `12.5%`. Prints as `25%`.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Percent(f64);

impl Percent {
    /// All of it.
    pub const FULL: Percent = Percent(100.0);

    /// A default written in the code, from 0 to 100 (not checked: no input reaches it).
    pub(crate) const fn constant(value: f64) -> Percent {
        Percent(value)
    }

    /// `value` percent; `None` unless it is a number from 0 to 100.
    pub fn new(value: f64) -> Option<Self> {
        // `+ 0.0` turns -0 into 0 so it prints as `0%`.
        (0.0..=100.0).contains(&value).then_some(Percent(value + 0.0))
    }

    /// The percentage, 0 to 100.
    pub const fn value(self) -> f64 {
        self.0
    }

    /// The share, 0.0 to 1.0.
    pub fn fraction(self) -> f64 {
        self.0 / 100.0
    }
}

impl Default for Percent {
    fn default() -> Self {
        Percent::FULL
    }
}

impl FromStr for Percent {
    type Err = ValueError;

    fn from_str(input: &str) -> Result<Self, ValueError> {
        let s = input.trim();
        let s = s.strip_suffix('%').unwrap_or(s).trim_end();
        let value: f64 =
            s.parse().map_err(|_| ValueError::new("percentage", input, "expected a number from 0 to 100, e.g. 25%"))?;
        Percent::new(value).ok_or_else(|| ValueError::new("percentage", input, "must be between 0 and 100"))
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // f64's Display is the shortest text that parses back to the same value.
        write!(f, "{}%", self.0)
    }
}

text_serde!(Percent, "a percentage such as 25%");
