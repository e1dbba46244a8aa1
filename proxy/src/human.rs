//! Human-sized numbers for sentences and renderings: `1.50 ms`, `2.0 MiB`, `12,345`, `34 Mbit/s`.
//!
//! A leaf: it imports nothing from the crate, so the analysers (`findings`, `link`) and the
//! renderers (`report`) can all write numbers the same way without depending on each other.

/// Microseconds: `850 µs`, `1.50 ms`, `2.25 s`.
pub fn us(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.2} ms", us as f64 / 1e3),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

/// Bytes in binary units: `512 B`, `1.5 KiB`, `20.0 MiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

/// A configured size, in whole units when it is a whole number of them (`4 KiB`, `6 MiB`,
/// `208 KiB`), else as [`bytes`] writes it: buffer sizes and limits, as people set them.
pub fn size(b: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match UNITS.iter().find(|(_, unit)| b >= *unit && b.is_multiple_of(*unit)) {
        Some((name, unit)) => format!("{} {name}", b / unit),
        None => bytes(b),
    }
}

/// A count with thousands separators: 12345678 → `12,345,678`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun, singular for one: `1 round trip`, `2,000 round trips`.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

/// A link's bandwidth in bits per second: `10 Gbit/s`, `34 Mbit/s`, `512 kbit/s`.
pub fn bandwidth(bits_per_second: u64) -> String {
    if bits_per_second >= 1_000_000_000 && bits_per_second.is_multiple_of(100_000_000) {
        let tenths = bits_per_second / 100_000_000;
        if tenths.is_multiple_of(10) {
            format!("{} Gbit/s", tenths / 10)
        } else {
            format!("{}.{} Gbit/s", tenths / 10, tenths % 10)
        }
    } else if bits_per_second >= 1_000_000 {
        format!("{} Mbit/s", bits_per_second / 1_000_000)
    } else {
        format!("{} kbit/s", bits_per_second / 1000)
    }
}

/// A measured rate in bytes per second: `12.5 MB/s`.
pub fn rate(bytes_per_second: u64) -> String {
    format!("{:.1} MB/s", bytes_per_second as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unit_at_its_edges() {
        assert_eq!(
            [us(0), us(999), us(1000), us(1_500), us(2_250_000)],
            ["0 µs", "999 µs", "1.00 ms", "1.50 ms", "2.25 s"]
        );
        assert_eq!(
            [bytes(1023), bytes(1024), bytes(1536), bytes(20 << 20)],
            ["1023 B", "1.0 KiB", "1.5 KiB", "20.0 MiB"]
        );
        assert_eq!(
            [size(0), size(4096), size(6 << 20), size(212_992), size(1536), size(1000)],
            ["0 B", "4 KiB", "6 MiB", "208 KiB", "1.5 KiB", "1000 B"]
        );
        assert_eq!([count(0), count(999), count(1000), count(12_345_678)], ["0", "999", "1,000", "12,345,678"]);
        assert_eq!([bandwidth(34_000_000), bandwidth(512_000)], ["34 Mbit/s", "512 kbit/s"]);
        assert_eq!(rate(12_500_000), "12.5 MB/s");
        assert_eq!(
            [counted(0, "loop", "loops"), counted(1, "loop", "loops"), counted(1000, "query", "queries")],
            ["0 loops", "1 loop", "1,000 queries"]
        );
    }
}
