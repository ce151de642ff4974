//! `--limit RATE`: pace a transfer by the length each syscall is asked for, so splice,
//! sendfile and copy_file_range stay the path (pv's `-L`, without falling back to
//! read/write). Also the parser of sizes and rates (`10M`, `1.5G`, `500k`, binary units).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many slices a second is cut into: each syscall asks for at most rate/PACE_HZ bytes.
const PACE_HZ: u64 = 8;

/// Unused credit kept after a stall: a source that paused for a minute does not earn a
/// minute of full speed.
const MAX_CREDIT: Duration = Duration::from_secs(1);

/// Longest single sleep, so SIGINT/SIGTERM are noticed quickly.
const SLEEP_SLICE: Duration = Duration::from_millis(50);

/// Holds a transfer to `rate` bytes per second.
#[derive(Debug)]
pub struct Pacer {
    rate: u64,
    /// When the bytes counted so far were "due from"; starts at the first request.
    epoch: Mutex<Option<Instant>>,
}

impl Pacer {
    pub fn new(rate: u64) -> Pacer {
        Pacer {
            rate: rate.max(1),
            epoch: Mutex::new(None),
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Called before each syscall with the bytes delivered so far: sleeps while the
    /// transfer is ahead of the rate, then returns how many bytes the next call may ask
    /// for (at most `len`, never 0). Returns early, unslept, once SIGINT/SIGTERM arrived.
    pub fn next_chunk(&self, delivered: u64, len: usize) -> usize {
        let due = Duration::from_secs_f64(delivered as f64 / self.rate as f64);
        loop {
            let now = Instant::now();
            let wait = {
                let mut epoch = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
                let start = epoch.get_or_insert(now);
                let elapsed = now - *start;
                if elapsed > due + MAX_CREDIT {
                    // Stalled: forget the credit beyond MAX_CREDIT.
                    *start = now - due - MAX_CREDIT;
                }
                due.checked_sub(elapsed).unwrap_or_default()
            };
            if wait.is_zero() || crate::process::interrupted() {
                break;
            }
            std::thread::sleep(wait.min(SLEEP_SLICE));
        }
        let quantum = (self.rate / PACE_HZ).max(1);
        len.min(usize::try_from(quantum).unwrap_or(usize::MAX))
            .max(1)
    }
}

/// "; limited to 2.00 MiB/s" for a `-v` plan line, or nothing.
pub fn plan_words(limit: Option<u64>) -> String {
    limit.map_or_else(String::new, |rate| {
        format!("; limited to {}/s", crate::report::human_bytes(rate))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn chunks_are_an_eighth_of_the_rate_and_never_zero() {
        let pacer = Pacer::new(8 << 20);
        assert_eq!(pacer.next_chunk(0, 1 << 30), 1 << 20);
        assert_eq!(pacer.next_chunk(0, 4096), 4096);
        assert_eq!(Pacer::new(3).next_chunk(0, 100), 1);
    }

    #[test]
    fn a_transfer_ahead_of_the_rate_waits() {
        let pacer = Pacer::new(1 << 20);
        let started = Instant::now();
        pacer.next_chunk(0, 1);
        pacer.next_chunk(256 << 10, 1); // a quarter second's worth already delivered
        assert!(started.elapsed() >= Duration::from_millis(240));
    }
}
