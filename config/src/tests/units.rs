//! Unit parsers: good and bad inputs, canonical Display, round trips, serde forms.

use std::time::Duration;

use crate::*;

/// Parses every `good` input to its value and prints it canonically; every `bad` input fails
/// with a message containing the given text; every canonical form parses back.
fn check_table<T>(good: &[(&str, T, &str)], bad: &[(&str, &str)])
where
    T: std::str::FromStr<Err = ValueError> + std::fmt::Display + std::fmt::Debug + PartialEq,
{
    for (input, value, canonical) in good {
        let parsed: T = input.parse().unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(&parsed, value, "{input:?}");
        assert_eq!(parsed.to_string(), *canonical, "{input:?}");
        assert_eq!(canonical.parse::<T>().as_ref(), Ok(value), "{canonical:?}");
    }
    for (input, want) in bad {
        let err = input.parse::<T>().expect_err(input).to_string();
        assert!(err.contains(want), "{input:?}: {err}");
    }
}

#[test]
fn durations() {
    let us = Duration::from_micros;
    let ms = Duration::from_millis;
    let s = Duration::from_secs;
    let good = [
        ("15ms", ms(15), "15ms"),
        ("1.5s", ms(1500), "1500ms"),
        ("250us", us(250), "250us"),
        ("250µs", us(250), "250us"),
        ("2m", s(120), "2m"),
        ("90s", s(90), "90s"),
        ("3600s", s(3600), "1h"),
        ("1h", s(3600), "1h"),
        ("8h", s(8 * 3600), "8h"),
        ("0", Duration::ZERO, "0"),
        ("0ms", Duration::ZERO, "0"),
        ("0.0", Duration::ZERO, "0"),
        (" 15 ms ", ms(15), "15ms"),
        ("0.5ms", us(500), "500us"),
        (".5s", ms(500), "500ms"),
        ("1.000000000000s", s(1), "1s"),
        ("7ns", Duration::from_nanos(7), "7ns"),
        ("1.1s", ms(1100), "1100ms"),
    ]
    .map(|(i, d, c)| (i, HumanDuration(d), c));
    let garbage = "expected a number with a unit (us, ms, s, m, h)";
    let bad = [
        ("15", "invalid duration '15': add a unit, e.g. 15ms"),
        ("1.5", "add a unit"),
        ("-5ms", "invalid duration '-5ms': must not be negative"),
        ("-0", "must not be negative"),
        ("x", "invalid duration 'x': expected a number with a unit (us, ms, s, m, h)"),
        ("", garbage),
        ("ms", garbage),
        ("15 parsecs", garbage),
        ("15MS", garbage),
        ("1.2.3s", garbage),
        ("1e3ms", garbage),
        ("0.1ns", "finer than a nanosecond"),
        ("99999999999999999999999h", "too large"),
    ];
    check_table(&good, &bad);
}

#[test]
fn byte_sizes() {
    let good = [
        ("16KiB", 16 * 1024, "16KiB"),
        ("16kib", 16 * 1024, "16KiB"),
        ("1MiB", 1 << 20, "1MiB"),
        ("2GiB", 2 << 30, "2GiB"),
        ("1024MiB", 1 << 30, "1GiB"),
        ("512", 512, "512B"),
        ("512B", 512, "512B"),
        ("512b", 512, "512B"),
        ("16KB", 16_000, "16000B"),
        ("16kB", 16_000, "16000B"),
        ("2MB", 2_000_000, "2000000B"),
        ("1GB", 1_000_000_000, "1000000000B"),
        ("1.5KiB", 1536, "1536B"),
        ("1.5MiB", 3 << 19, "1536KiB"),
        ("0", 0, "0B"),
    ]
    .map(|(i, n, c)| (i, ByteSize(n), c));
    let bad = [
        ("16k", "invalid size '16k': expected a number with a unit (B, KB, MB, GB, KiB, MiB, GiB)"),
        ("16K", "expected a number with a unit"),
        ("16 bytes", "expected a number with a unit"),
        ("-1KiB", "must not be negative"),
        ("1.5B", "not a whole number of bytes"),
        ("20000000000GiB", "too large"),
        ("", "expected a number"),
    ];
    check_table(&good, &bad);
}

#[test]
fn bandwidths() {
    let good = [
        ("34mbit", 34_000_000, "34mbit"),
        ("100Mbit", 100_000_000, "100mbit"),
        ("1gbit", 1_000_000_000, "1gbit"),
        ("500kbit", 500_000, "500kbit"),
        ("34Mbps", 34_000_000, "34mbit"),
        ("1gbps", 1_000_000_000, "1gbit"),
        ("10MB/s", 80_000_000, "80mbit"),
        ("10Mb/s", 10_000_000, "10mbit"),
        ("1MiB/s", 8 << 20, "8388608bit"),
        ("1.5mbit", 1_500_000, "1500kbit"),
        ("1500bit", 1500, "1500bit"),
        ("1B/s", 8, "8bit"),
    ]
    .map(|(i, n, c)| (i, Bandwidth::new(n).unwrap(), c));
    let bad = [
        ("0", "invalid bandwidth '0': must be greater than 0"),
        ("0mbit", "must be greater than 0"),
        ("100", "add a unit, e.g. 100mbit"),
        ("-5mbit", "must not be negative"),
        ("34mb", "expected a number with a unit"),
        ("34 megabits", "expected a number with a unit"),
        ("0.1bit", "not a whole number"),
        ("fast", "expected a number with a unit"),
    ];
    check_table(&good, &bad);
    assert_eq!(Bandwidth::new(0), None);
    assert_eq!(Bandwidth::new(34_000_000).unwrap().bytes_per_second(), 4_250_000);
}

#[test]
fn percentages() {
    let good = [
        ("100", 100.0, "100%"),
        ("25%", 25.0, "25%"),
        ("12.5 %", 12.5, "12.5%"),
        ("0", 0.0, "0%"),
        ("-0", 0.0, "0%"),
        ("0.001%", 0.001, "0.001%"),
    ]
    .map(|(i, v, c)| (i, Percent::new(v).unwrap(), c));
    let bad = [
        ("150", "invalid percentage '150': must be between 0 and 100"),
        ("-1%", "between 0 and 100"),
        ("NaN", "between 0 and 100"),
        ("half", "expected a number from 0 to 100"),
    ];
    check_table(&good, &bad);
    assert_eq!(Percent::default().fraction(), 1.0);
}

#[test]
fn upstream_addresses() {
    let good = [
        ("db.example.com:3306", "db.example.com", 3306, "db.example.com:3306"),
        ("10.0.0.5:3306", "10.0.0.5", 3306, "10.0.0.5:3306"),
        ("[::1]:3307", "::1", 3307, "[::1]:3307"),
        ("mysql_primary:1", "mysql_primary", 1, "mysql_primary:1"),
        ("localhost:65535", "localhost", 65535, "localhost:65535"),
    ];
    for (input, host, port, canonical) in good {
        let addr: UpstreamAddr = input.parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((addr.host(), addr.port()), (host, port));
        assert_eq!(addr.to_string(), canonical);
        assert_eq!(canonical.parse::<UpstreamAddr>().unwrap(), addr);
    }
    let bad = [
        ("host:99999", "the port must be between 1 and 65535"),
        ("host:0", "between 1 and 65535"),
        ("host:", "must be a number"),
        ("host", "expected host:port"),
        (":3306", "the host must not be empty"),
        ("::1:3306", "brackets"),
        ("[::1]", "expected [IPv6]:port"),
        ("[nope]:3306", "not a valid IPv6 address"),
        ("10.0.0.300:3306", "not a valid name or IPv4 address"),
        ("bad host:3306", "not a valid name"),
        ("-db:3306", "not a valid name"),
    ];
    for (input, want) in bad {
        let err = input.parse::<UpstreamAddr>().expect_err(input).to_string();
        assert!(err.contains(want), "{input}: {err}");
        assert!(err.starts_with(&format!("invalid upstream address '{input}'")), "{err}");
    }
}

#[test]
fn numbers_from_yaml_and_json() {
    // Integers are read like the same text: bytes for sizes, errors asking for a unit elsewhere.
    let size: ByteSize = serde_yaml::from_str("512").unwrap();
    assert_eq!(size, ByteSize(512));
    let zero: HumanDuration = serde_json::from_str("0").unwrap();
    assert_eq!(zero, HumanDuration::ZERO);
    let pct: Percent = serde_json::from_str("12.5").unwrap();
    assert_eq!(pct.value(), 12.5);
    let err = serde_json::from_str::<HumanDuration>("15").unwrap_err().to_string();
    assert!(err.contains("add a unit, e.g. 15ms"), "{err}");
    let err = serde_json::from_str::<Bandwidth>("0").unwrap_err().to_string();
    assert!(err.contains("must be greater than 0"), "{err}");
    let err = serde_json::from_str::<ByteSize>("-1").unwrap_err().to_string();
    assert!(err.contains("must not be negative"), "{err}");
    let err = serde_json::from_str::<HumanDuration>("[1]").unwrap_err().to_string();
    assert!(err.contains("expected a duration such as 15ms"), "{err}");
}

#[test]
fn units_serialize_as_their_display_string() {
    let json = serde_json::to_string(&(
        HumanDuration::from_millis(1500),
        ByteSize::kib(16),
        Bandwidth::new(34_000_000),
        Percent::new(25.0),
        "[::1]:3306".parse::<UpstreamAddr>().unwrap(),
    ))
    .unwrap();
    assert_eq!(json, r#"["1500ms","16KiB","34mbit","25%","[::1]:3306"]"#);
}

#[test]
fn report_format_parses_for_the_command_line() {
    for f in [ReportFormat::Json, ReportFormat::Text, ReportFormat::Html] {
        assert_eq!(f.to_string().parse::<ReportFormat>(), Ok(f));
    }
    assert_eq!("HTML".parse::<ReportFormat>(), Ok(ReportFormat::Html));
    assert!("pdf".parse::<ReportFormat>().is_err());
}
