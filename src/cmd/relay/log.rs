//! `--log PATH` (or `-` for stderr): one JSON line per connection, written (one write, no
//! buffer of ours) as the connection ends. The field names are the man page's (`--log`).
//!
//! The first line (`"event":"start"`) is written when the relay starts, so a log that
//! cannot be written (`/dev/full`, a full disk) is an error before anything is served,
//! not a line lost later. A write that fails later stops the log: said once on stderr
//! at once, and again in the final report (`log_error`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;

use super::report::ConnReport;
use crate::report::JsonObject;

enum Out {
    Stderr,
    File(File),
}

pub struct ConnLog {
    out: Out,
    /// As given (`-` or the path), for messages.
    name: String,
    /// The first write error; nothing more is written after it.
    pub error: Option<String>,
}

impl ConnLog {
    /// Opens `path` for appending (created 0644 if missing; a FIFO waits for its reader)
    /// and writes the start line.
    pub fn open(path: &str, a: &str, b: &str) -> anyhow::Result<ConnLog> {
        let out = if path == "-" {
            Out::Stderr
        } else {
            Out::File(
                OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o644)
                    .custom_flags(nix::libc::O_CLOEXEC)
                    .open(path)
                    .with_context(|| format!("--log {path}: cannot open"))?,
            )
        };
        let mut log = ConnLog {
            out,
            name: path.to_string(),
            error: None,
        };
        let mut o = JsonObject::new();
        o.str("time", &now_rfc3339())
            .str("event", "start")
            .str("a", a)
            .str("b", b)
            .num("pid", u64::from(std::process::id()));
        log.write_line(&o.finish())
            .with_context(|| format!("--log {path}: cannot write"))?;
        Ok(log)
    }

    /// Writes the line of a connection that ended. After a write error nothing more is
    /// written; the error is said once on stderr and kept for the final report.
    pub fn connection(&mut self, report: &ConnReport, worker: usize) {
        if self.error.is_some() {
            return;
        }
        let line = report.log_line(&now_rfc3339(), worker);
        if let Err(e) = self.write_line(&line) {
            let text = format!("--log {}: {e}; no more lines are written", self.name);
            eprintln!("zerocat: {text}");
            self.error = Some(text);
        }
    }

    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        match &mut self.out {
            Out::Stderr => {
                let mut err = std::io::stderr().lock();
                err.write_all(&bytes)?;
                err.flush()
            }
            Out::File(f) => {
                f.write_all(&bytes)?;
                f.flush()
            }
        }
    }
}

/// Now, UTC, to the millisecond: `2026-11-23T16:34:40.123Z`.
fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

fn rfc3339(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
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
    fn timestamps_are_utc_rfc3339_to_the_millisecond() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_451_680, 123), "2026-11-23T16:34:40.123Z");
        assert_eq!(rfc3339(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }
}
