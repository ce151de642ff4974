//! Units: parsing sizes and rates (`10M`, `1.5G`, `500k`, binary units) and writing bytes,
//! durations and rates for people ("1.00 GiB in 412 ms (2.43 GiB/s)"). A leaf: imports
//! nothing of the crate.

use std::fmt::Write as _;

/// "1.00 GiB in 412 ms (2.43 GiB/s)"
pub fn amount(bytes: u64, seconds: f64) -> String {
    let mut s = format!("{} in {}", human_bytes(bytes), human_duration(seconds));
    if seconds > 0.0 {
        let _ = write!(s, " ({}/s)", human_bytes((bytes as f64 / seconds) as u64));
    }
    s
}

/// [`amount`], unless the bytes moved for a part of the wall time only (`moving`
/// seconds, the rest at least a second and a tenth of it spent waiting: for a first byte,
/// for the peer's end): then the rate is over the moving time, which is given beside it:
/// "20.0 MiB in 10 min 18 s (33.1 MiB/s while moving, 0.61 s)".
pub fn amount_moving(bytes: u64, seconds: f64, moving: Option<f64>) -> String {
    match moving {
        Some(moving) if moving > 0.0 && seconds - moving >= 1.0 && moving < 0.9 * seconds => {
            format!(
                "{} in {} ({}/s while moving, {})",
                human_bytes(bytes),
                human_duration(seconds),
                human_bytes((bytes as f64 / moving) as u64),
                human_duration(moving)
            )
        }
        _ => amount(bytes, seconds),
    }
}

/// 3 significant digits: "0.25 ms", "412 ms", "2.41 s", "41.2 s"; then "2 min 03 s",
/// "1 h 02 min".
pub fn human_duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    if seconds < 1.0 {
        let ms = seconds * 1000.0;
        return format!("{} ms", three_digits(ms));
    }
    if seconds < 60.0 {
        return format!("{} s", three_digits(seconds));
    }
    let whole = seconds.round() as u64;
    if whole < 3600 {
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        format!("{} h {:02} min", whole / 3600, whole / 60 % 60)
    }
}

/// 3 significant digits for values below 1000: "412", "41.2", "4.12", "0.41".
fn three_digits(value: f64) -> String {
    let digits = if value >= 99.95 {
        0
    } else if value >= 9.995 {
        1
    } else {
        2
    };
    format!("{value:.digits$}")
}

/// 3 significant digits with binary units: "512 B", "12.0 MiB", "1.00 GiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {}", UNITS[unit])
}

/// Parses a byte count or rate: `4096`, `10M`, `1.5G`, `500k`, `2MiB`, `10M/s`.
/// Units are binary whatever their spelling (pv's habit): k = 1024, M = 1024², …
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = || {
        format!("'{text}' is not a size: expected a number with an optional unit k, M, G or T (binary: 10M = 10 MiB)")
    };
    let s = text.trim();
    let s = s.strip_suffix("/s").unwrap_or(s);
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let unit = unit.trim();
    let unit = unit
        .strip_suffix('B')
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(unit);
    let unit = unit.strip_suffix('i').unwrap_or(unit);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(bad()),
    };
    exact_bytes(number, shift).ok_or_else(bad)
}

/// `number << shift` computed in integers (an f64 rounds above 2^53): the integer part
/// exactly, the fraction's bits as far as the unit reaches, rounded to the nearest byte.
fn exact_bytes(number: &str, shift: u32) -> Option<u64> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits_only(whole) || !digits_only(fraction) {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    // Digits beyond 30 cannot change a u64 result of a shift of at most 40 bits.
    let fraction = &fraction[..fraction.len().min(30)];
    let scale = 10u128.pow(fraction.len() as u32);
    let numerator: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let fraction_bytes = ((numerator << shift) + scale / 2) / scale;
    let bytes = whole.checked_shl(shift)?.checked_add(fraction_bytes)?;
    if whole >= 1 << 64 || bytes >= u64::MAX as u128 {
        return None;
    }
    u64::try_from(bytes).ok()
}

/// `--limit`: a rate of at least one byte per second.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    match parse_bytes(text)? {
        0 => Err(format!("'{text}': a rate limit must be above 0")),
        n => Ok(n),
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`): timestamps without a date crate.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

/// (year, month, day) to days since 1970-01-01: [`civil_from_days`] inverted (Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = y - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Bytes as lowercase hex digits: a `pin=sha256:` fingerprint, a SigV4 hash or signature.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip() {
        for days in [-719_468, -1, 0, 11_016, 15_849, 20_783, 47_541] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(16_677), (2015, 8, 30));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
    }

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("500k"), Ok(500 * 1024));
        assert_eq!(parse_bytes("10M"), Ok(10 << 20));
        assert_eq!(parse_bytes("10MiB"), Ok(10 << 20));
        assert_eq!(parse_bytes("10M/s"), Ok(10 << 20));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert_eq!(parse_bytes("2T"), Ok(2 << 40));
        assert!(parse_bytes("ten").is_err());
        assert!(parse_bytes("10X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn sizes_parse_exactly_in_integers() {
        // 2^53 + 1: an f64 rounds it to 2^53.
        assert_eq!(parse_bytes("9007199254740993"), Ok(9_007_199_254_740_993));
        assert_eq!(parse_rate("9007199254740993"), Ok(9_007_199_254_740_993));
        assert_eq!(parse_bytes("1.5M"), Ok(1_572_864));
        assert_eq!(parse_bytes("8191.999999T"), Ok(9_007_199_253_641_480));
        assert_eq!(parse_bytes("0.5k"), Ok(512));
        assert_eq!(parse_bytes(".5k"), Ok(512));
        assert_eq!(parse_bytes("1.5"), Ok(2));
        assert_eq!(parse_bytes("18446744073709551614"), Ok(u64::MAX - 1));
        assert!(parse_bytes("18446744073709551615").is_err());
        assert!(parse_bytes("16777216T").is_err());
        assert!(parse_bytes(".").is_err());
        assert!(parse_bytes("1.2.3").is_err());
        assert!(parse_bytes("99999999999999999999999999999999999999999").is_err());
    }

    #[test]
    fn the_rate_is_over_the_moving_time_when_most_of_the_run_waited() {
        assert_eq!(
            amount_moving(20 << 20, 618.0, Some(0.61)),
            "20.0 MiB in 10 min 18 s (32.8 MiB/s while moving, 610 ms)"
        );
        // Moving nearly all the time, or waiting under a second: the plain line.
        assert_eq!(
            amount_moving(1 << 20, 2.0, Some(1.95)),
            amount(1 << 20, 2.0)
        );
        assert_eq!(
            amount_moving(1 << 20, 0.5, Some(0.01)),
            amount(1 << 20, 0.5)
        );
        assert_eq!(amount_moving(0, 5.0, None), amount(0, 5.0));
    }

    #[test]
    fn sizes_are_human() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(12 << 20), "12.0 MiB");
        assert_eq!(human_bytes(1 << 30), "1.00 GiB");
        assert_eq!(human_bytes(300 << 10), "300 KiB");
    }

    #[test]
    fn durations_are_human() {
        assert_eq!(human_duration(0.00025), "0.25 ms");
        assert_eq!(human_duration(0.412), "412 ms");
        assert_eq!(human_duration(0.0412), "41.2 ms");
        assert_eq!(human_duration(2.414), "2.41 s");
        assert_eq!(human_duration(41.24), "41.2 s");
        assert_eq!(human_duration(123.0), "2 min 03 s");
        assert_eq!(human_duration(3720.0), "1 h 02 min");
        assert_eq!(amount(1 << 30, 0.5), "1.00 GiB in 500 ms (2.00 GiB/s)");
    }
}
